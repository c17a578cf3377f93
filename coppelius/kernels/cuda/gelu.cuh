// gelu's value and its derivative, for the element-wise kernels (elementwise.cuh) and the matmuls' epilogues
// (matmul.cuh, matmul_hopper.cuh): one definition, so a fused kernel gives the bits of the unfused pair.
// The forward stores the slope (the derivative at the fp16 pre-activation, rounded to fp16) beside the value, from
// the one sigmoid both take, and the backward multiplies by it: the backward's epilogue is then a multiply where it
// was an exp, a reciprocal and a dozen more operations an element (gpt2's fc projection's input gradient with the
// gelu backward fused: 0.35-0.37 ms computing the slope, 0.265-0.270 multiplying by it, 0.24-0.25 without the gelu;
// its forward 0.296 storing x, 0.308 storing the slope; H200, 2026-12-03).
//
// The reference's 0.5 x (1 + tanh y), y = sqrt(2/pi) (x + 0.044715 x^3), is the same function as x sigmoid(2y)
// = x / (1 + exp(-2y)), computed so: ex2.approx and a fast reciprocal, a few fp32 ulps, with no
// cancellation where tanh y is near -1 (the reference's own float32 form loses digits there), about 7
// instructions an element where tanhf's accurate sequence took about 25. Within 1 fp16 ulp of the cpu
// device's values.
#ifndef COPPELIUS_GELU_CUH
#define COPPELIUS_GELU_CUH
#include <cuda_fp16.h>

#include "approx.cuh"

namespace cpl {

constexpr float GELU_S = 0.7978845608028654f;         // sqrt(2/pi), as numpy rounds it to binary32
constexpr float GELU_A = 0.044715f;
constexpr float GELU_3A = (float)(3.0 * 0.044715);
constexpr float GELU_M2S_LOG2E = (float)(-2.0 * 0.7978845608028654 * 1.4426950408889634);  // -2 sqrt(2/pi) log2 e

// gelu(x) = x sig and d gelu / dx = sig + 2 sqrt(2/pi) x sig (1 - sig) (1 + 3a x^2) (the reference's
// 0.5 (1 + th) + 0.5 x sech^2 ..., with 0.5 (1 + th) = sig and sech^2 = 4 sig (1 - sig)), where
// sig = 1 / (1 + exp(-2y)) = 1 / (1 + 2^(x (k + a k x^2))), k = -2 sqrt(2/pi) log2 e: 0 once the power overflows (x
// below about -10). Written as fmas on x^2 (10 fp32 operations and 2 MUFU an element, 14 in the textbook order):
// matmul_forward_gelu's epilogue is bound by their issue. Within 1 fp16 ulp of the float64 reference at every fp16 x
// (both the textbook order and this, emulated in numpy, 2026-12-03).
struct GeluValueSlope {
    float value, slope;
};
__device__ __forceinline__ GeluValueSlope gelu_value_slope(float x) {
    const float x2 = x * x;
    const float sig = __fdividef(1.0f, 1.0f + exp2_approx(x * fmaf(GELU_A * GELU_M2S_LOG2E, x2, GELU_M2S_LOG2E)));
    return {x * sig, fmaf(x * fmaf(-sig, sig, sig), fmaf(2.0f * GELU_S * GELU_3A, x2, 2.0f * GELU_S), sig)};
}

__device__ __forceinline__ float gelu_value(float x) { return gelu_value_slope(x).value; }

// The backward: the gradient times the stored slope, both fp16. Their product is exact in fp32, so rounding it once
// to fp16 is the reference's float32 product stored as fp16; mul.rn (never contracted into an fma) is that rounding,
// one instruction a pair.
__device__ __forceinline__ __half2 gelu_backward_pair(__half2 dout, __half2 slope) { return __hmul2_rn(dout, slope); }

}  // namespace cpl
#endif
