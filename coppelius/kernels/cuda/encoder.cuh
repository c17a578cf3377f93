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
// thirty-second of the positions. Pass one: each warp counts its positions by token (shared-memory integer counts,
// exact in any order) and the positions whose token lies below the block's rows. Then the counts become cursors,
// token-major and warp-minor, so that warp w's matches of a token follow warps 0 .. w-1's. Pass two: each warp walks
// its positions in order, 32 at a time, ranking equal tokens among the lanes (__match_any_sync) and writing each
// position at its cursor. Every block reads all N token ids twice (L2 hits: 2 * ceil(Vp / 256) * 4N bytes).
//
// encoder_backward: dwte[v,:] += the sum of dout over the positions holding token v, and dwpe[t,:] = the sum over b
// of dout[b,t,:]. Deterministic without atomics: every output element is summed by one thread or one block in an
// order fixed by the tokens alone (formats/geometry.py: encoder_run_length), which the cpu device and the C host
// follow, so the three agree bit for bit: row v's n positions (ascending, from encoder_sort) fall in SEGMENTS runs of
// ceil(n / SEGMENTS), each run summed from +0 in position order, the runs' sums added in run order, and that total
// added to the old row last. A row no token holds is not written.
//
// Rows of dwte: a block owns ROWS = 8 consecutive rows and a CHUNK of 256 channels (grid.y), a lane 8 channels (one
// 16-byte access of a dout row); for a vocabulary of at most SPREAD_VOCAB rows, whose rows are all long, one row and
// a SPREAD_CHUNK of 64 channels, a lane 2 (a 4-byte access), SPREAD_INFLIGHT = 64 rows in flight a warp. A
// row of at most SEGMENTS positions is summed by one warp (each run holds at most one position: the same bits as one
// run), its old dwte row loaded beside its positions; the block's longer rows then take all 8 warps in turn, one run
// a warp, the runs' sums combined in warp order through shared memory. A warp reads 32 positions at once (64 for
// SPREAD_VOCAB) and the next ones while their dout rows (INFLIGHT at once) load. A frequent token's chain is an eighth
// of its positions.
//
// Rows of dwpe: blocks after the dwte blocks, a warp per position t, a lane 8 channels (2 for SPREAD_VOCAB).
//
// Geometry (formats/geometry.py): encoder_sort grid = ceil(Vp / 256), blocks of 1024; encoder_backward grid =
// (ceil(Vp / 8) + ceil(T / 8), ceil(C / 256)), and up to SPREAD_VOCAB (ceil(C / 64), Vp + ceil(T / 8)), blocks of 256.
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
constexpr int SPREAD_LANE = 2;     // ... and a lane 2 channels of it (4-byte accesses)
constexpr int SPREAD_CHUNK = 32 * SPREAD_LANE;
constexpr int SPREAD_INFLIGHT = 64;
}  // namespace eb

// L consecutive channels of a row as raw fp16 bits, 0 at or past end, loaded now and converted when used, so that
// many loads are in flight before the first use. VEC: one access (L = PACK: 16 bytes, L = 2: 4 bytes), i and end
// multiples of L (so a lane's channels lie all below end or all past it); else one access a channel. VEC is a
// template argument, not a branch at every load: with both paths in each of the unrolled loads the kernel's code
// was 430 KB (now 184), and its warps stalled on instruction fetch more than on anything else (no_instruction 43%
// of the stall samples at small's sizes). Small's kernel alone 35.4 -> 33.4 us, in the step's timeline 43.6 -> 34.0
// us alone; gpt2's 229.4 -> 231.5 (H100, 2026-12-06; bench/results/encoder_vec_ab-2026-12-06-h100.txt).
template <int L, bool VEC>
__device__ __forceinline__ void load_lane(unsigned (&w)[L / 2], const __half* p, i64 i, i64 end) {
    static_assert(L == PACK || L == 2, "a lane's channels: 8 or 2");
    if constexpr (VEC && L == PACK) {
        const uint4 u = i < end ? *reinterpret_cast<const uint4*>(p + i) : make_uint4(0, 0, 0, 0);
        w[0] = u.x, w[1] = u.y, w[2] = u.z, w[3] = u.w;
    } else if constexpr (VEC) {
        w[0] = i < end ? *reinterpret_cast<const unsigned*>(p + i) : 0u;
    } else {
#pragma unroll
        for (int k = 0; k < L / 2; ++k) {
            const unsigned lo = i + 2 * k < end ? __half_as_ushort(p[i + 2 * k]) : 0u;
            const unsigned hi = i + 2 * k + 1 < end ? __half_as_ushort(p[i + 2 * k + 1]) : 0u;
            w[k] = lo | hi << 16;
        }
    }
}

// acc[e] += channel e of raw bits w, in channel order.
template <int L>
__device__ __forceinline__ void add_lane(float (&acc)[L], const unsigned (&w)[L / 2]) {
#pragma unroll
    for (int k = 0; k < L / 2; ++k) {
        const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[k]));
        acc[2 * k] += f.x;
        acc[2 * k + 1] += f.y;
    }
}

// row[c .. c + L) = old + acc, each rounded to nearest even (channels at or past end untouched). old enters as
// 0 + old, the same sum: (0 + old) + acc and old + acc differ only for old = acc = -0, and acc, summed from +0, is
// never -0.
template <int L, bool VEC>
__device__ __forceinline__ void store_lane(__half* row, int c, int end, const unsigned (&old)[L / 2],
                                           const float (&acc)[L]) {
    float w[L] = {};
    add_lane<L>(w, old);
#pragma unroll
    for (int e = 0; e < L; ++e) w[e] = w[e] + acc[e];
    if (VEC && c + L <= end) {
        unsigned u[L / 2];
#pragma unroll
        for (int k = 0; k < L / 2; ++k) {
            const __half2 h = __floats2half2_rn(w[2 * k], w[2 * k + 1]);
            u[k] = *reinterpret_cast<const unsigned*>(&h);
        }
        if constexpr (L == PACK)
            *reinterpret_cast<uint4*>(row + c) = make_uint4(u[0], u[1], u[2], u[3]);
        else
            *reinterpret_cast<unsigned*>(row + c) = u[0];
        return;
    }
#pragma unroll
    for (int e = 0; e < L; ++e)
        if (c + e < end) st(row, c + e, w[e]);
}

// The dout rows (channels c .. c + L) of up to F positions q0 .. q0 + count of the H * 32 that lanes hold (`held`:
// a position a lane, register q / 32), summed into acc in that order, every load in flight before the first add.
template <int L, int F, int H, bool VEC>
__device__ __forceinline__ void add_rows(float (&acc)[L], const __half* dout, const int (&held)[H], int q0, int count,
                                         int c, int C) {
    unsigned x[F][L / 2];
#pragma unroll
    for (int q = 0; q < F; ++q) {
        if (q >= count) break;  // (warp-uniform)
        const i64 row = (i64)__shfl_sync(FULL, held[H > 1 ? q / 32 : 0], (q0 + q) & 31) * C;
        load_lane<L, VEC>(x[q], dout, row + c, row + C);
    }
#pragma unroll
    for (int q = 0; q < F; ++q) {
        if (q >= count) break;
        add_lane<L>(acc, x[q]);
    }
}

// The positions order[s + i .. s + end) summed into acc in order, F a batch: H * 32 positions read at once (H a
// lane), the next H * 32 read while these rows load.
template <int L, int F, bool VEC>
__device__ __forceinline__ void add_positions(float (&acc)[L], const __half* dout, const int* order, int s, int i,
                                              int end, int c, int C) {
    constexpr int H = F > 32 ? F / 32 : 1;  // (H > 1: F = 32 H, one batch a read)
    const int lane = threadIdx.x & 31;
    int held[H];
#pragma unroll
    for (int h = 0; h < H; ++h) held[h] = i + 32 * h + lane < end ? order[s + i + 32 * h + lane] : 0;
    for (; i < end; i += 32 * H) {
        int next[H];
#pragma unroll
        for (int h = 0; h < H; ++h) {
            const int j = i + 32 * (H + h) + lane;
            next[h] = j < end ? order[s + j] : 0;
        }
        for (int q0 = 0; q0 < 32 * H && i + q0 < end; q0 += F)
            add_rows<L, F, H, VEC>(acc, dout, held, q0, min(F, end - i - q0), c, C);
#pragma unroll
        for (int h = 0; h < H; ++h) held[h] = next[h];
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

namespace cpl {
// encoder_backward's block (group, chunk): a lane L channels of the chunk's 32 L, F dout rows in flight a warp,
// each a VEC access (load_lane).
template <int L, int F, bool VEC>
__device__ __forceinline__ void encoder_backward_blocks(__half* dwte, __half* dwpe, const __half* dout,
                                                        const int* order, const int* first, int B, int T, int C,
                                                        int Vp, float (&sums)[eb::SEGMENTS][eb::CHUNK], int group,
                                                        int chunk) {
    using namespace cpl::eb;
    constexpr int CH = 32 * L;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int c = chunk * CH + lane * L;  // this lane's first channel
    const int rows = rows_per_block(Vp), groups = (Vp + rows - 1) / rows;  // the blocks of dwte rows

    if (group >= groups) {  // dwpe
        const int t = (group - groups) * POSITIONS + warp;
        if (t >= T || c >= C) return;
        float s[L] = {};
        for (int b0 = 0; b0 < B; b0 += F) {
            unsigned x[F][L / 2];
#pragma unroll
            for (int q = 0; q < F; ++q) {  // all in flight before the first add
                if (b0 + q >= B) break;    // (warp-uniform)
                const i64 row = ((i64)(b0 + q) * T + t) * C;
                load_lane<L, VEC>(x[q], dout, row + c, row + C);
            }
#pragma unroll
            for (int q = 0; q < F; ++q) {
                if (b0 + q >= B) break;
                add_lane<L>(s, x[q]);
            }
        }
        const unsigned zero[L / 2] = {};
        store_lane<L, VEC>(dwpe + (i64)t * C, c, C, zero, s);
        return;
    }

    const int v0 = group * rows;
    if (warp < rows) {  // a short row: one warp
        const int v = v0 + warp;
        const int s = v < Vp ? first[v] : 0, n = v < Vp ? first[v + 1] - s : 0;
        if (n > 0 && n <= SEGMENTS) {  // warp-uniform; lanes past C add zeros and take part in the shuffles
            __half* row = dwte + (i64)v * C;
            unsigned old[L / 2];
            load_lane<L, VEC>(old, row, c, C);  // in flight with the positions
            float acc[L] = {};
            add_positions<L, F, VEC>(acc, dout, order, s, 0, n, c, C);
            if (c < C) store_lane<L, VEC>(row, c, C, old, acc);
        }
    }
    for (int k = 0; k < rows; ++k) {  // the long rows: every warp one run, block-uniform
        const int v = v0 + k;
        if (v >= Vp) break;
        const int s = first[v], n = first[v + 1] - s;
        if (n <= SEGMENTS) continue;
        const int length = (n + SEGMENTS - 1) / SEGMENTS, begin = min(n, warp * length);
        float acc[L] = {};
        add_positions<L, F, VEC>(acc, dout, order, s, begin, min(n, begin + length), c, C);
#pragma unroll
        for (int e = 0; e < L; ++e) sums[warp][lane * L + e] = acc[e];
        __syncthreads();
        const int ch = chunk * CH + (int)threadIdx.x;  // one channel a thread
        if ((int)threadIdx.x < CH && ch < C) {
            float total = sums[0][threadIdx.x];
#pragma unroll
            for (int w = 1; w < SEGMENTS; ++w) total += sums[w][threadIdx.x];
            const i64 at = (i64)v * C + ch;
            dwte[at] = __float2half_rn(__half2float(dwte[at]) + total);
        }
        __syncthreads();
    }
}
}  // namespace cpl

// A byte vocabulary's few rows are long (small's space: a fifth of the positions, runs of ~440 a warp): a lane 2
// channels and 64 rows in flight, so that a run takes a quarter of the round trips of 16 16-byte rows, and the
// chunks of a row in grid.x, so that a long row's blocks run in the same wave rather than one in each (small's
// 288 x 6 blocks take ~7 waves: 90 -> 63 us with the lanes alone, H200, docs/notes/gpu-speed.md, twenty-fifth
// session). The sums' order is the same either way.
extern "C" __global__ void __launch_bounds__(256, 2)
    encoder_backward(__half* dwte, __half* dwpe, const __half* dout, const int* order, const int* first, int B, int T,
                     int C, int Vp) {
    cpl::grid_dependency();
    using namespace cpl;
    using namespace cpl::eb;
    __shared__ float sums[SEGMENTS][CHUNK];  // the long rows' runs, a warp's a row
    const auto bits = reinterpret_cast<unsigned long long>(dout) | reinterpret_cast<unsigned long long>(dwte) |
                      reinterpret_cast<unsigned long long>(dwpe);
    // unaligned rows (an odd width, or planes off 4 or 16 bytes) take one channel an access and one row at a time:
    // the same sums in the same order, in little code
    if (rows_per_block(Vp) == 1 && C % 2 == 0 && (bits & 3) == 0)
        encoder_backward_blocks<SPREAD_LANE, SPREAD_INFLIGHT, true>(dwte, dwpe, dout, order, first, B, T, C, Vp, sums,
                                                                    blockIdx.y, blockIdx.x);
    else if (rows_per_block(Vp) == 1)
        encoder_backward_blocks<SPREAD_LANE, 1, false>(dwte, dwpe, dout, order, first, B, T, C, Vp, sums, blockIdx.y,
                                                       blockIdx.x);
    else if (C % PACK == 0 && (bits & 15) == 0)
        encoder_backward_blocks<PACK, INFLIGHT, true>(dwte, dwpe, dout, order, first, B, T, C, Vp, sums, blockIdx.x,
                                                      blockIdx.y);
    else
        encoder_backward_blocks<PACK, 1, false>(dwte, dwpe, dout, order, first, B, T, C, Vp, sums, blockIdx.x,
                                                blockIdx.y);
}

#endif
