// layernorm_forward, residual_layernorm_forward and layernorm_backward: rows of C channels, N rows.
#ifndef COPPELIUS_LAYERNORM_CUH
#define COPPELIUS_LAYERNORM_CUH
#include "common.cuh"
#include "tensor_core.cuh"

namespace cpl {
namespace ln {
constexpr float EPS = 1e-5f;
constexpr int ROWS = WARPS;              // rows per forward block: a warp each
constexpr int BLOCK_ROWS = 4;            // rows a backward block aims for: one batch, where N allows
constexpr int MAX_BLOCKS = 1024;         // backward blocks at most: the partials' rows
constexpr int MAX_THREADS = 512;         // a backward block: a thread per 8 channels, so C <= 4096
constexpr int BATCH = 2;                 // rows a backward thread sums between two barriers
constexpr int WEIGHT_THREADS = 1024;     // a layernorm_backward_weight block: 32 columns x 32 row groups
constexpr int HELD_PACKS = 3;            // a forward lane holds its row in registers up to C = 256 HELD_PACKS
constexpr int FORWARD_MIN_BLOCKS = 4;    // forward blocks an SM: at most 64 registers a thread
constexpr int STAGES = 2;                // backward batches in shared memory: one summed while the next arrives

// Blocks of a backward launch, and so rows of its partials (formats/geometry.py: layernorm_backward_blocks).
__device__ __forceinline__ int backward_blocks(int N) {
    return max(1, min((N + BLOCK_ROWS - 1) / BLOCK_ROWS, MAX_BLOCKS));
}
}  // namespace ln
}  // namespace cpl

// One pack of a layernorm's output: (x - mean) * rstd * w + b.
__device__ __forceinline__ cpl::Pack ln_normalize(const cpl::Pack& x, const cpl::Pack& w, const cpl::Pack& b, float m,
                                                  float r) {
    cpl::Pack y;
#pragma unroll
    for (int k = 0; k < cpl::PACK; ++k) y.v[k] = (x.v[k] - m) * r * w.v[k] + b.v[k];
    return y;
}

// Row n of a layernorm, a warp (lane's channels 8 lane + 256 i), from s, the lane's sum of the row's x in order: the
// warp combines the sums (common.cuh), mean = sum / C; then the biased variance around it (a second pass over the row,
// from L1), rstd = 1/sqrt(var + 1e-5); out = (x - mean) * rstd * w + b (a third pass).
__device__ __forceinline__ void ln_row(__half* out, float* mean, float* rstd, const __half* x, const __half* weight,
                                       const __half* bias, float s, int n, int C, bool vec, int lane) {
    using namespace cpl;
    const i64 row = (i64)n * C;
    const float m = warp_sum(s) / (float)C;
    float q = 0.f;
    for (int c = lane * PACK; c < C; c += 32 * PACK) {
        const Pack v = load_pack(x, row + c, row + C, vec);
#pragma unroll
        for (int k = 0; k < PACK && c + k < C; ++k) {
            const float d = v.v[k] - m;
            q += d * d;
        }
    }
    const float r = 1.0f / sqrtf(warp_sum(q) / (float)C + ln::EPS);
    for (int c = lane * PACK; c < C; c += 32 * PACK) {
        const Pack v = load_pack(x, row + c, row + C, vec), w = load_pack(weight, c, C, vec),
                   b = load_pack(bias, c, C, vec);
        store_pack(out, row + c, row + C, vec, ln_normalize(v, w, b, m, r));
    }
    if (lane == 0) mean[n] = m, rstd[n] = r;
}

// A forward row held in registers, P packs a lane (vec, C <= 256 P): every load of the row is issued before the
// first use and the row is never read back, where ln_row's passes wait on one pack at a time (a store to `out` or
// `residual` may alias the next load, as far as the compiler knows). inp2 null: layernorm_forward's row (inp1);
// otherwise the residual inp1 + inp2, rounded and stored. The same sums in the same order as ln_row: the same bits.
// At most 64 registers (FORWARD_MIN_BLOCKS; 12 bytes spilled), four blocks an SM: gpt2's residual_layernorm_forward
// 65.7 -> 54.1 us (3.7 TB/s), layernorm_forward 41.2 -> 31.5; small's 23.1 -> 17.3 and 13.2 -> 10.5 (H200,
// 2026-12-03; without the cap, 72 registers and three blocks an SM: 54.4 and 18.8).
template <int P>
__device__ __forceinline__ void ln_row_held(__half* residual, __half* out, float* mean, float* rstd,
                                            const __half* inp1, const __half* inp2, const __half* weight,
                                            const __half* bias, int n, int C, int lane) {
    using namespace cpl;
    const i64 row = (i64)n * C;
    uint4 x[P], y[P];
#pragma unroll
    for (int i = 0; i < P; ++i) {
        const int c = (lane + 32 * i) * PACK;
        if (c < C) {
            x[i] = *reinterpret_cast<const uint4*>(inp1 + row + c);
            if (inp2) y[i] = *reinterpret_cast<const uint4*>(inp2 + row + c);
        }
    }
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < P; ++i) {
        const int c = (lane + 32 * i) * PACK;
        if (c >= C) continue;
        Pack a = unpack(x[i]);
        if (inp2) {
            const Pack b = unpack(y[i]);
            __half2* h = reinterpret_cast<__half2*>(&x[i]);
#pragma unroll
            for (int k = 0; k < PACK / 2; ++k) {
                h[k] = __floats2half2_rn(a.v[2 * k] + b.v[2 * k], a.v[2 * k + 1] + b.v[2 * k + 1]);
                const float2 f = __half22float2(h[k]);
                a.v[2 * k] = f.x, a.v[2 * k + 1] = f.y;
            }
            *reinterpret_cast<uint4*>(residual + row + c) = x[i];
        }
#pragma unroll
        for (int k = 0; k < PACK; ++k) s += a.v[k];
    }
    const float m = warp_sum(s) / (float)C;
    float q = 0.f;
#pragma unroll
    for (int i = 0; i < P; ++i) {
        if ((lane + 32 * i) * PACK >= C) continue;
        const Pack a = unpack(x[i]);
#pragma unroll
        for (int k = 0; k < PACK; ++k) {
            const float d = a.v[k] - m;
            q += d * d;
        }
    }
    const float r = 1.0f / sqrtf(warp_sum(q) / (float)C + ln::EPS);
#pragma unroll
    for (int i = 0; i < P; ++i) {
        const int c = (lane + 32 * i) * PACK;
        if (c < C) y[i] = *reinterpret_cast<const uint4*>(weight + c);
    }
#pragma unroll
    for (int i = 0; i < P; ++i) {
        const int c = (lane + 32 * i) * PACK;
        if (c >= C) continue;
        const Pack a = unpack(x[i]), w = unpack(y[i]), b = load_pack(bias, c, C, true);
        store_pack(out, row + c, row + C, true, ln_normalize(a, w, b, m, r));
    }
    if (lane == 0) mean[n] = m, rstd[n] = r;
}

// The held row where C allows it (vec, C <= 256 HELD_PACKS), at the smallest P that holds it; false otherwise.
__device__ __forceinline__ bool ln_row_held_any(__half* residual, __half* out, float* mean, float* rstd,
                                                const __half* inp1, const __half* inp2, const __half* weight,
                                                const __half* bias, int n, int C, bool vec, int lane) {
    static_assert(cpl::ln::HELD_PACKS == 3, "one ln_row_held a row size");
    if (!vec || C > 256 * cpl::ln::HELD_PACKS) return false;
    if (C <= 256) ln_row_held<1>(residual, out, mean, rstd, inp1, inp2, weight, bias, n, C, lane);
    else if (C <= 512) ln_row_held<2>(residual, out, mean, rstd, inp1, inp2, weight, bias, n, C, lane);
    else ln_row_held<3>(residual, out, mean, rstd, inp1, inp2, weight, bias, n, C, lane);
    return true;
}

// A warp per row (grid.x = ceil(N / 8)): the row held (ln_row_held_any), or its sum, then ln_row.
extern "C" __global__ void __launch_bounds__(256, cpl::ln::FORWARD_MIN_BLOCKS)
    layernorm_forward(__half* out, float* mean, float* rstd, const __half* inp, const __half* weight,
                      const __half* bias, int N, int C) {
    cpl::grid_dependency();
    using namespace cpl;
    const int lane = threadIdx.x & 31;
    const int n = blockIdx.x * ln::ROWS + (threadIdx.x >> 5);
    if (n >= N) return;
    const bool vec = C % PACK == 0 && aligned16(out) && aligned16(inp) && aligned16(weight) && aligned16(bias);
    if (ln_row_held_any(nullptr, out, mean, rstd, inp, nullptr, weight, bias, n, C, vec, lane)) return;
    const i64 row = (i64)n * C;
    float s = 0.f;
    for (int c = lane * PACK; c < C; c += 32 * PACK) {
        const Pack x = load_pack(inp, row + c, row + C, vec);
#pragma unroll
        for (int k = 0; k < PACK; ++k) s += x.v[k];
    }
    ln_row(out, mean, rstd, inp, weight, bias, s, n, C, vec, lane);
}

// residual_forward and layernorm_forward of its result in one launch (the geometry of layernorm_forward): the warp's
// first pass adds the row of inp1 and inp2, stores it rounded to residual and sums the rounded values; ln_row then
// reads the row back (the same lanes' own stores). The bits of the two kernels, one read of the row fewer.
extern "C" __global__ void __launch_bounds__(256, cpl::ln::FORWARD_MIN_BLOCKS)
    residual_layernorm_forward(__half* residual, __half* out, float* mean, float* rstd, const __half* inp1,
                               const __half* inp2, const __half* weight, const __half* bias, int N, int C) {
    cpl::grid_dependency();
    using namespace cpl;
    const int lane = threadIdx.x & 31;
    const int n = blockIdx.x * ln::ROWS + (threadIdx.x >> 5);
    if (n >= N) return;
    const bool vec = C % PACK == 0 && aligned16(residual) && aligned16(out) && aligned16(inp1) && aligned16(inp2) &&
                     aligned16(weight) && aligned16(bias);
    if (ln_row_held_any(residual, out, mean, rstd, inp1, inp2, weight, bias, n, C, vec, lane)) return;
    const i64 row = (i64)n * C;
    float s = 0.f;
    for (int c = lane * PACK; c < C; c += 32 * PACK) {
        Pack a = load_pack(inp1, row + c, row + C, vec);
        const Pack b = load_pack(inp2, row + c, row + C, vec);
#pragma unroll
        for (int k = 0; k < PACK; ++k) a.v[k] = __half2float(__float2half_rn(a.v[k] + b.v[k]));
        store_pack(residual, row + c, row + C, vec, a);
#pragma unroll
        for (int k = 0; k < PACK; ++k) s += a.v[k];
    }
    ln_row(out, mean, rstd, residual, weight, bias, s, n, C, vec, lane);
}

// The backward's loads, STAGED (vec, and the launch's dynamic shared memory holds ln_staged_bytes: the sm_90 geometry):
// through a ring of ln::STAGES batches in shared memory, each thread copying its own packs with cp.async, so the next
// batch is in flight while one is summed (gpt2's shape 63.9 -> 62.1 us, small's 24.8 -> 18.9; H200, 2026-12-03).
// Otherwise each batch's loads are issued at its start and waited on at once.
__device__ __forceinline__ int ln_staged_bytes(int threads) {
    return cpl::ln::STAGES * cpl::ln::BATCH * 3 * threads * 16;
}

template <bool STAGED>
__device__ __forceinline__ void ln_backward_rows(__half* dinp, float* partials, const __half* dout, const __half* inp,
                                                 const __half* weight, const float* mean, const float* rstd, int N,
                                                 int C, bool vec, uint4* ring,
                                                 float (*sums)[cpl::ln::BATCH][cpl::ln::MAX_THREADS / 32][2]) {
    using namespace cpl;
    using namespace cpl::ln;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5, threads = blockDim.x;
    const int c = threadIdx.x * PACK;  // this thread's channels; past C it adds zeros and stores nothing
    const int R = (N + gridDim.x - 1) / gridDim.x, n0 = min(N, (int)blockIdx.x * R), rows = min(N, n0 + R) - n0;
    const Pack w = load_pack(weight, c, C, vec);
    float dw[PACK] = {}, db[PACK] = {};
    // ring slot of (stage, row b of its batch, tensor j: dout, inp, dinp) for this thread
    auto slot = [&](int stage, int b, int j) { return ring + ((stage * BATCH + b) * 3 + j) * threads + threadIdx.x; };
    auto stage_batch = [&](int stage, int jb) {
        if (jb < rows) {
#pragma unroll
            for (int b = 0; b < BATCH; ++b) {
                const i64 row = (i64)(n0 + min(jb + b, rows - 1)) * C + c;
                coptc::cp_async16(slot(stage, b, 0), dout + row, c < C);
                coptc::cp_async16(slot(stage, b, 1), inp + row, c < C);
                coptc::cp_async16(slot(stage, b, 2), dinp + row, c < C);
            }
        }
        coptc::cp_async_commit();
    };
    if (STAGED) {
#pragma unroll
        for (int t = 0; t < STAGES - 1; ++t) stage_batch(t, t * BATCH);
    }
    int parity = 0;
    for (int j = 0, t = 0; j < rows; j += BATCH, parity ^= 1, ++t) {
        uint4 g[BATCH], x[BATCH], d[BATCH];
        float m[BATCH], r[BATCH];
        if (STAGED) {  // the stage refilled is the one the last batch read (this thread's own copies, used)
            stage_batch((t + STAGES - 1) % STAGES, j + (STAGES - 1) * BATCH);
            coptc::cp_async_wait<STAGES - 1>();
        }
#pragma unroll
        for (int b = 0; b < BATCH; ++b) {  // every load of the batch in flight before the first use
            const int row_n = n0 + min(j + b, rows - 1);
            const i64 row = (i64)row_n * C;
            if (STAGED) {
                g[b] = *slot(t % STAGES, b, 0), x[b] = *slot(t % STAGES, b, 1), d[b] = *slot(t % STAGES, b, 2);
            } else {
                g[b] = load_raw(dout, row + c, row + C, vec);
                x[b] = load_raw(inp, row + c, row + C, vec);
                d[b] = load_raw(dinp, row + c, row + C, vec);
            }
            m[b] = mean[row_n];
            r[b] = rstd[row_n];
        }
#pragma unroll
        for (int b = 0; b < BATCH; ++b) {
            const Pack gp = unpack(g[b]), xp = unpack(x[b]);
            float s1 = 0.f, s2 = 0.f;
#pragma unroll
            for (int k = 0; k < PACK; ++k) {
                const float dnorm = gp.v[k] * w.v[k];
                s1 += dnorm;
                s2 += dnorm * ((xp.v[k] - m[b]) * r[b]);
            }
            s1 = warp_sum(s1);
            s2 = warp_sum(s2);
            if (lane == 0) sums[parity][b][warp][0] = s1, sums[parity][b][warp][1] = s2;
        }
        __syncthreads();
#pragma unroll
        for (int b = 0; b < BATCH; ++b) {
            if (j + b >= rows) break;
            float s1 = sums[parity][b][0][0], s2 = sums[parity][b][0][1];
            for (int v = 1; v < warps; ++v) s1 += sums[parity][b][v][0], s2 += sums[parity][b][v][1];
            const float mean_dnorm = s1 / (float)C, mean_dnorm_norm = s2 / (float)C;
            const Pack gp = unpack(g[b]), xp = unpack(x[b]);
            Pack dp = unpack(d[b]);
#pragma unroll
            for (int k = 0; k < PACK; ++k) {
                const float norm = (xp.v[k] - m[b]) * r[b];
                dw[k] += gp.v[k] * norm;
                db[k] += gp.v[k];
                dp.v[k] = dp.v[k] + r[b] * (gp.v[k] * w.v[k] - mean_dnorm - norm * mean_dnorm_norm);
            }
            const i64 row = (i64)(n0 + j + b) * C;
            if (c < C) store_pack(dinp, row + c, row + C, vec, dp);
        }
    }
    if (STAGED) coptc::cp_async_wait<0>();  // no copy outlives the block
    float* part = partials + (i64)blockIdx.x * 2 * C;
#pragma unroll
    for (int k = 0; k < PACK; ++k)
        if (c + k < C) part[c + k] = dw[k], part[C + c + k] = db[k];
}

// layernorm_backward: dinp += the input gradient, and each block's sums of dweight and dbias over its rows written
// to partials (P, 2, C) fp32, P = ln::backward_blocks(N); layernorm_backward_weight then adds the P partials in order.
// Deterministic without atomics: every sum has one owner and a fixed order.
//
// Block p owns rows [p R, (p + 1) R), R = ceil(N / P), and a thread 8 channels (blockDim = C / 8 rounded up to
// whole warps), so that the thread's dweight and dbias sums stay in its registers over all the block's rows and
// dout and inp are read once. A row's two sums over C (of dnorm = dout w and of dnorm norm) are combined as
// everywhere here: a thread's 8 in order, the warp's butterfly, then the warps in order through shared memory
// (double-buffered by batch, so one barrier a batch). BATCH rows are loaded before the first is used.
//
// At most 80 registers (BATCH 2, no spills): eight 96-thread blocks an SM hold gpt2's 1024 in one wave, where 4 rows in
// flight took 118 registers, five blocks an SM and 1.55 waves (71.5 against 63.6 us at N 32768, C 768; small's shape
// 25.0 against 24.7; the same bits; H200, 2026-12-02). Its blocks have at most ln::MAX_THREADS threads.
extern "C" __global__ void __maxnreg__(80)
    layernorm_backward(__half* dinp, float* partials, const __half* dout, const __half* inp, const __half* weight,
                       const float* mean, const float* rstd, int N, int C) {
    cpl::grid_dependency();
    using namespace cpl;
    __shared__ float sums[2][ln::BATCH][ln::MAX_THREADS / 32][2];
    extern __shared__ __align__(16) uint4 ln_ring[];
    unsigned staged_bytes;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(staged_bytes));
    const bool vec = C % PACK == 0 && aligned16(dinp) && aligned16(dout) && aligned16(inp) && aligned16(weight);
    if (vec && staged_bytes >= (unsigned)ln_staged_bytes(blockDim.x))
        ln_backward_rows<true>(dinp, partials, dout, inp, weight, mean, rstd, N, C, vec, ln_ring, sums);
    else
        ln_backward_rows<false>(dinp, partials, dout, inp, weight, mean, rstd, N, C, vec, ln_ring, sums);
}

// layernorm_backward_weight: dweight[c] and dbias[c], the sums of the partials' P rows. A block of 1024 threads
// owns 32 of the 2C columns (a lane each); warp v adds rows v, v + 32, ... in order, then the 32 warps' sums are
// added in warp order. Geometry: grid = ceil(2C / 32), blocks of 1024.
// A warp's rows (at most MAX_BLOCKS / 32) are all loaded before its first add: the launch moves a few MB and is
// latency-bound (~5.8 us at small with 8 loads in flight a warp, four round trips), so one round trip is the aim.
// The same adds in the same order: the same bits.
constexpr int LN_WEIGHT_ROWS = cpl::ln::MAX_BLOCKS / 32;  // partial rows a warp adds
extern "C" __global__ void __launch_bounds__(cpl::ln::WEIGHT_THREADS)
    layernorm_backward_weight(__half* dweight, __half* dbias, const float* partials, int N, int C) {
    cpl::grid_dependency();
    using namespace cpl;
    __shared__ float part[32][33];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, P = ln::backward_blocks(N);
    const int j = blockIdx.x * 32 + lane;  // a column of (2, C): dweight's, then dbias's
    float row[LN_WEIGHT_ROWS];
#pragma unroll
    for (int i = 0; i < LN_WEIGHT_ROWS; ++i) {
        const int p = warp + 32 * i;
        row[i] = j < 2 * C && p < P ? partials[(i64)p * 2 * C + j] : 0.f;
    }
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < LN_WEIGHT_ROWS; ++i)
        if (warp + 32 * i < P) s += row[i];
    part[warp][lane] = s;
    __syncthreads();
    if (warp != 0 || j >= 2 * C) return;
    float total = part[0][lane];
#pragma unroll
    for (int v = 1; v < 32; ++v) total += part[v][lane];
    if (j < C) st(dweight, j, total);
    else st(dbias, j - C, total);
}

#endif
