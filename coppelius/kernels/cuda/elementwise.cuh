// Element-wise kernels: gelu_forward, gelu_backward, residual_forward, nonfinite_check (one thread
// per pack of 8 fp16 values, a 16-byte access when the pointers allow it), adamw and cast_half
// (one thread per element: fp32 data already makes a warp's access 128 bytes).
// Geometry (formats/geometry.py): grid.x = ceil(N / 8 / 256) or ceil(N / 256), blocks of 256.
#ifndef COPPELIUS_ELEMENTWISE_CUH
#define COPPELIUS_ELEMENTWISE_CUH
#include "common.cuh"
#include "gelu.cuh"

namespace cpl {

__device__ __forceinline__ i64 pack_start() { return ((i64)blockIdx.x * THREADS + threadIdx.x) * PACK; }

}  // namespace cpl

extern "C" __global__ void __launch_bounds__(256) gelu_forward(__half* out, const __half* inp, int N) {
    cpl::grid_dependency();
    using namespace cpl;
    const i64 i = pack_start();
    if (i >= N) return;
    const bool vec = aligned16(out) && aligned16(inp);
    Pack x = load_pack(inp, i, N, vec), y;
#pragma unroll
    for (int k = 0; k < PACK; ++k) y.v[k] = gelu_value(x.v[k]);
    store_pack(out, i, N, vec, y);
}

extern "C" __global__ void __launch_bounds__(256)
    gelu_backward(__half* dinp, const __half* slope, const __half* dout, int N) {
    cpl::grid_dependency();
    using namespace cpl;
    const i64 i = pack_start();
    if (i >= N) return;
    const bool vec = aligned16(dinp) && aligned16(slope) && aligned16(dout);
    Pack s = load_pack(slope, i, N, vec), g = load_pack(dout, i, N, vec), y;
#pragma unroll
    for (int k = 0; k < PACK; ++k) y.v[k] = g.v[k] * s.v[k];  // exact in fp32: gelu_backward_pair's bits
    store_pack(dinp, i, N, vec, y);
}

extern "C" __global__ void __launch_bounds__(256)
    residual_forward(__half* out, const __half* inp1, const __half* inp2, int N) {
    cpl::grid_dependency();
    using namespace cpl;
    const i64 i = pack_start();
    if (i >= N) return;
    const bool vec = aligned16(out) && aligned16(inp1) && aligned16(inp2);
    Pack a = load_pack(inp1, i, N, vec), b = load_pack(inp2, i, N, vec);
#pragma unroll
    for (int k = 0; k < PACK; ++k) a.v[k] = a.v[k] + b.v[k];
    store_pack(out, i, N, vec, a);
}

// Every thread that sees a nan or an inf stores 1: the same word from any number of writers, so
// the result does not depend on their order and needs no atomics. The piece zeroes *flag first.
extern "C" __global__ void __launch_bounds__(256) nonfinite_check(int* flag, const __half* grads, int N) {
    cpl::grid_dependency();
    using namespace cpl;
    const i64 i = pack_start();
    if (i >= N) return;
    bool bad = false;
    if (aligned16(grads) && i + PACK <= N) {
        const uint4 u = *reinterpret_cast<const uint4*>(grads + i);
        const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int k = 0; k < 4; ++k)  // exponent all ones, in either half of the word
            bad |= (w[k] & 0x7c00u) == 0x7c00u || (w[k] & 0x7c000000u) == 0x7c000000u;
    } else {
        for (i64 j = i; j < i + PACK && j < N; ++j) bad |= (__half_as_ushort(grads[j]) & 0x7c00u) == 0x7c00u;
    }
    if (bad) *flag = 1;
}

// One AdamW step (reference.adamw) unless *flag says the gradients were not finite. The
// operations are the reference's, in its order, with intrinsics that forbid contraction into
// fused multiply-adds, so params, m, v and half equal the cpu device's bit for bit.
extern "C" __global__ void __launch_bounds__(256)
    adamw(float* params, float* m, float* v, const __half* grads, __half* half, const int* flag, int N, float beta1,
          float beta2, float decay, float step_size, float eps) {
    cpl::grid_dependency();
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N || *flag != 0) return;
    const float g = __half2float(grads[i]), p = params[i];
    const float m1 = __fadd_rn(__fmul_rn(beta1, m[i]), __fmul_rn(__fsub_rn(1.0f, beta1), g));
    const float v1 = __fadd_rn(__fmul_rn(beta2, v[i]), __fmul_rn(__fmul_rn(__fsub_rn(1.0f, beta2), g), g));
    const float p1 = __fsub_rn(__fsub_rn(p, __fmul_rn(decay, p)),
                               __fdiv_rn(__fmul_rn(step_size, m1), __fadd_rn(__fsqrt_rn(v1), eps)));
    m[i] = m1;
    v[i] = v1;
    params[i] = p1;
    half[i] = __float2half_rn(p1);
}

extern "C" __global__ void __launch_bounds__(256) cast_half(__half* out, const float* inp, int N) {
    cpl::grid_dependency();
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) out[i] = __float2half_rn(inp[i]);
}

#endif
