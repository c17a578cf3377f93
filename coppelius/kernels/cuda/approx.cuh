// The MUFU's approximations, for every kernel that takes one (gelu.cuh; the attention kernels through
// tensor_core.cuh): one definition each.
#ifndef COPPELIUS_APPROX_CUH
#define COPPELIUS_APPROX_CUH

namespace cpl {

constexpr float LOG2E = 1.4426950408889634f;  // log2(e): exp(x) = 2^(x log2 e)

// 2^x on the MUFU alone (ex2.approx.ftz: relative error about 2^-22, results below 2^-126 flushed to 0). exp2f wraps
// it in a range fix-up of three more instructions an element: in the attention kernels, bound by their issue rate
// (ncu: the forward's issue slots 68% busy), that was most of the difference (docs/notes/gpu-speed.md "v42").
__device__ __forceinline__ float exp2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

}  // namespace cpl
#endif
