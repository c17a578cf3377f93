// gelu's value and its derivative, for the element-wise kernels (elementwise.cuh) and the matmuls' epilogues
// (matmul.cuh, matmul_hopper.cuh): one definition, so a fused kernel gives the bits of the unfused pair.
//
// The reference's 0.5 x (1 + tanh y), y = sqrt(2/pi) (x + 0.044715 x^3), is the same function as x sigmoid(2y)
// = x / (1 + exp(-2y)), computed so: ex2.approx and a fast reciprocal, a few fp32 ulps, with no
// cancellation where tanh y is near -1 (the reference's own float32 form loses digits there), about 7
// instructions an element where tanhf's accurate sequence took about 25. Within 1 fp16 ulp of the cpu
// device's values.
#ifndef COPPELIUS_GELU_CUH
#define COPPELIUS_GELU_CUH
#include "approx.cuh"

namespace cpl {

constexpr float GELU_S = 0.7978845608028654f;         // sqrt(2/pi), as numpy rounds it to binary32
constexpr float GELU_A = 0.044715f;
constexpr float GELU_3A = (float)(3.0 * 0.044715);
constexpr float GELU_M2S_LOG2E = (float)(-2.0 * 0.7978845608028654 * 1.4426950408889634);  // -2 sqrt(2/pi) log2 e

// 1 / (1 + exp(-2y)) = sigmoid(2y): 0 once exp overflows (x below about -10)
__device__ __forceinline__ float gelu_sigmoid(float x) {
    const float e = exp2_approx(GELU_M2S_LOG2E * (x + GELU_A * x * x * x));
    return __fdividef(1.0f, 1.0f + e);
}

__device__ __forceinline__ float gelu_value(float x) { return x * gelu_sigmoid(x); }

// d gelu / dx = sig + 2 sqrt(2/pi) x sig (1 - sig) (1 + 3a x^2) (the reference's 0.5 (1 + th) + 0.5 x sech^2 ...,
// with 0.5 (1 + th) = sig and sech^2 = 4 sig (1 - sig))
__device__ __forceinline__ float gelu_local(float x) {
    const float sig = gelu_sigmoid(x);
    return sig + 2.0f * GELU_S * x * sig * (1.0f - sig) * (1.0f + GELU_3A * x * x);
}

}  // namespace cpl
#endif
