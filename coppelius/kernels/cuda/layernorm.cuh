// layernorm_forward and layernorm_backward: rows of C channels, N rows.
#ifndef COPPELIUS_LAYERNORM_CUH
#define COPPELIUS_LAYERNORM_CUH
#include "common.cuh"

namespace cpl {
namespace ln {
constexpr float EPS = 1e-5f;
constexpr int ROWS = WARPS;              // rows per block: a warp each
constexpr int COLUMNS = PACK;            // channels per column block of the backward
constexpr int BATCH = 4;                 // rows a column-block thread loads before adding them
}  // namespace ln
}  // namespace cpl

// A warp per row (grid.x = ceil(N / 8)): mean, then the biased variance around it (two passes
// over the row, the second from L1), rstd = 1/sqrt(var + 1e-5), out = (x - mean) * rstd * w + b.
// A lane adds its channels 8*lane + 256*i in order, then the warp combines (common.cuh).
extern "C" __global__ void __launch_bounds__(256)
    layernorm_forward(__half* out, float* mean, float* rstd, const __half* inp, const __half* weight,
                      const __half* bias, int N, int C) {
    using namespace cpl;
    const int lane = threadIdx.x & 31;
    const int n = blockIdx.x * ln::ROWS + (threadIdx.x >> 5);
    if (n >= N) return;
    const bool vec = C % PACK == 0 && aligned16(out) && aligned16(inp) && aligned16(weight) && aligned16(bias);
    const i64 row = (i64)n * C;
    float s = 0.f;
    for (int c = lane * PACK; c < C; c += 32 * PACK) {
        const Pack x = load_pack(inp, row + c, row + C, vec);
#pragma unroll
        for (int k = 0; k < PACK; ++k) s += x.v[k];
    }
    const float m = warp_sum(s) / (float)C;
    float q = 0.f;
    for (int c = lane * PACK; c < C; c += 32 * PACK) {
        const Pack x = load_pack(inp, row + c, row + C, vec);
#pragma unroll
        for (int k = 0; k < PACK && c + k < C; ++k) {
            const float d = x.v[k] - m;
            q += d * d;
        }
    }
    const float r = 1.0f / sqrtf(warp_sum(q) / (float)C + ln::EPS);
    for (int c = lane * PACK; c < C; c += 32 * PACK) {
        const Pack x = load_pack(inp, row + c, row + C, vec), w = load_pack(weight, c, C, vec),
                   b = load_pack(bias, c, C, vec);
        Pack y;
#pragma unroll
        for (int k = 0; k < PACK; ++k) y.v[k] = (x.v[k] - m) * r * w.v[k] + b.v[k];
        store_pack(out, row + c, row + C, vec, y);
    }
    if (lane == 0) {
        mean[n] = m;
        rstd[n] = r;
    }
}

// Two kinds of block in one grid (grid.x = ceil(C / 8) + ceil(N / 8)):
// - column blocks (first, so that these longer ones start first): dweight and dbias of 8
//   channels (one 16-byte access of a row), summed over all N rows with no scratch memory: thread
//   t adds rows t, t+256, ... in row order, a warp combines its lanes (common.cuh), and one thread
//   per channel adds the 8 warps' sums in warp order;
// - row blocks: dinp += the input gradient, a warp per row as in the forward.
extern "C" __global__ void __launch_bounds__(256, 3)  // 3 blocks an SM: the row blocks want warps in flight
    layernorm_backward(__half* dinp, __half* dweight, __half* dbias, const __half* dout, const __half* inp,
                       const __half* weight, const float* mean, const float* rstd, int N, int C) {
    using namespace cpl;
    const bool vec = C % PACK == 0 && aligned16(dinp) && aligned16(dout) && aligned16(inp) && aligned16(weight);
    const int column_blocks = (C + ln::COLUMNS - 1) / ln::COLUMNS;

    if ((int)blockIdx.x < column_blocks) {
        __shared__ float part[2][WARPS][ln::COLUMNS];
        const int c = blockIdx.x * ln::COLUMNS;
        float dw[PACK] = {}, db[PACK] = {};
        for (int n0 = threadIdx.x; n0 < N; n0 += THREADS * ln::BATCH) {
            uint4 g[ln::BATCH], x[ln::BATCH];
            float m[ln::BATCH], r[ln::BATCH];
#pragma unroll
            for (int b = 0; b < ln::BATCH; ++b) {  // every load of the batch in flight before the first use
                const int n = n0 + b * THREADS;
                const i64 row = (i64)min(n, N - 1) * C;
                g[b] = load_raw(dout, row + c, row + C, vec);
                x[b] = load_raw(inp, row + c, row + C, vec);
                m[b] = mean[min(n, N - 1)];
                r[b] = rstd[min(n, N - 1)];
            }
#pragma unroll
            for (int b = 0; b < ln::BATCH; ++b) {
                if (n0 + b * THREADS >= N) break;
                const Pack gp = unpack(g[b]), xp = unpack(x[b]);
#pragma unroll
                for (int k = 0; k < PACK; ++k) {
                    dw[k] += gp.v[k] * ((xp.v[k] - m[b]) * r[b]);
                    db[k] += gp.v[k];
                }
            }
        }
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
        for (int k = 0; k < PACK; ++k) {
            dw[k] = warp_sum(dw[k]);
            db[k] = warp_sum(db[k]);
        }
        if (lane == 0) {
#pragma unroll
            for (int k = 0; k < PACK; ++k) part[0][warp][k] = dw[k], part[1][warp][k] = db[k];
        }
        __syncthreads();
        if (threadIdx.x < 2 * ln::COLUMNS) {
            const int which = threadIdx.x / ln::COLUMNS, k = threadIdx.x % ln::COLUMNS;
            float s = part[which][0][k];
#pragma unroll
            for (int w = 1; w < WARPS; ++w) s += part[which][w][k];
            if (c + k < C) st(which ? dbias : dweight, c + k, s);
        }
        return;
    }

    const int lane = threadIdx.x & 31;
    const int n = ((int)blockIdx.x - column_blocks) * ln::ROWS + (threadIdx.x >> 5);
    if (n >= N) return;
    const i64 row = (i64)n * C;
    const float m = mean[n], r = rstd[n];
    float s1 = 0.f, s2 = 0.f;
    for (int c = lane * PACK; c < C; c += 32 * PACK) {
        const Pack g = load_pack(dout, row + c, row + C, vec), x = load_pack(inp, row + c, row + C, vec),
                   w = load_pack(weight, c, C, vec);
#pragma unroll
        for (int k = 0; k < PACK; ++k) {
            const float dnorm = g.v[k] * w.v[k];
            s1 += dnorm;
            s2 += dnorm * ((x.v[k] - m) * r);
        }
    }
    const float mean_dnorm = warp_sum(s1) / (float)C, mean_dnorm_norm = warp_sum(s2) / (float)C;
    for (int c = lane * PACK; c < C; c += 32 * PACK) {
        const Pack g = load_pack(dout, row + c, row + C, vec), x = load_pack(inp, row + c, row + C, vec),
                   w = load_pack(weight, c, C, vec);
        Pack d = load_pack(dinp, row + c, row + C, vec);
#pragma unroll
        for (int k = 0; k < PACK; ++k) {
            const float norm = (x.v[k] - m) * r;
            d.v[k] = d.v[k] + r * (g.v[k] * w.v[k] - mean_dnorm - norm * mean_dnorm_norm);
        }
        store_pack(dinp, row + c, row + C, vec, d);
    }
}

#endif
