// encoder_forward and encoder_backward: token and position embeddings.
#ifndef COPPELIUS_ENCODER_CUH
#define COPPELIUS_ENCODER_CUH
#include "common.cuh"

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]. One thread per pack of 8 output values;
// grid.x = ceil(B*T*C / 8 / 256).
extern "C" __global__ void __launch_bounds__(256)
    encoder_forward(__half* out, const int* tokens, const __half* wte, const __half* wpe, int B, int T, int C, int Vp) {
    using namespace cpl;
    const i64 total = (i64)B * T * C;
    const i64 i = ((i64)blockIdx.x * THREADS + threadIdx.x) * PACK;
    if (i >= total) return;
    if (C % PACK == 0 && aligned16(out) && aligned16(wte) && aligned16(wpe)) {  // the pack lies in one row
        const i64 bt = i / C;
        const int c = (int)(i - bt * C), t = (int)(bt % T);
        Pack a = load_pack(wte, (i64)tokens[bt] * C + c, (i64)Vp * C, true);
        const Pack p = load_pack(wpe, (i64)t * C + c, (i64)T * C, true);
#pragma unroll
        for (int k = 0; k < PACK; ++k) a.v[k] = a.v[k] + p.v[k];
        store_pack(out, i, total, true, a);
        return;
    }
    for (i64 j = i; j < i + PACK && j < total; ++j) {
        const i64 bt = j / C;
        const int c = (int)(j - bt * C), t = (int)(bt % T);
        st(out, j, ld(wte, (i64)tokens[bt] * C + c) + ld(wpe, (i64)t * C + c));
    }
}

// encoder_backward: dwte[v,:] += sum of dout[p,:] over the positions p with tokens[p] == v, and
// dwpe[t,:] = sum over b of dout[b,t,:].
//
// Deterministic without scratch memory (the kernel's only buffers are its operands) and without
// atomics: every output element is summed by one thread, in position order, starting from 0 and
// added to the old dwte last; exactly what the cpu device's np.add.at does, so the two agree bit
// for bit (dwpe likewise, summed over b in order).
//
// Rows of dwte: a block owns ROWS = 8 consecutive vocabulary rows and a CHUNK of 256 channels
// (grid.y), a warp one of the rows, a lane 8 channels (one 16-byte access of a dout row). Its sums
// live in the lane's registers for the whole kernel. The block walks all B*T tokens in windows of
// 2048 staged in shared memory; a window's 32-token chunks holding none of the block's rows are
// skipped with one bitmask (most chunks, for a large vocabulary), and in the others each warp picks
// its matches with one ballot and queues them; every INFLIGHT queued matches it loads their dout
// rows at once and adds them in position order. A row no token hits is not written.
// (The code keeps a warp's rows general, ROWS_PER_WARP; with more than one, a match adds to all
// of them, +0 to the others, since a run-time row index would put the sums in local memory.)
//
// Cost: every block reads the token ids (L2 hits), each dout row is read by the warps owning its
// token. A frequent token serializes on its warp, whose chain of adds is the kernel's floor. With
// 64 rows a block (8 a warp), a byte vocabulary (Vp = 256) had 8 blocks of dwte work on the whole
// card and 64 +0 adds a match: 1.2-1.3 ms on the H200 for small (B*T = 16384, C = 384) and gpt2-124m
// (B*T = 32768, C = 768), against tens of microseconds for the bytes it must move. One row a warp
// gives 8x the warps and 8x fewer adds, with deeper load batches (INFLIGHT 16).
// For a small vocabulary (at most SEGMENTED_VOCAB rows: the byte-level models) that chain is split: a
// block owns one row, and its 8 warps sum 8 segments of the positions, combined in segment order
// (segmented_row; the order is formats/geometry.py's encoder_segments, which the cpu device and the C
// host follow too): small's 0.72 ms chain becomes an eighth. A large vocabulary keeps the scheme above
// (splitting it would multiply the blocks that scan every token id); the way further there is, with
// scratch memory that the catalog's ABI does not give this kernel, a counting sort of positions by token.
//
// Rows of dwpe: blocks with blockIdx.x >= ceil(Vp / ROWS), a warp per position t, a lane 8 channels.
//
// Geometry (formats/geometry.py): grid = (ceil(Vp / 8) + ceil(T / 8), ceil(C / 256)), blocks of 256; with
// Vp <= SEGMENTED_VOCAB, grid.x = Vp + ceil(T / 8) (a block a row).
namespace cpl {
namespace eb {
constexpr int ROWS = 8;  // one vocabulary row a warp: many blocks, and no +0 adds (see above)
constexpr int ROWS_PER_WARP = ROWS / WARPS;
constexpr int CHUNK = 32 * PACK;
constexpr int WINDOW = THREADS * PACK;
constexpr int CHUNKS = WINDOW / 32;  // 64: one bit each in a 64-bit mask
constexpr int INFLIGHT = 16;  // dout rows a warp loads at once (with 64 rows a block, 8 spilled)
constexpr int POSITIONS = WARPS;  // dwpe positions per block
constexpr int SEGMENTS = WARPS;   // up to SEGMENTED_VOCAB rows: one row a block, a warp each segment of its positions
constexpr int SEGMENTED_VOCAB = 512;
}  // namespace eb

// tokens[p .. p+8), -1 at or past n.
__device__ __forceinline__ void load_tokens(int (&t)[PACK], const int* tokens, i64 p, i64 n) {
    if (p + PACK <= n && aligned16(tokens + p)) {
        const int4 a = *reinterpret_cast<const int4*>(tokens + p), b = *reinterpret_cast<const int4*>(tokens + p + 4);
        t[0] = a.x, t[1] = a.y, t[2] = a.z, t[3] = a.w, t[4] = b.x, t[5] = b.y, t[6] = b.z, t[7] = b.w;
        return;
    }
#pragma unroll
    for (int k = 0; k < PACK; ++k) t[k] = p + k < n ? tokens[p + k] : -1;
}

// The dout rows (channels c..c+8) of a warp's queued matches, all loads in flight before the first add: entry
// q of the queue lives in lane q (q_pos, its position), queued entries in all.
__device__ __forceinline__ void load_queued(uint4 (&x)[eb::INFLIGHT], const __half* dout, int q_pos, int queued,
                                            int c, int C, bool vec) {
#pragma unroll
    for (int q = 0; q < eb::INFLIGHT; ++q) {
        const i64 row = (i64)__shfl_sync(FULL, q_pos, q) * C;
        if (q < queued) x[q] = load_raw(dout, row + c, row + C, vec);
    }
}

// Row v of dwte on one block, for a small vocabulary: warp w sums the positions of segment w (the order of
// formats/geometry.py's encoder_segments) holding token v, in position order, INFLIGHT dout rows loaded at once;
// the warps' sums are then added in warp order, one thread a channel, and to the old row last.
__device__ __forceinline__ void segmented_row(__half* dwte, const __half* dout, const int* tokens, int v, i64 N,
                                              int C, int c, bool vec) {
    using namespace eb;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const i64 length = (i64)PACK * ((N + PACK * SEGMENTS - 1) / (PACK * SEGMENTS));
    const i64 begin = min(N, warp * length), end = min(N, begin + length);
    float acc[PACK] = {};
    int q_pos = 0, queued = 0;
    bool touched = false;
    auto flush = [&]() {
        uint4 x[INFLIGHT];
        load_queued(x, dout, q_pos, queued, c, C, vec);
#pragma unroll
        for (int q = 0; q < INFLIGHT; ++q) {
            if (q >= queued) break;
            const Pack f = unpack(x[q]);
#pragma unroll
            for (int e = 0; e < PACK; ++e) acc[e] += f.v[e];
        }
        touched |= queued > 0;
        queued = 0;
    };
    // a lane holds 8 consecutive positions; the next 256 load while these are matched
    int next[PACK];
    load_tokens(next, tokens, begin + lane * PACK, end);
    for (i64 p0 = begin; p0 < end; p0 += 32 * PACK) {
        unsigned bits = 0;  // bit k: position p0 + 8 lane + k holds v
#pragma unroll
        for (int k = 0; k < PACK; ++k) bits |= next[k] == v ? 1u << k : 0u;
        load_tokens(next, tokens, p0 + 32 * PACK + lane * PACK, end);
        unsigned lanes = __ballot_sync(FULL, bits != 0);
        while (lanes) {  // warp-uniform, in position order: lanes ascending, then k
            const int l = __ffs(lanes) - 1;
            lanes &= lanes - 1;
            unsigned ks = __shfl_sync(FULL, bits, l);
            while (ks) {
                const int k = __ffs(ks) - 1;
                ks &= ks - 1;
                if (lane == queued) q_pos = (int)(p0 + l * PACK + k);
                if (++queued == INFLIGHT) flush();
            }
        }
    }
    if (queued) flush();

    __shared__ float sums[SEGMENTS][CHUNK];
    __shared__ int hits[SEGMENTS];
#pragma unroll
    for (int e = 0; e < PACK; ++e) sums[warp][lane * PACK + e] = acc[e];
    if (lane == 0) hits[warp] = touched;
    __syncthreads();
    const int ch = (int)blockIdx.y * CHUNK + (int)threadIdx.x;  // one channel a thread
    bool any = false;
#pragma unroll
    for (int w = 0; w < SEGMENTS; ++w) any |= hits[w] != 0;
    if (!any || ch >= C) return;
    float total = sums[0][threadIdx.x];
#pragma unroll
    for (int w = 1; w < SEGMENTS; ++w) total += sums[w][threadIdx.x];
    const i64 at = (i64)v * C + ch;
    dwte[at] = __float2half_rn(__half2float(dwte[at]) + total);
}
}  // namespace cpl

extern "C" __global__ void __launch_bounds__(256, 2)
    encoder_backward(__half* dwte, __half* dwpe, const __half* dout, const int* tokens, int B, int T, int C, int Vp) {
    using namespace cpl;
    using namespace cpl::eb;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int c = blockIdx.y * CHUNK + lane * PACK;  // this lane's first channel
    const bool vec = C % PACK == 0 && aligned16(dout) && aligned16(dwte) && aligned16(dwpe);
    const bool segmented = Vp <= SEGMENTED_VOCAB;
    const int groups = segmented ? Vp : (Vp + ROWS - 1) / ROWS;  // the blocks of dwte rows
    const i64 N = (i64)B * T;

    if ((int)blockIdx.x >= groups) {  // dwpe
        const int t = ((int)blockIdx.x - groups) * POSITIONS + warp;
        if (t >= T || c >= C) return;
        float s[PACK] = {};
        for (int b0 = 0; b0 < B; b0 += INFLIGHT) {
            uint4 x[INFLIGHT];
#pragma unroll
            for (int q = 0; q < INFLIGHT; ++q) {  // all in flight before the first add
                const i64 row = ((i64)min(b0 + q, B - 1) * T + t) * C;
                x[q] = load_raw(dout, row + c, row + C, vec);
            }
#pragma unroll
            for (int q = 0; q < INFLIGHT; ++q) {
                if (b0 + q >= B) break;
                const Pack f = unpack(x[q]);
#pragma unroll
                for (int k = 0; k < PACK; ++k) s[k] += f.v[k];
            }
        }
        Pack r;
#pragma unroll
        for (int k = 0; k < PACK; ++k) r.v[k] = s[k];
        store_pack(dwpe, (i64)t * C + c, (i64)t * C + C, vec, r);
        return;
    }

    if (segmented) {
        segmented_row(dwte, dout, tokens, (int)blockIdx.x, N, C, c, vec);
        return;
    }
    __shared__ int window[WINDOW];
    __shared__ unsigned char hit[WARPS];  // per warp's 256 positions: a bit per 32-token chunk
    const int g0 = blockIdx.x * ROWS;
    float acc[ROWS_PER_WARP][PACK] = {};
    unsigned touched = 0;  // bit k: row g0 + warp + 8k met a token

    // The warp's matches waiting for their dout rows, oldest first: entry i lives in lane i, so
    // that one batch of INFLIGHT loads spans chunks and windows (a frequent token's warp would
    // otherwise wait a full memory latency for every 32 tokens).
    int q_pos = 0, q_k = 0, queued = 0;
    auto flush = [&]() {
        uint4 x[INFLIGHT];
        load_queued(x, dout, q_pos, queued, c, C, vec);
#pragma unroll
        for (int q = 0; q < INFLIGHT; ++q) {
            const int kq = __shfl_sync(FULL, q_k, q);
            if (q >= queued) break;
            const Pack f = unpack(x[q]);
            touched |= 1u << kq;
            // Every sum takes f or +0 (exact: a sum that starts at +0 is never -0), so acc is
            // indexed by constants only and stays in registers.
#pragma unroll
            for (int k = 0; k < ROWS_PER_WARP; ++k) {
                const bool here = kq == k;
#pragma unroll
                for (int e = 0; e < PACK; ++e) acc[k][e] += here ? f.v[e] : 0.f;
            }
        }
        queued = 0;
    };

    int next[PACK];
    load_tokens(next, tokens, (i64)threadIdx.x * PACK, N);
    for (i64 p0 = 0; p0 < N; p0 += WINDOW) {
        int cur[PACK];
        bool any = false;
#pragma unroll
        for (int k = 0; k < PACK; ++k) {
            cur[k] = next[k];
            any |= (unsigned)(cur[k] - g0) < (unsigned)ROWS;
        }
        load_tokens(next, tokens, p0 + WINDOW + (i64)threadIdx.x * PACK, N);  // in flight while this window runs
        __syncthreads();  // the previous window is consumed
#pragma unroll
        for (int k = 0; k < PACK; ++k) window[threadIdx.x * PACK + k] = cur[k];
        const unsigned lanes = __ballot_sync(FULL, any);  // chunk j of this warp: lanes 4j .. 4j+3
        if (lane == 0) {
            unsigned bits = 0;
#pragma unroll
            for (int j = 0; j < 8; ++j) bits |= ((lanes >> (4 * j)) & 0xfu) ? 1u << j : 0u;
            hit[warp] = (unsigned char)bits;
        }
        __syncthreads();
        unsigned long long chunks = 0;
#pragma unroll
        for (int w = 0; w < WARPS; ++w) chunks |= (unsigned long long)hit[w] << (8 * w);

        while (chunks) {
            const int j = __ffsll((long long)chunks) - 1;
            chunks &= chunks - 1;
            const int rel = window[j * 32 + lane] - g0;
            unsigned mine = __ballot_sync(FULL, (unsigned)rel < (unsigned)ROWS && (rel & (WARPS - 1)) == warp);
            while (mine) {  // warp-uniform: every lane queues the same matches, in position order
                const int l = __ffs(mine) - 1;
                mine &= mine - 1;
                const int k = __shfl_sync(FULL, rel, l) / WARPS;
                if (lane == queued) q_pos = (int)(p0 + j * 32 + l), q_k = k;
                if (++queued == INFLIGHT) flush();
            }
        }
    }
    if (queued) flush();

    if (c >= C) return;
#pragma unroll
    for (int k = 0; k < ROWS_PER_WARP; ++k) {
        const int v = g0 + warp + WARPS * k;
        if (v >= Vp || !((touched >> k) & 1u)) continue;
        const i64 row = (i64)v * C;
        Pack w = load_pack(dwte, row + c, row + C, vec);
#pragma unroll
        for (int e = 0; e < PACK; ++e) w.v[e] = w.v[e] + acc[k][e];
        store_pack(dwte, row + c, row + C, vec, w);
    }
}

#endif
