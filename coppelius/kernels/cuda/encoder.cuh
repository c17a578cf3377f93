// encoder_forward and encoder_backward: token and position embeddings.
#ifndef COPPELIUS_ENCODER_CUH
#define COPPELIUS_ENCODER_CUH
#include "common.cuh"

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]. One thread per pack of 8 output values;
// grid.x = ceil(B*T*C / 8 / 256).
extern "C" __global__ void __launch_bounds__(256)
    encoder_forward(__half* out, const int* tokens, const __half* wte, const __half* wpe, int B, int T, int C, int Vp) {
    cpl::grid_dependency();
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

// encoder_sort: the positions 0 .. N-1 grouped by token, each group in position order (a stable counting sort),
// for encoder_backward: order[first[v] .. first[v+1]) are the positions holding token v, ascending; first[Vp] = N.
// Deterministic without atomics on the outputs: every entry has one writer, and its value is fixed by the tokens.
//
// A block of 1024 threads owns TOKENS consecutive vocabulary rows (grid.x = ceil(Vp / TOKENS)), a warp one contiguous
// thirty-second of the positions. Pass one: each warp counts its positions by token (shared-memory integer counts, exact in any order)
// and the positions whose token lies below the block's rows. Then the counts become cursors, token-major and
// warp-minor, so that warp w's matches of a token follow warps 0 .. w-1's. Pass two: each warp walks its
// positions in order, 32 at a time, ranking equal tokens among the lanes (__match_any_sync) and writing each
// position at its cursor. Every block reads all N token ids twice (L2 hits: 2 * ceil(Vp / 256) * 4N bytes).
//
// encoder_backward: dwte[v,:] += the sum of dout over the positions holding token v, and dwpe[t,:] = the sum over b
// of dout[b,t,:]. Deterministic without atomics: every output element is summed by one thread or one block in an
// order fixed by the tokens alone (formats/geometry.py: encoder_run_length), which the cpu device and the C host
// follow, so the three agree bit for bit: row v's n positions (ascending, from encoder_sort) fall in SEGMENTS runs of
// ceil(n / SEGMENTS), each run summed from +0 in position order, the runs' sums added in run order, and that total
// added to the old row last. A row no token holds is not written.
//
// Rows of dwte: a block owns ROWS = 8 consecutive rows (one row for a vocabulary of at most SPREAD_VOCAB rows, whose
// rows are all long) and a CHUNK of 256 channels (grid.y), a lane 8 channels (one 16-byte access of a dout row). A
// row of at most SEGMENTS positions is summed by one warp (each run holds at most one position: the same bits as one
// run), its old dwte row loaded beside its positions; the block's longer rows then take all 8 warps in turn, one run
// a warp, the runs' sums combined in warp order through shared memory. A warp reads 32 positions at once and the
// next 32 while their dout rows (INFLIGHT at once) load. A frequent token's chain is an eighth of its positions.
//
// Rows of dwpe: blocks after the dwte blocks, a warp per position t, a lane 8 channels.
//
// Geometry (formats/geometry.py): encoder_sort grid = ceil(Vp / 256), blocks of 1024; encoder_backward grid = (ceil(Vp / rows) +
// ceil(T / 8), ceil(C / 256)), rows = 8 (1 up to SPREAD_VOCAB), blocks of 256.
namespace cpl {
namespace eb {
constexpr int ROWS = WARPS;  // vocabulary rows a block
constexpr int CHUNK = 32 * PACK;
constexpr int INFLIGHT = 16;  // dout rows a warp loads at once
constexpr int POSITIONS = WARPS;  // dwpe positions per block
constexpr int SEGMENTS = WARPS;   // runs of a row's positions, a warp each
constexpr int TOKENS = THREADS;   // vocabulary rows an encoder_sort block sorts
constexpr int SORT_THREADS = 1024;  // an encoder_sort block: 32 warps, a thirty-second of the positions each
constexpr int SORT_WARPS = SORT_THREADS / 32;
constexpr int BATCH = 8;          // token ids a lane loads at once in encoder_sort
constexpr int SPREAD_VOCAB = 512;  // up to this many rows, a block a row
}  // namespace eb

// The dout rows (channels c..c+8) of up to INFLIGHT positions, held by lanes q0 .. q0+count of `held` (a position
// a lane), summed into acc in that order, every load in flight before the first add.
__device__ __forceinline__ void add_rows(float (&acc)[PACK], const __half* dout, int held, int q0, int count, int c,
                                         int C, bool vec) {
    uint4 x[eb::INFLIGHT];
#pragma unroll
    for (int q = 0; q < eb::INFLIGHT; ++q) {
        const i64 row = (i64)__shfl_sync(FULL, held, (q0 + q) & 31) * C;
        if (q < count) x[q] = load_raw(dout, row + c, row + C, vec);
    }
#pragma unroll
    for (int q = 0; q < eb::INFLIGHT; ++q) {
        if (q >= count) break;
        const Pack f = unpack(x[q]);
#pragma unroll
        for (int e = 0; e < PACK; ++e) acc[e] += f.v[e];
    }
}

// The positions order[s + i .. s + end) summed into acc in order: 32 positions read at once (a lane each), the
// next 32 read while these rows load.
__device__ __forceinline__ void add_positions(float (&acc)[PACK], const __half* dout, const int* order, int s, int i,
                                              int end, int c, int C, bool vec) {
    const int lane = threadIdx.x & 31;
    int held = i + lane < end ? order[s + i + lane] : 0;
    for (; i < end; i += 32) {
        const int next = i + 32 + lane < end ? order[s + i + 32 + lane] : 0;
        for (int q0 = 0; q0 < 32 && i + q0 < end; q0 += eb::INFLIGHT)
            add_rows(acc, dout, held, q0, min(eb::INFLIGHT, end - i - q0), c, C, vec);
        held = next;
    }
}

// Rows of dwte an encoder_backward block owns: 8, or one for a vocabulary of at most SPREAD_VOCAB rows (a byte
// vocabulary: every row long, so that each row gets a block of its own).
__device__ __forceinline__ int rows_per_block(int Vp) { return Vp <= eb::SPREAD_VOCAB ? 1 : eb::ROWS; }
}  // namespace cpl

extern "C" __global__ void __launch_bounds__(1024)
    encoder_sort(int* order, int* first, const int* tokens, int N, int Vp) {
    cpl::grid_dependency();
    using namespace cpl;
    using namespace cpl::eb;
    __shared__ int cursor[SORT_WARPS][TOKENS];  // the warp's count of each token, then where its next one goes
    __shared__ int below[SORT_WARPS], scan[TOKENS / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, v0 = blockIdx.x * TOKENS;
    for (int i = threadIdx.x; i < SORT_WARPS * TOKENS; i += SORT_THREADS) (&cursor[0][0])[i] = 0;
    const int span = (N + SORT_WARPS - 1) / SORT_WARPS, begin = min(N, warp * span), end = min(N, begin + span);
    __syncthreads();

    int under = 0;
    for (int p0 = begin; p0 < end; p0 += 32 * BATCH) {
        int t[BATCH];
#pragma unroll
        for (int k = 0; k < BATCH; ++k) {  // all loads in flight first; past the end, a token above every row
            const int p = p0 + 32 * k + lane;
            t[k] = p < end ? tokens[p] : 0x7fffffff;
        }
#pragma unroll
        for (int k = 0; k < BATCH; ++k) {
            under += t[k] < v0;
            if ((unsigned)(t[k] - v0) < (unsigned)TOKENS) atomicAdd(&cursor[warp][t[k] - v0], 1);
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) under += __shfl_xor_sync(FULL, under, o);
    if (lane == 0) below[warp] = under;
    __syncthreads();

    // thread r < TOKENS owns token v0 + r: its total, an exclusive scan of the totals over the block, the cursors
    const int r = threadIdx.x;
    int total = 0, inclusive = 0;
    if (r < TOKENS) {  // whole warps
#pragma unroll 8
        for (int w = 0; w < SORT_WARPS; ++w) total += cursor[w][r];
        inclusive = total;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int x = __shfl_up_sync(FULL, inclusive, o);
            if (lane >= o) inclusive += x;
        }
        if (lane == 31) scan[warp] = inclusive;
    }
    __syncthreads();
    if (r < TOKENS) {
        int start = inclusive - total;
        for (int w = 0; w < TOKENS / 32; ++w) start += w < warp ? scan[w] : 0;
        for (int w = 0; w < SORT_WARPS; ++w) start += below[w];
        if (v0 + r < Vp) first[v0 + r] = start;
        if (v0 + r == Vp - 1) first[Vp] = N;
#pragma unroll 8
        for (int w = 0; w < SORT_WARPS; ++w) {
            const int count = cursor[w][r];
            cursor[w][r] = start;
            start += count;
        }
    }
    __syncthreads();

    const unsigned earlier = (1u << lane) - 1;
    for (int p0 = begin; p0 < end; p0 += 32 * BATCH) {
        int t[BATCH];
#pragma unroll
        for (int k = 0; k < BATCH; ++k) {
            const int p = p0 + 32 * k + lane;
            t[k] = p < end ? tokens[p] : 0x7fffffff;
        }
#pragma unroll
        for (int k = 0; k < BATCH; ++k) {  // positions p0 + 32k + lane: in order, k then lane
            const int rel = t[k] - v0;
            const bool mine = (unsigned)rel < (unsigned)TOKENS;
            const unsigned peers = __match_any_sync(FULL, mine ? rel : -1);
            int at = 0;
            if (mine) at = cursor[warp][rel] + __popc(peers & earlier);
            __syncwarp();
            if (mine) {
                order[at] = p0 + 32 * k + lane;
                if ((peers & earlier) == 0) cursor[warp][rel] += __popc(peers);
            }
            __syncwarp();
        }
    }
}

extern "C" __global__ void __launch_bounds__(256, 2)
    encoder_backward(__half* dwte, __half* dwpe, const __half* dout, const int* order, const int* first, int B, int T,
                     int C, int Vp) {
    cpl::grid_dependency();
    using namespace cpl;
    using namespace cpl::eb;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int c = blockIdx.y * CHUNK + lane * PACK;  // this lane's first channel
    const bool vec = C % PACK == 0 && aligned16(dout) && aligned16(dwte) && aligned16(dwpe);
    const int rows = rows_per_block(Vp), groups = (Vp + rows - 1) / rows;  // the blocks of dwte rows

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

    const int v0 = blockIdx.x * rows;
    if (warp < rows) {  // a short row: one warp
        const int v = v0 + warp;
        const int s = v < Vp ? first[v] : 0, n = v < Vp ? first[v + 1] - s : 0;
        if (n > 0 && n <= SEGMENTS) {  // warp-uniform; lanes past C add zeros and take part in the shuffles
            const i64 row = (i64)v * C;
            const uint4 old = load_raw(dwte, row + c, row + C, vec);  // in flight with the positions
            float acc[PACK] = {};
            add_positions(acc, dout, order, s, 0, n, c, C, vec);
            if (c < C) {
                Pack w = unpack(old);
#pragma unroll
                for (int e = 0; e < PACK; ++e) w.v[e] = w.v[e] + acc[e];
                store_pack(dwte, row + c, row + C, vec, w);
            }
        }
    }
    __shared__ float sums[SEGMENTS][CHUNK];
    for (int k = 0; k < rows; ++k) {  // the long rows: every warp one run, block-uniform
        const int v = v0 + k;
        if (v >= Vp) break;
        const int s = first[v], n = first[v + 1] - s;
        if (n <= SEGMENTS) continue;
        const int length = (n + SEGMENTS - 1) / SEGMENTS, begin = min(n, warp * length);
        float acc[PACK] = {};
        add_positions(acc, dout, order, s, begin, min(n, begin + length), c, C, vec);
#pragma unroll
        for (int e = 0; e < PACK; ++e) sums[warp][lane * PACK + e] = acc[e];
        __syncthreads();
        const int ch = (int)blockIdx.y * CHUNK + (int)threadIdx.x;  // one channel a thread
        if (ch < C) {
            float total = sums[0][threadIdx.x];
#pragma unroll
            for (int w = 1; w < SEGMENTS; ++w) total += sums[w][threadIdx.x];
            const i64 at = (i64)v * C + ch;
            dwte[at] = __float2half_rn(__half2float(dwte[at]) + total);
        }
        __syncthreads();
    }
}

#endif
