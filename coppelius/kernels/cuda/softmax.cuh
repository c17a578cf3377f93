// A row's softmax statistics: its maximum m and the sum s of exp(x - m), built a pack at a time (online softmax:
// the sum rescaled when the maximum grows) and merged pair by pair. exp is the hardware's (__expf, loss.cuh says why).
// The loss kernels (loss.cuh) and matmul_forward_stats' mma.sync epilogues (matmul.cuh) share these, so the
// statistics a matmul leaves are built as the loss would build them from the logits. (sm_90a's wide tiles take each
// row's maximum first and sum exp2_approx(x log2 e - m log2 e) against it: the same MUFU exp, no rescaling, split
// between consumers and finishers, matmul_hopper.cuh.)
#ifndef COPPELIUS_SOFTMAX_CUH
#define COPPELIUS_SOFTMAX_CUH
#include "common.cuh"

namespace cpl {
// (m, s) <- the pair for the union of two sets: max m and sum of exp(x - m). Symmetric in its two
// arguments bit for bit (a + b == b + a), so a butterfly leaves every lane with the same pair: the products are
// rounded by hand, since a contraction to fma(s, e, os * eo) would not be (the compiler may contract one inlined
// copy and not another).
__device__ __forceinline__ void softmax_merge(float& m, float& s, float om, float os) {
    const float M = fmaxf(m, om);
    s = M == neg_inf() ? 0.f : __fadd_rn(__fmul_rn(s, __expf(m - M)), __fmul_rn(os, __expf(om - M)));
    m = M;
}

// (m, s) <- with the first `count` of the K values v (count <= 0: none): their maximum first, so that s is rescaled
// at most once a pack.
template <int K>
__device__ __forceinline__ void softmax_add(float& m, float& s, const float* v, int count) {
    float pm = neg_inf();
#pragma unroll
    for (int k = 0; k < K; ++k)
        if (k < count) pm = fmaxf(pm, v[k]);
    if (pm > m) {
        s = __fmul_rn(s, __expf(m - pm));  // never fused with the add below: the same bits in every inlined copy
        m = pm;
    }
#pragma unroll
    for (int k = 0; k < K; ++k)
        if (k < count) s += __expf(v[k] - m);
}

// Every lane of the warp <- the merge of the 32 lanes' pairs (a butterfly).
__device__ __forceinline__ void softmax_warp_merge(float& m, float& s) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) softmax_merge(m, s, __shfl_xor_sync(FULL, m, o), __shfl_xor_sync(FULL, s, o));
}
}  // namespace cpl
#endif
