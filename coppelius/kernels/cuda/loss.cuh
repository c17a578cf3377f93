// crossentropy_forward, crossentropy_backward, crossentropy_forward_backward, crossentropy_forward_backward_stats,
// argmax_forward: a block per row of logits (grid.x = N), over the first V of its Vp columns; a thread reads columns
// 8*tid + 2048*i. The first three take a warp a row, WARPS rows a block, where a row is at most a pack a lane (Vp <=
// WARP_ROW_COLUMNS, the byte vocabularies; formats/geometry.py: loss_rows_per_block): the lanes read the same
// columns as a block's first warp, and the block's other warps would add only empty (-inf, 0) pairs, so the bits
// are the same. (small's 16384 rows of 256 took 78 us as 16384 blocks, 7 of 8 warps idle; H200, 2026-12-03.) The
// backwards read the row twice (statistics, then dlogits, backwards), the others once (the _stats form takes the
// statistics matmul_forward_stats left).
// exp is the hardware's (__expf: ex2.approx of x log2 e, a few fp32 ulps; expf's accurate sequence
// made the gpt2 lm-head rows instruction-bound, 2x their bytes' time on the H200), and dlogits
// multiplies by 1/s: within 2 fp16 ulps of the cpu device, losses within 1e-5 relative.
#ifndef COPPELIUS_LOSS_CUH
#define COPPELIUS_LOSS_CUH
#include "common.cuh"
#include "softmax.cuh"

namespace cpl {
namespace loss {
constexpr int STRIDE = THREADS * PACK;
constexpr int UNROLL = 4;  // packs a thread loads before using the first
constexpr int WARP_ROW_COLUMNS = 32 * PACK;

// The row a thread works on and its place t in the row's team: a warp (warp rows) or the block.
struct Row {
    int n, t;
    bool warp;
};
__device__ __forceinline__ Row row_of(int Vp, bool warp_rows) {
    if (warp_rows && Vp <= WARP_ROW_COLUMNS)
        return {(int)blockIdx.x * WARPS + (int)(threadIdx.x >> 5), (int)(threadIdx.x & 31), true};
    return {(int)blockIdx.x, (int)threadIdx.x, false};
}
__device__ __forceinline__ void row_sync(const Row& r) {
    if (r.warp)
        __syncwarp();
    else
        __syncthreads();
}

// f(column, pack) for thread t's packs of the row's columns [0, end): columns 8*t + 2048*i, in increasing i,
// or with REVERSE in decreasing i (the backward's second pass starts where the first ended, on lines L2 still holds:
// 2.22 against 2.31 ms at gpt2's lm head, H200, 2026-12-02); UNROLL packs in flight at a time.
template <bool REVERSE = false, typename F>
__device__ __forceinline__ void for_packs(const __half* x, int end, bool vec, int t, F f) {
    const int first = t * PACK, step = UNROLL * STRIDE;
    if (first >= end) return;
    const int last = first + (end - 1 - first) / step * step;
    for (int c0 = REVERSE ? last : first; REVERSE ? c0 >= first : c0 <= last; c0 += REVERSE ? -step : step) {
        uint4 raw[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) raw[u] = load_raw(x, c0 + u * STRIDE, end, vec);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
            if (c0 + u * STRIDE < end) f(c0 + u * STRIDE, unpack(raw[u]));
    }
}

// Every thread <- the merge of the row team's pairs: over each warp by a butterfly, then (a block's row) over the
// warps in warp order. `scratch`: 2 * WARPS floats of shared memory.
__device__ __forceinline__ void team_merge(float* scratch, float& m, float& s, bool warp) {
    softmax_warp_merge(m, s);
    if (warp) return;
    if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = m, scratch[WARPS + (threadIdx.x >> 5)] = s;
    __syncthreads();
    m = scratch[0];
    s = scratch[WARPS];
#pragma unroll
    for (int w = 1; w < WARPS; ++w) softmax_merge(m, s, scratch[w], scratch[WARPS + w]);
}

// Row r's maximum m over its first V columns and the sum s of exp(x - m) there, in one pass (online softmax: a
// thread rescales its sum when its maximum grows), then merged over the team (team_merge).
__device__ __forceinline__ void softmax_stats(const __half* x, int V, bool vec, const Row& r, float* scratch, float& m,
                                              float& s) {
    m = neg_inf();
    s = 0.f;
    for_packs(x, V, vec, r.t, [&](int c, const Pack& p) { softmax_add<PACK>(m, s, p.v, V - c); });
    team_merge(scratch, m, s, r.warp);
}
}  // namespace loss
}  // namespace cpl

// losses[n] = log(sum exp(x - max)) - (x[target] - max).
extern "C" __global__ void __launch_bounds__(256)
    crossentropy_forward(float* losses, const __half* logits, const int* targets, int N, int V, int Vp) {
    cpl::grid_dependency();
    using namespace cpl;
    __shared__ float scratch[2 * WARPS];
    const loss::Row r = loss::row_of(Vp, true);
    if (r.n >= N) return;  // the last block's warps past the rows
    const __half* x = logits + (i64)r.n * Vp;
    float m, s;
    loss::softmax_stats(x, V, Vp % PACK == 0 && aligned16(logits), r, scratch, m, s);
    if (r.t == 0) losses[r.n] = logf(s) - (ld(x, targets[r.n]) - m);
}

namespace cpl {
namespace loss {
// Row r's dlogits = (softmax - onehot(target)) * scale in the first V columns, exact zeros in the padding; and, when
// losses is not null, crossentropy_forward's loss, from its statistics (m, s), in column order or (REVERSE) from the
// last pack down.
template <bool REVERSE>
__device__ __forceinline__ void write_row(float* losses, __half* dlogits, const __half* logits, const int* targets,
                                          int V, int Vp, float scale, bool vec, const Row& r, float m, float s) {
    const int n = r.n;
    const __half* x = logits + (i64)n * Vp;
    __half* d = dlogits + (i64)n * Vp;
    const int target = targets[n];
    if (losses != nullptr) {
        if (r.t == 0) losses[n] = logf(s) - (ld(x, target) - m);
        row_sync(r);  // x[target] is read before its thread writes dlogits over it (in place, as the plan has it)
    }
    const float inv_s = 1.0f / s;
    for_packs<REVERSE>(x, Vp, vec, r.t, [&](int c, const Pack& p) {
        Pack y;
#pragma unroll
        for (int k = 0; k < PACK; ++k) {
            // one FMA by hand: left to ptxas, prob's product and the one-hot's subtraction fused in some inlined
            // copies and not others (one of tiny's 512 target cells changed bits between two builds, H200, 2026-12-04)
            const float shifted = __fmaf_rn(__expf(p.v[k] - m), inv_s, c + k == target ? -1.0f : 0.0f);
            y.v[k] = c + k < V ? shifted * scale : 0.0f;
        }
        store_pack(d, c, Vp, vec, y);
    });
}

// The statistics from a first pass over the row, then write_row backwards (where the pass ended). (Keeping the row
// in shared memory for the second pass, two 100 KiB blocks an SM, was slower on the H200: 2.78 ms against 2.29 at
// gpt2's lm head; so was the row held in the registers of a 1024-thread block, 7 packs a thread, one block an SM at
// 64 registers: 2.74 against 2.25, and the 256-thread blocks under __launch_bounds__(1024) 2.33, 2026-12-02; blocks
// of 512 or 1024 threads, so that fewer rows are in flight: 2.38-3.46 against 2.23, 2026-12-03.)
__device__ __forceinline__ void backward_row(float* losses, __half* dlogits, const __half* logits, const int* targets,
                                             int N, int V, int Vp, float scale) {
    __shared__ float scratch[2 * WARPS];
    const Row r = row_of(Vp, true);
    if (r.n >= N) return;  // the last block's warps past the rows
    const bool vec = Vp % PACK == 0 && aligned16(logits) && aligned16(dlogits);
    float m, s;
    softmax_stats(logits + (i64)r.n * Vp, V, vec, r, scratch, m, s);
    write_row<true>(losses, dlogits, logits, targets, V, Vp, scale, vec, r, m, s);
}
}  // namespace loss
}  // namespace cpl

extern "C" __global__ void __launch_bounds__(256)
    crossentropy_backward(__half* dlogits, const __half* logits, const int* targets, int N, int V, int Vp,
                          float scale) {
    cpl::grid_dependency();
    cpl::loss::backward_row(nullptr, dlogits, logits, targets, N, V, Vp, scale);
}

// The training step's loss and its gradient from one kernel: the forward's pass over the row is the backward's first.
extern "C" __global__ void __launch_bounds__(256)
    crossentropy_forward_backward(float* losses, __half* dlogits, const __half* logits, const int* targets, int N,
                                  int V, int Vp, float scale) {
    cpl::grid_dependency();
    cpl::loss::backward_row(losses, dlogits, logits, targets, N, V, Vp, scale);
}

// crossentropy_forward_backward with each row's statistics merged from matmul_forward_stats' P = ceil(Vp / width)
// parts (thread t merges parts t, t + 256, ... in order, then the block as team_merge): the logits read once, where
// the statistics' own pass over them cost a third of the launch (gpt2's lm head rows, 32768 x 50304: 2.23 ms with
// it, 1.66 without, H200, 2026-12-03).
extern "C" __global__ void __launch_bounds__(256)
    crossentropy_forward_backward_stats(float* losses, __half* dlogits, const __half* logits, const float* stats,
                                        const int* targets, int N, int V, int Vp, int width, float scale) {
    cpl::grid_dependency();
    using namespace cpl;
    __shared__ float scratch[2 * WARPS];
    const int parts = (Vp + width - 1) / width;
    const float2* part = reinterpret_cast<const float2*>(stats) + (i64)blockIdx.x * parts;
    float m = neg_inf(), s = 0.f;
    for (int j = threadIdx.x; j < parts; j += THREADS) softmax_merge(m, s, part[j].x, part[j].y);
    loss::team_merge(scratch, m, s, false);
    const bool vec = Vp % PACK == 0 && aligned16(logits) && aligned16(dlogits);
    loss::write_row<false>(losses, dlogits, logits, targets, V, Vp, scale, vec, loss::row_of(Vp, false), m, s);
}

namespace cpl {
namespace loss {
// numpy's argmax order: a nan beats any number, then the larger value, then the smaller index. It
// is a total order, so the winner does not depend on the order of comparisons.
__device__ __forceinline__ bool beats(float a, int ia, float b, int ib) {
    const bool na = a != a, nb = b != b;
    if (na != nb) return na;
    if (!na && a != b) return a > b;
    return ia < ib;
}
}  // namespace loss
}  // namespace cpl

extern "C" __global__ void __launch_bounds__(256)
    argmax_forward(int* predictions, const __half* logits, int N, int V, int Vp) {
    cpl::grid_dependency();
    using namespace cpl;
    __shared__ float best_value[WARPS];
    __shared__ int best_index[WARPS];
    const int n = blockIdx.x;
    const __half* x = logits + (i64)n * Vp;
    const bool vec = Vp % PACK == 0 && aligned16(logits);
    float b = neg_inf();
    int ib = 0x7fffffff;
    loss::for_packs(x, V, vec, threadIdx.x, [&](int c, const Pack& p) {
#pragma unroll
        for (int k = 0; k < PACK; ++k)
            if (c + k < V && loss::beats(p.v[k], c + k, b, ib)) b = p.v[k], ib = c + k;
    });
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float ob = __shfl_xor_sync(FULL, b, o);
        const int oi = __shfl_xor_sync(FULL, ib, o);
        if (loss::beats(ob, oi, b, ib)) b = ob, ib = oi;
    }
    if ((threadIdx.x & 31) == 0) best_value[threadIdx.x >> 5] = b, best_index[threadIdx.x >> 5] = ib;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < WARPS; ++w)
            if (loss::beats(best_value[w], best_index[w], b, ib)) b = best_value[w], ib = best_index[w];
        predictions[n] = ib;
    }
}

#endif
