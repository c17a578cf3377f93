// Helpers shared by the tensor-core kernels (matmul.cuh, attention.cuh): cp.async tile loads,
// ldmatrix, mma.sync m16n8k16 (fp16 operands, fp32 accumulators) and the swizzled tile layout.
#pragma once
#include <cuda_fp16.h>

#include "approx.cuh"
#include "launch.cuh"

namespace coptc {

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, asynchronously; zero-filled when !valid (src is then not read).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
                 "r"(valid ? 16 : 0)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

__device__ __forceinline__ void ldsm_x4(const void* p, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm_x4_t(const void* p, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(smem_u32(p)));
}

// d += a(16x16, row) * b(16x8, col), fp16 operands, fp32 accumulators.
__device__ __forceinline__ void mma16816(float* d, const unsigned* a, unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

using cpl::exp2_approx;  // (approx.cuh)

// Two floats -> one register of two fp16 (lo in the low half), round to nearest even.
__device__ __forceinline__ unsigned pack_half2(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&h);
}

// Element offset of chunk c (8 halves) of row r in a tile of CH chunks a row, XOR-swizzled so
// that 8 consecutive rows at one logical chunk fall in 8 distinct 16-byte bank groups.
template <int CH>
__device__ __forceinline__ int swz(int r, int c) {
    constexpr int ROWS_PER_PERIOD = CH >= 8 ? 1 : 8 / CH;
    constexpr int MASK = (CH >= 8 ? 8 : CH) - 1;
    return r * (CH * 8) + ((c ^ ((r / ROWS_PER_PERIOD) & MASK)) << 3);
}

__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<size_t>(p) & 15) == 0; }

// A bool known at compile time, passed to a generic lambda: read back as decltype(b)::value, or taken where a bool is
// (mm_dispatch builds mm_tile once for each value of vec)
template <bool B>
struct StaticBool {
    static constexpr bool value = B;
    __device__ constexpr operator bool() const { return B; }
};

#if __CUDA_ARCH__ >= 900
// Thread-block clusters (sm_90 and later): the blocks of a cluster read each other's shared memory.
__device__ __forceinline__ unsigned cluster_size() {
    unsigned n;
    asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(n));
    return n;
}
__device__ __forceinline__ unsigned cluster_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
// Every thread of every block of the cluster arrives; shared-memory writes before it are visible after it.
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
// 16 bytes of block `rank`'s shared memory, at the address p has in this block's.
__device__ __forceinline__ float4 ld_cluster_f4(const void* p, unsigned rank) {
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_u32(p)), "r"(rank));
    float4 v;
    asm volatile("ld.shared::cluster.v4.f32 {%0,%1,%2,%3}, [%4];\n"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                 : "r"(remote)
                 : "memory");
    return v;
}
__device__ __forceinline__ float ld_cluster_f32(const void* p, unsigned rank) {
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_u32(p)), "r"(rank));
    float v;
    asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(remote) : "memory");
    return v;
}
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Hopper warpgroup MMA (sm_90a): a shared-memory matrix descriptor. Start address, leading and
// stride byte offsets in 16-byte units; swizzle mode 1 = 128 B, 2 = 64 B (PTX ISA: matrix descriptor).
__device__ __forceinline__ unsigned long long wg_desc(const void* p, unsigned lbo, unsigned sbo, unsigned swizzle) {
    return (unsigned long long)((smem_u32(p) & 0x3FFFF) >> 4) | (unsigned long long)((lbo & 0x3FFFF) >> 4) << 16 |
           (unsigned long long)((sbo & 0x3FFFF) >> 4) << 32 | (unsigned long long)swizzle << 62;
}
// Descriptor d's start address moved `bytes` on (a multiple of 16) by a 32-bit add to its low word: shared addresses
// stay below 2^18 - bytes, so the 14-bit field never carries. Built once a tile and stepped, the descriptors of a
// product's k-steps cost an add each; rebuilt from the pointer, ~10 uniform instructions each sat between the
// attention's 64 x 64 wgmmas (cuobjdump, sm_90a).
__device__ __forceinline__ unsigned long long wg_desc_step(unsigned long long d, unsigned bytes) {
    const unsigned lo = (unsigned)d + (bytes >> 4), hi = (unsigned)(d >> 32);
    return (unsigned long long)hi << 32 | lo;
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// The accumulators pinned in place: no instruction that reads them (an epilogue's adds) is moved above
// the wgmma.wait_group before it; without this ptxas serializes every wgmma of the function (C7514).
template <int F>
__device__ __forceinline__ void wg_fence_acc(float (&d)[F][4]) {
#pragma unroll
    for (int f = 0; f < F; ++f)
#pragma unroll
        for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[f][e])::"memory");
}
// Generic-proxy writes to shared memory (cp.async, st.shared) made visible to the tensor cores' reads.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// d[64x128 per warpgroup] += A(64x16) B(16x128), fp16 operands from shared memory, fp32 accumulators:
// warp w of the warpgroup holds rows 16w + lane/4 (+8) of columns 8j + 2(lane%4) (+1) in d[j].
// TA / TB: the operand is stored M- / N-major (transposed) rather than K-major.
// d[64x8 per warpgroup] += A(64x16) B(16x8): the same register layout as one fragment of the above.
template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64n8k16(float (&d)[1][4], unsigned long long a, unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %8, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, %6, %7;\n}\n"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3])
        : "l"(a), "l"(b), "n"(TA), "n"(TB), "r"(1));
}

// The accumulator operands of the wgmma wrappers below: fragment f's four registers, eight fragments at a time;
// and their register lists in the instruction (%0 .. %31, .. %63, .. %127).
#define COPTC_ACC4(d, f) "+f"(d[f][0]), "+f"(d[f][1]), "+f"(d[f][2]), "+f"(d[f][3])
#define COPTC_ACC8(d, f) COPTC_ACC4(d, f), COPTC_ACC4(d, f + 1), COPTC_ACC4(d, f + 2), COPTC_ACC4(d, f + 3), \
    COPTC_ACC4(d, f + 4), COPTC_ACC4(d, f + 5), COPTC_ACC4(d, f + 6), COPTC_ACC4(d, f + 7)
#define COPTC_REGS32 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define COPTC_REGS64 COPTC_REGS32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define COPTC_REGS96 COPTC_REGS64 ", " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define COPTC_REGS128 COPTC_REGS64 ", " \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"

// d[64x64 per warpgroup] = A(64x16) B(16x64) (+ d when accumulate), both from shared memory (the layout
// of wgmma_m64n128k16's d). Not accumulating is how a product starts: its registers need no zeros.
template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[8][4], unsigned long long a, unsigned long long b,
                                                bool accumulate) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %36, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {" COPTC_REGS32 "}, %32, %33, p, 1, 1, %34, %35;\n}\n"
        : COPTC_ACC8(d, 0)
        : "l"(a), "l"(b), "n"(TA), "n"(TB), "r"(accumulate ? 1 : 0));
}
// d += A B with A from registers: warp w holds rows 16w.. of A(64x16) as mma.sync m16n8k16's A fragment
// (a[0]: row lane/4, k 2(lane%4) +1; a[1]: row +8; a[2]: k +8; a[3]: both), i.e. the packed halves of
// two neighbouring d fragments of an earlier product.
template <int TB>
__device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[8][4], const unsigned (&a)[4], unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %38, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {" COPTC_REGS32 "}, {%32, %33, %34, %35}, %36, p, 1, 1, "
        "%37;\n}\n"
        : COPTC_ACC8(d, 0)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "n"(TB), "r"(1));
}

template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[16][4], unsigned long long a, unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %68, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {" COPTC_REGS64 "}, %64, %65, p, 1, 1, %66, %67;\n}\n"
        : COPTC_ACC8(d, 0), COPTC_ACC8(d, 8)
        : "l"(a), "l"(b), "n"(TA), "n"(TB), "r"(1));
}

// The same with B 192 columns wide (d[24][4]): the weight gradient's tile where 256 columns would leave a quarter
// empty (matmul_hopper.cuh: hop_split_columns).
template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64n192k16(float (&d)[24][4], unsigned long long a, unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %100, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16 {" COPTC_REGS96 "}, %96, %97, p, 1, 1, %98, %99;\n}\n"
        : COPTC_ACC8(d, 0), COPTC_ACC8(d, 8), COPTC_ACC8(d, 16)
        : "l"(a), "l"(b), "n"(TA), "n"(TB), "r"(1));
}

// The same with B 256 columns wide (d[32][4], fragment j at columns 8j..): the widest product, whose A is read
// from shared memory once for twice the columns (matmul_hopper.cuh).
template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[32][4], unsigned long long a, unsigned long long b) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %132, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {" COPTC_REGS128 "}, %128, %129, p, 1, 1, %130, %131;\n}\n"
        : COPTC_ACC8(d, 0), COPTC_ACC8(d, 8), COPTC_ACC8(d, 16), COPTC_ACC8(d, 24)
        : "l"(a), "l"(b), "n"(TA), "n"(TB), "r"(1));
}
#endif

}  // namespace coptc
