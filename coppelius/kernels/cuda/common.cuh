// Helpers shared by the Coppelius CUDA kernels other than the tensor-core ones (those keep their
// own, in namespace coptc).
//
// Numbers: fp16 in memory, fp32 arithmetic, fp16 stores rounded to nearest even
// (__float2half_rn), the same rounding as the cpu device's numpy astype(float16).
//
// Determinism: a resumed run must repeat an uninterrupted one bit for bit, so no kernel uses
// floating-point atomics, and every reduction adds in an order fixed by the launch shape alone:
// a lane adds its own elements in index order, a warp combines lanes with a butterfly (the two
// lanes of each exchange compute a + b and b + a, equal in IEEE arithmetic, so every lane ends
// with the same bits), and a block combines its warps' results in warp order.
#ifndef COPPELIUS_COMMON_CUH
#define COPPELIUS_COMMON_CUH
#include <cuda_fp16.h>
#include "launch.cuh"

namespace cpl {

constexpr int THREADS = 256;  // every kernel here runs blocks of 256 threads (formats/geometry.py: THREADS)
constexpr int WARPS = THREADS / 32;
constexpr unsigned FULL = 0xffffffffu;
constexpr int PACK = 8;  // fp16 values in one 16-byte access

typedef long long i64;  // flat indices: N * Vp passes 2^31 for gpt2-sized batches

__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }  // NVRTC has no INFINITY

__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<unsigned long long>(p) & 15) == 0; }

__device__ __forceinline__ float ld(const __half* p, i64 i) { return __half2float(p[i]); }
__device__ __forceinline__ void st(__half* p, i64 i, float x) { p[i] = __float2half_rn(x); }

struct Pack {
    float v[PACK];
};

__device__ __forceinline__ Pack unpack(uint4 u) {
    Pack r;
    const __half2* h = reinterpret_cast<const __half2*>(&u);
#pragma unroll
    for (int k = 0; k < PACK / 2; ++k) {
        float2 f = __half22float2(h[k]);
        r.v[2 * k] = f.x;
        r.v[2 * k + 1] = f.y;
    }
    return r;
}

// p[i .. i+8) as floats; elements at or past `end` read as 0. `vec`: p is 16-byte aligned and i a
// multiple of 8, so a whole pack is one 16-byte load. Either path gives the same values.
__device__ __forceinline__ Pack load_pack(const __half* p, i64 i, i64 end, bool vec) {
    if (vec && i + PACK <= end) return unpack(*reinterpret_cast<const uint4*>(p + i));
    Pack r;
#pragma unroll
    for (int k = 0; k < PACK; ++k) r.v[k] = i + k < end ? ld(p, i + k) : 0.f;
    return r;
}

// p[i .. i+8) as raw fp16 bits (0 at or past end): loaded now, converted (unpack) when
// used, so that several loads can be in flight before the first use.
__device__ __forceinline__ uint4 load_raw(const __half* p, i64 i, i64 end, bool vec) {
    if (vec && i + PACK <= end) return *reinterpret_cast<const uint4*>(p + i);
    unsigned w[PACK / 2];
#pragma unroll
    for (int k = 0; k < PACK / 2; ++k) {
        const unsigned lo = i + 2 * k < end ? __half_as_ushort(p[i + 2 * k]) : 0u;
        const unsigned hi = i + 2 * k + 1 < end ? __half_as_ushort(p[i + 2 * k + 1]) : 0u;
        w[k] = lo | hi << 16;
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// Stores the elements of x below `end` to p[i .. i+8), each rounded to nearest even.
__device__ __forceinline__ void store_pack(__half* p, i64 i, i64 end, bool vec, const Pack& x) {
    if (vec && i + PACK <= end) {
        uint4 u;
        __half2* h = reinterpret_cast<__half2*>(&u);
#pragma unroll
        for (int k = 0; k < PACK / 2; ++k) h[k] = __floats2half2_rn(x.v[2 * k], x.v[2 * k + 1]);
        *reinterpret_cast<uint4*>(p + i) = u;
        return;
    }
#pragma unroll
    for (int k = 0; k < PACK; ++k)
        if (i + k < end) st(p, i + k, x.v[k]);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    return v;
}

}  // namespace cpl
#endif
