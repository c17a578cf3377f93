// Coppelius tensor-core causal attention: attention_forward, attention_backward.
//
// Parameters are the kernel catalog's (coppelius/formats/kernels.py), in its order; the launch
// geometry is coppelius/formats/geometry.py's (the tile constants below must match it).
// qkv is (B, T, 3C): q, k, v at channel offsets 0, C, 2C, head h at h*hs, hs = C / NH.
// The head size is padded to HSP in {16, 32, 64, 128} (zero-filled in shared memory); any hs up
// to 128 works, hs a multiple of 8 (with C) takes the cp.async path, others load element-wise.
//
// forward (flash attention 2): a block = 4 warps = 64 query rows of one (b, h); each warp owns
//   16 rows and walks the key/value tiles (64 keys, 32 for HSP 128) up to the diagonal, S = Q K^T
//   and O += P V on mma.sync, online softmax in fp32 (base-2 exponentials), P rounded to fp16 for
//   the PV product. lse (natural log, of the scaled scores) is saved per row.
// backward: one launch, two kinds of block, interleaved (even blockIdx.x: key block, odd: query
//   block), heaviest first, so that no output needs atomics:
//   key block   (64 keys, a warp 16 of them) walks the query tiles from its diagonal on,
//               recomputes P^T = exp(K Q^T * scale - lse) and dP^T = V dO^T, and accumulates
//               dV = P^T dO and dK = dS^T Q, dS = P (dP - D), D = rowsum(dO * O);
//   query block (64 queries, a warp 16) walks the key tiles up to its diagonal, recomputes P and
//               dP and accumulates dQ = dS K.
//   Each element of dqkv is written once, by one thread, summed in a fixed order: deterministic.
//   On sm_90a (HSP 64) the key block double-buffers its query tiles (attn_bwd_keys_wg: 64.5 KiB, the
//   geometry's per-arch shared bytes) and both blocks leave their last product of a tile running into
//   the next tile's loads and sums.
#pragma once
#include <cuda_fp16.h>

#include "tensor_core.cuh"

#ifndef COPPELIUS_TC_ATTENTION
#define COPPELIUS_TC_ATTENTION
namespace coptc {

constexpr float LOG2E = cpl::LOG2E;
constexpr float LN2 = 0.6931471805599453f;
#define COPTC_NEG_INF (-__int_as_float(0x7f800000))
#ifndef COPTC_ATTN_MIN_BLOCKS
#define COPTC_ATTN_MIN_BLOCKS 3  // blocks an SM must hold: caps registers at 168 a thread
#endif
// sm_90a's wgmma forward keeps its accumulators in 128 registers: four blocks an SM (0.267 -> 0.254 ms at
// gpt2's shape on the H200, docs/notes/gpu-speed.md); its HSP 128 path spills 104 bytes at that cap
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define COPTC_ATTN_FWD_MIN_BLOCKS 4
#ifndef COPTC_ATTN_FWD_STAGES  // the wgmma forward's K/V stages (AttnTiles::FWD_STAGES)
#define COPTC_ATTN_FWD_STAGES 3
#endif
#else
#define COPTC_ATTN_FWD_MIN_BLOCKS COPTC_ATTN_MIN_BLOCKS
#define COPTC_ATTN_FWD_STAGES 2
#endif

// Tile constants (formats/geometry.py mirrors them).
constexpr int AT_THREADS = 128;  // 4 warps
constexpr int AT_BR = 64;        // query rows of a forward block / of a backward query block
constexpr int AT_BCK = 64;       // keys of a backward key block
template <int HSP> struct AttnTiles {
    static constexpr int FWD_BC = HSP <= 64 ? 64 : 32;  // forward: keys a tile
    // forward: K/V stages; sm_90a's HSP 64 loads two tiles ahead (56 KiB, opted in; still four blocks an SM): a
    // tile's products are shorter than a load's latency under load (docs/notes/gpu-speed.md, thirty-eighth session)
    static constexpr int FWD_STAGES = HSP == 64 ? COPTC_ATTN_FWD_STAGES : 2;
    static constexpr int BWD_BRK = HSP <= 64 ? 64 : 16; // backward key block: queries a tile
    static constexpr int BWD_BCQ = HSP <= 64 ? 64 : 32; // backward query block: keys a tile
    static constexpr int BWD_QST = HSP <= 64 ? 2 : 1;   // backward query block: key tile stages
};

// at_load's element-wise path (hs or C not a multiple of 8, or a misaligned tensor), out of line: inlined,
// its bounds checks sat between the hot loops' instructions, which then missed the instruction cache (ncu:
// 42% of attention_backward's stalls were "no instruction"; gpt2's backward 1.09 -> 0.81 ms on the H200).
template <int ROWS, int HSP>
__device__ __noinline__ void at_load_elementwise(__half* s, const __half* __restrict__ g, int t0, int T, int hs,
                                                 size_t rs) {
    constexpr int CH = HSP / 8;
    for (int id = threadIdx.x; id < ROWS * CH; id += AT_THREADS) {
        const int r = id / CH, c = id % CH;
        const int t = t0 + r, d = c * 8;
        const __half* src = g + (size_t)t * rs + d;
        __align__(16) __half v[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] = (t < T && d + e < hs) ? src[e] : __float2half_rn(0.f);
        *reinterpret_cast<uint4*>(s + swz<CH>(r, c)) = *reinterpret_cast<uint4*>(v);
    }
}

// Load rows [t0, t0 + ROWS) x [0, HSP) of one head of one of q/k/v (pointer g at its channel
// offset, row stride rs) into a swizzled tile; rows >= T and columns >= hs are zero.
template <int ROWS, int HSP>
__device__ __forceinline__ void at_load(__half* s, const __half* __restrict__ g, int t0, int T, int hs, size_t rs,
                                        bool vec) {
    constexpr int CH = HSP / 8;
    constexpr int CHUNKS = ROWS * CH;
    if (!vec) {
        at_load_elementwise<ROWS, HSP>(s, g, t0, T, hs, rs);
        return;
    }
    // a thread's chunks are one column c, STEP rows apart: a multiple of the swizzle's period of 8 rows, so its
    // shared and global addresses are computed once (in a loop, 64-bit products a chunk took 13 instructions each)
    static_assert(AT_THREADS % CH == 0 && CHUNKS % AT_THREADS == 0 && (AT_THREADS / CH) % 8 == 0, "tile shape");
    constexpr int STEP = AT_THREADS / CH;
    const int r0 = threadIdx.x / CH, c = threadIdx.x % CH;
    const bool column_ok = c * 8 < hs;
    const __half* src = g + (size_t)(t0 + r0) * rs + c * 8;
    const size_t src_step = (size_t)STEP * rs;
    __half* dst = s + swz<CH>(r0, c);
#pragma unroll
    for (int i = 0; i < CHUNKS / AT_THREADS; ++i, src += src_step) {
        const bool ok = column_ok && t0 + r0 + i * STEP < T;
        cp_async16(dst + i * STEP * HSP, ok ? src : g, ok);
    }
}

// A fragments (16 rows x HSP) of a warp's rows [r0, r0+16) of a swizzled tile.
template <int HSP>
__device__ __forceinline__ void at_frag_a(unsigned (*f)[4], const __half* s, int r0, int lane) {
#pragma unroll
    for (int kk = 0; kk < HSP / 16; ++kk)
        ldsm_x4(s + swz<HSP / 8>(r0 + (lane & 15), kk * 2 + (lane >> 4)), f[kk][0], f[kk][1], f[kk][2], f[kk][3]);
}

// acc[16 x NCOL] += A(16 x HSP, fragments) * tile(NCOL rows x HSP)^T  (tile rows are the n index).
template <int HSP, int NCOL>
__device__ __forceinline__ void at_mm_nt(float (*acc)[4], const unsigned (*a)[4], const __half* s, int lane) {
#pragma unroll
    for (int ni = 0; ni < NCOL / 8; ni += 2) {
#pragma unroll
        for (int kk = 0; kk < HSP / 16; ++kk) {
            unsigned b0, b1, b2, b3;
            ldsm_x4(s + swz<HSP / 8>(ni * 8 + ((lane >> 4) << 3) + (lane & 7), kk * 2 + ((lane >> 3) & 1)), b0, b1,
                    b2, b3);
            mma16816(acc[ni], a[kk], b0, b1);
            mma16816(acc[ni + 1], a[kk], b2, b3);
        }
    }
}

// The A fragment (16 x 16, fp16) of k-step kk of a product's C fragments p (16 rows x 16 kk.. columns).
__device__ __forceinline__ void at_pack(unsigned (&a)[4], const float (*p)[4], int kk) {
    a[0] = pack_half2(p[2 * kk][0], p[2 * kk][1]);
    a[1] = pack_half2(p[2 * kk][2], p[2 * kk][3]);
    a[2] = pack_half2(p[2 * kk + 1][0], p[2 * kk + 1][1]);
    a[3] = pack_half2(p[2 * kk + 1][2], p[2 * kk + 1][3]);
}

// sm_90a, HSP 64: the block's 4 warps are one warpgroup and the products of 64 x 64 tiles run on wgmma.
// A 64 x 64 tile of at_load (rows of 128 bytes, swz<8>) is wgmma's 128-byte-swizzled layout when it
// starts 1024-byte aligned: read K-major (k = its columns, 16 of them 32 bytes on, 8 rows 1024 bytes
// apart) or MN-major (k = its rows, 16 of them 2048 bytes on). The warpgroup's accumulators are laid
// out as the mma.sync path's C fragments (warp w: rows 16w + lane/4 (+8)), so the softmax code is shared.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
constexpr bool AT_WGMMA = true;
#else
constexpr bool AT_WGMMA = false;
#endif

// Tiles just written by this thread (cp.async or stores), made visible to wgmma's reads after the barrier.
__device__ __forceinline__ void at_fence_async() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    fence_proxy_async();
#endif
}

// acc(64 x 64) = a(64 x 64) b(64 x 64)^T, and acc2 = a2 b2^T when TWO: one commit group.
template <bool TWO>
__device__ __forceinline__ void at_wg_nt(float (&acc)[8][4], const __half* a, const __half* b,
                                         float (&acc2)[8][4], const __half* a2, const __half* b2) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    const unsigned long long da = wg_desc(a, 16, 1024, 1), db = wg_desc(b, 16, 1024, 1);
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
        wgmma_m64n64k16<0, 0>(acc, wg_desc_step(da, kk * 32), wg_desc_step(db, kk * 32), kk > 0);
    if constexpr (TWO) {
        const unsigned long long da2 = wg_desc(a2, 16, 1024, 1), db2 = wg_desc(b2, 16, 1024, 1);
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
            wgmma_m64n64k16<0, 0>(acc2, wg_desc_step(da2, kk * 32), wg_desc_step(db2, kk * 32), kk > 0);
    }
    wg_commit();
    wg_wait<0>();
    wg_fence_acc(acc);
    wg_fence_acc(acc2);
#endif
}

// The A fragments (fp16) of a 64 x 64 product's C fragments p: element (ni, e) of p is half e % 2 of
// a[ni / 2][2 (ni % 2) + e / 2].
__device__ __forceinline__ void at_pack_tile(unsigned (&a)[4][4], const float (*p)[4]) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) at_pack(a[kk], p, kk);
}

// acc(64 x 64) += P(64 x 64, at_pack_tile's fragments) * tile(64 x 64), and acc2 += a2 tile2 when TWO: one
// commit group, not waited for. Until at_wg_wait, neither the accumulators nor the fragments may be touched;
// after it, at_wg_pinned keeps every read of them below the wait.
template <bool TWO>
__device__ __forceinline__ void at_wg_pv_async(float (&acc)[8][4], const unsigned (&a)[4][4], const __half* tile,
                                               float (&acc2)[8][4], const unsigned (&a2)[4][4], const __half* tile2) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    const unsigned long long d = wg_desc(tile, 8192, 1024, 1);
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) wgmma_m64n64k16_rs<1>(acc, a[kk], wg_desc_step(d, kk * 16 * 64 * 2));
    if constexpr (TWO) {
        const unsigned long long d2 = wg_desc(tile2, 8192, 1024, 1);
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) wgmma_m64n64k16_rs<1>(acc2, a2[kk], wg_desc_step(d2, kk * 16 * 64 * 2));
    }
    wg_commit();
#endif
}

// Every product this thread's warpgroup issued is done.
__device__ __forceinline__ void at_wg_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    wg_wait<0>();
#endif
}

// After at_wg_wait: the accumulators and the register operands of the products waited for stay where the
// tensor cores left or read them (no read moved above the wait, no register reused before it).
__device__ __forceinline__ void at_wg_pinned(float (&acc)[8][4], unsigned (&a)[4][4]) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    wg_fence_acc(acc);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(a[kk][e])::"memory");
#endif
}

// acc(64 x 64) += P(64 x 64, at_pack_tile's fragments) * tile(64 x 64), waited for.
__device__ __forceinline__ void at_wg_pv(float (&acc)[8][4], unsigned (&a)[4][4], const __half* tile) {
    at_wg_pv_async<false>(acc, a, tile, acc, a, tile);
    at_wg_wait();
    at_wg_pinned(acc, a);
}

// acc[16 x HSP] += P(16 x NK, as C-fragments of a 16 x NK product) * tile(NK rows x HSP).
template <int HSP, int NK>
__device__ __forceinline__ void at_mm_pv(float (*acc)[4], const float (*p)[4], const __half* s, int lane) {
#pragma unroll
    for (int kk = 0; kk < NK / 16; ++kk) {
        unsigned a[4];
        at_pack(a, p, kk);
#pragma unroll
        for (int dn = 0; dn < HSP / 8; dn += 2) {
            unsigned b0, b1, b2, b3;
            ldsm_x4_t(s + swz<HSP / 8>(kk * 16 + (lane & 15), dn + (lane >> 4)), b0, b1, b2, b3);
            mma16816(acc[dn], a, b0, b1);
            mma16816(acc[dn + 1], a, b2, b3);
        }
    }
}

// A quad's 4 x 4 words transposed (lane q of the quad ends with word q of each lane, in lane order): two exchanges
// of two words, with the lanes 2 apart, then 1 apart.
__device__ __forceinline__ void at_quad_transpose(unsigned (&w)[4], int lane) {
    const bool hi = lane & 2;
    unsigned a = __shfl_xor_sync(0xffffffffu, hi ? w[0] : w[2], 2);
    unsigned c = __shfl_xor_sync(0xffffffffu, hi ? w[1] : w[3], 2);
    if (hi) w[0] = a, w[1] = c;
    else w[2] = a, w[3] = c;
    const bool odd = lane & 1;
    a = __shfl_xor_sync(0xffffffffu, odd ? w[0] : w[1], 1);
    c = __shfl_xor_sync(0xffffffffu, odd ? w[2] : w[3], 1);
    if (odd) w[0] = a, w[2] = c;
    else w[1] = a, w[3] = c;
}

// Store a warp's 16 x HSP accumulator (times mul) to rows t0.. of a (B,T,*) tensor, row stride rs.
template <int HSP>
__device__ __forceinline__ void at_store(__half* g, size_t rs, const float (*acc)[4], float mul, int t0, int T,
                                         int hs, bool pair_ok, int lane) {
    // Whole rows of 16-byte stores (a store instruction covers 64 bytes of each of 8 rows: whole sectors), the
    // quad's fragments transposed first: the fragments' 4-byte stores filled half of each sector they wrote (ncu,
    // small's backward, H100, 2026-12-05). Not at HSP 128: its forward, at the register cap already, would spill
    // another 104 bytes.
    if constexpr (HSP == 32 || HSP == 64) {
        if (hs == HSP && (rs & 7) == 0 && aligned16(g)) {
            const int q = lane & 3;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int t = t0 + (lane >> 2) + h * 8;
#pragma unroll
                for (int k = 0; k < HSP / 32; ++k) {
                    unsigned w[4];
#pragma unroll
                    for (int j = 0; j < 4; ++j) {
                        const float* a = acc[4 * k + j];
                        const __half2 v = __floats2half2_rn(a[2 * h] * mul, a[2 * h + 1] * mul);
                        w[j] = *reinterpret_cast<const unsigned*>(&v);
                    }
                    at_quad_transpose(w, lane);
                    if (t < T)
                        *reinterpret_cast<uint4*>(g + (size_t)t * rs + (4 * k + q) * 8) =
                            make_uint4(w[0], w[1], w[2], w[3]);
                }
            }
            return;
        }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int t = t0 + (lane >> 2) + h * 8;
        if (t >= T) continue;
        __half* row = g + (size_t)t * rs;
#pragma unroll
        for (int dn = 0; dn < HSP / 8; ++dn) {
            const int d = dn * 8 + (lane & 3) * 2;
            const float v0 = acc[dn][2 * h] * mul, v1 = acc[dn][2 * h + 1] * mul;
            if (pair_ok && d + 1 < hs) {
                *reinterpret_cast<__half2*>(row + d) = __floats2half2_rn(v0, v1);
            } else {
                if (d < hs) row[d] = __float2half_rn(v0);
                if (d + 1 < hs) row[d + 1] = __float2half_rn(v1);
            }
        }
    }
}

// The largest of a warp row's scores in C fragments p (half r: elements 2r, 2r + 1 of each), as a tree: a chain of
// 2N dependent maxima was the forward's longest fixed-latency wait. The max of the same values in any order is the
// same value (fmaxf drops a NaN either way), so the bits are the chain's.
template <int N, int R>
__device__ __forceinline__ float at_row_max(const float (*p)[4]) {
    float v[N];
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = fmaxf(p[i][2 * R], p[i][2 * R + 1]);
    if constexpr (N >= 8) {
#pragma unroll
        for (int i = 0; i < 4; ++i) v[i] = fmaxf(v[i], v[i + 4]);
    }
    if constexpr (N >= 4) v[0] = fmaxf(v[0], v[2]), v[1] = fmaxf(v[1], v[3]);
    static_assert(N == 2 || N == 4 || N == 8, "a tile of 16, 32 or 64 keys");
    return fmaxf(fmaxf(v[0], v[1]), COPTC_NEG_INF);
}

template <int N, typename X>  // accumulators (float) or packed fp16 fragments (unsigned)
__device__ __forceinline__ void at_zero(X (*a)[4]) {
#pragma unroll
    for (int i = 0; i < N; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) a[i][e] = X(0);
}

// sum_d a[d] * b[d] over d in [d0, d1) (fp16 in, fp32 sum in d order). VEC: the same sum from 16-byte loads (d0
// and d1 - d0 multiples of 8, a and b 16-byte aligned): the two-byte loads, 64 a thread, were the backward query
// block's longest wait (ncu at gpt2's shape, H200, 2026-12-04: 8% of the launch's stall samples).
template <bool VEC>
__device__ __forceinline__ float at_dot(const __half* __restrict__ a, const __half* __restrict__ b, int d0, int d1) {
    float s = 0.f;
    if constexpr (VEC) {
        for (int d = d0; d < d1; d += 8) {
            const uint4 a8 = *reinterpret_cast<const uint4*>(a + d), b8 = *reinterpret_cast<const uint4*>(b + d);
            const __half* ah = reinterpret_cast<const __half*>(&a8);
            const __half* bh = reinterpret_cast<const __half*>(&b8);
#pragma unroll
            for (int e = 0; e < 8; ++e) s += __half2float(ah[e]) * __half2float(bh[e]);
        }
    } else {
        for (int d = d0; d < d1; ++d) s += __half2float(a[d]) * __half2float(b[d]);
    }
    return s;
}

// 1 / x, rounded as the IEEE division rounds it, for a normal x not near the exponent's ends: the compiler's fast
// path (MUFU.RCP, then one Newton step on FMAs) without its CALL to the slow path (zeros, denormals, infinities),
// which would sit between two items' wgmma (ptxas C7510: every wgmma serialized). x = 0 (a row past T, never
// stored) gives NaN where the division gives inf.
__device__ __forceinline__ float at_rcp(float x) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return fmaf(fmaf(-x, r, 1.f), r, r);
}

// A launch's items (x, h, b) of its one-item-a-block grid (nx, NH, B), taken by the blocks in turn: block i (its
// index in that grid's order, x fastest) does items i, i + blocks, ... So the full grid runs one item a block, and a
// resident grid (formats/geometry.py: ATTENTION_FORWARD_RESIDENT, a prime number of blocks, so that each block's
// items go round every x of a head: the x are the longest first) runs several a block without a launch's wave
// boundaries, the same computation of each item in the same thread: the same bits.
template <typename Body>
__device__ __forceinline__ void at_items(int nx, int NH, int B, Body&& body) {
    const int blocks = gridDim.x * gridDim.y * gridDim.z;
    const int first = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    // item i is (i % nx, i / nx % NH, i / (nx NH)); divided once here, then stepped by adds: a division between two
    // items' products is a call, across which ptxas serializes every wgmma of the kernel (C7510)
    int x = first % nx, h = first / nx % NH, b = first / (nx * NH);
    const int dx = blocks % nx, dh = blocks / nx % NH, db = blocks / (nx * NH);
    for (bool later = false; b < B; later = true) {
        if (later) __syncthreads();  // every warp is done with the item before's shared tiles
        body(x, h, b);
        x += dx, h += dh, b += db;
        if (x >= nx) x -= nx, ++h;
        if (h >= NH) h -= NH, ++b;
    }
}

// ------------------------------------------------------------------------------------- forward

// RESIDENT: the instance at_items loops over, with no call inside (ptxas C7510): the caller has checked that the
// 16-byte loads apply (no element-wise call), and 1 / l is at_rcp (no division's slow path)
template <int HSP, bool RESIDENT = false>
__device__ __forceinline__ void attn_fwd_tile(__half* __restrict__ out, float* __restrict__ lse,
                                              const __half* __restrict__ qkv, int x, int h, int b, int T, int C,
                                              int NH) {
    constexpr int BR = AT_BR, BC = AttnTiles<HSP>::FWD_BC, KT = HSP / 16, NKV = BC / 8, ND = HSP / 8;
    constexpr bool WG = AT_WGMMA && HSP == 64;
    extern __shared__ __align__(1024) unsigned char coptc_smem[];
    __half* sQ = reinterpret_cast<__half*>(coptc_smem);
    constexpr int STAGES = AttnTiles<HSP>::FWD_STAGES;
    __half* sK = sQ + BR * HSP;            // [STAGES][BC][HSP]
    __half* sV = sK + STAGES * BC * HSP;   // [STAGES][BC][HSP]

    const int hs = C / NH;
    const int nq = (T + BR - 1) / BR;
    const int qt = nq - 1 - x;  // the longest rows first
    const int q0 = qt * BR;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const size_t rs = (size_t)3 * C;
    const __half* gq = qkv + (size_t)b * T * rs + (size_t)h * hs;
    const __half* gk = gq + C;
    const __half* gv = gq + 2 * C;
    const bool vec = RESIDENT || ((hs % 8) == 0 && (C % 8) == 0 && aligned16(qkv));
    const float sc = rsqrtf((float)hs) * LOG2E;  // scores in log2 units

    const int last = min(q0 + BR, T) - 1;
    const int nkv = last / BC + 1;

    // commit group j holds K/V tile j (the first also Q); tile j is loaded STAGES - 1 tiles ahead, into stage j % STAGES
    at_load<BR, HSP>(sQ, gq, q0, T, hs, rs, vec);
    at_load<BC, HSP>(sK, gk, 0, T, hs, rs, vec);
    at_load<BC, HSP>(sV, gv, 0, T, hs, rs, vec);
    cp_async_commit();
#pragma unroll
    for (int j = 1; j < STAGES - 1; ++j) {
        if (j < nkv) {
            at_load<BC, HSP>(sK + j * BC * HSP, gk, j * BC, T, hs, rs, vec);
            at_load<BC, HSP>(sV + j * BC * HSP, gv, j * BC, T, hs, rs, vec);
        }
        cp_async_commit();
    }
    auto stage = [](int j) { return (int)((unsigned)j % STAGES) * BC * HSP; };  // unsigned: % 2 is & 1

    unsigned qf[KT][4];
    float o[ND][4];
    at_zero<ND>(o);
    float m[2] = {COPTC_NEG_INF, COPTC_NEG_INF}, l[2] = {0.f, 0.f};
    const int qw = q0 + warp * 16;  // this warp's first row
    const int g = lane >> 2, t2 = (lane & 3) * 2;

    // a tile's body, with the causal and T masks or without them: written once, compiled twice (with a run-time
    // test every element's mask was if-converted into ~4 instructions an element of every tile)
    auto tile = [&](const int j, auto masked) {
        constexpr bool MASKED = decltype(masked)::value;
        const int ahead = j + STAGES - 1;
        if (ahead < nkv) {
            at_load<BC, HSP>(sK + stage(ahead), gk, ahead * BC, T, hs, rs, vec);
            at_load<BC, HSP>(sV + stage(ahead), gv, ahead * BC, T, hs, rs, vec);
        }
        cp_async_commit();
        cp_async_wait<STAGES - 1>();
        if (WG) at_fence_async();
        __syncthreads();
        if (!WG && j == 0) at_frag_a<HSP>(qf, sQ, warp * 16, lane);
        const __half* k_s = sK + stage(j);
        const __half* v_s = sV + stage(j);

        float s[NKV][4];
        if constexpr (WG) {
            at_wg_nt<false>(s, sQ, k_s, s, nullptr, nullptr);
        } else {
            at_zero<NKV>(s);
            at_mm_nt<HSP, BC>(s, qf, k_s, lane);
        }

        const int k0 = j * BC;
        if constexpr (MASKED) {
#pragma unroll
            for (int ni = 0; ni < NKV; ++ni)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int key = k0 + ni * 8 + t2 + (e & 1), q = qw + g + (e >> 1) * 8;
                    if (key > q || key >= T) s[ni][e] = COPTC_NEG_INF;
                }
        }
        // of the raw scores: scaling by sc > 0 keeps the max
        float mx[2] = {at_row_max<NKV, 0>(s), at_row_max<NKV, 1>(s)};
        float alpha[2], mu[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            const float mn = fmaxf(m[r], mx[r] * sc);
            mu[r] = mn == COPTC_NEG_INF ? 0.f : mn;
            alpha[r] = exp2_approx(m[r] - mu[r]);
            m[r] = mn;
        }
        float rsum[2] = {0.f, 0.f};
#pragma unroll
        for (int ni = 0; ni < NKV; ++ni)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const float p = exp2_approx(fmaf(s[ni][e], sc, -mu[e >> 1]));
                s[ni][e] = p;
                rsum[e >> 1] += p;
            }
#pragma unroll
        for (int r = 0; r < 2; ++r) l[r] = l[r] * alpha[r] + rsum[r];
#pragma unroll
        for (int dn = 0; dn < ND; ++dn) {
            o[dn][0] *= alpha[0];
            o[dn][1] *= alpha[0];
            o[dn][2] *= alpha[1];
            o[dn][3] *= alpha[1];
        }
        if constexpr (WG) {
            unsigned pa[4][4];
            at_pack_tile(pa, s);
            at_wg_pv(o, pa, v_s);
        } else {
            at_mm_pv<HSP, BC>(o, s, v_s, lane);
        }
        __syncthreads();  // this stage is loaded again in the next tile
    };
    const int unmasked = min(q0 + 1, T) / BC;  // tiles no row of the block masks any key of
    for (int j = 0; j < unmasked; ++j) tile(j, StaticBool<false>{});
    for (int j = unmasked; j < nkv; ++j) tile(j, StaticBool<true>{});

    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        inv[r] = RESIDENT ? at_rcp(l[r]) : 1.f / l[r];
    }
    // out = o / l, row by row: scale each row's accumulators before the shared store routine
#pragma unroll
    for (int dn = 0; dn < ND; ++dn) {
        o[dn][0] *= inv[0];
        o[dn][1] *= inv[0];
        o[dn][2] *= inv[1];
        o[dn][3] *= inv[1];
    }
    const bool pair_ok = (hs % 2) == 0 && (C % 2) == 0 && (reinterpret_cast<size_t>(out) & 3) == 0;
    at_store<HSP>(out + (size_t)b * T * C + (size_t)h * hs, (size_t)C, o, 1.f, qw, T, hs, pair_ok, lane);
    if ((lane & 3) == 0) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int q = qw + g + r * 8;
            if (q < T) lse[((size_t)b * NH + h) * T + q] = (m[r] + log2f(l[r])) * LN2;
        }
    }
}

// One function per head size keeps each one's registers to itself. sm_90a's HSP 64 path is inlined
// into the kernel instead: a wgmma pipeline that crosses a call is serialized (ptxas C7510).
template <int HSP>
__device__ __noinline__ void attn_fwd(__half* out, float* lse, const __half* qkv, int x, int h, int b, int T, int C,
                                     int NH) {
    attn_fwd_tile<HSP>(out, lse, qkv, x, h, b, T, C, NH);
}

}  // namespace coptc

// Causal attention from packed qkv (B,T,3C): out (B,T,C), lse (B,NH,T) natural-log-sum-exp of the
// scaled scores. Head sizes up to 128.
extern "C" __global__ void __launch_bounds__(128, COPTC_ATTN_FWD_MIN_BLOCKS)
    attention_forward(__half* out, float* lse, const __half* qkv, int B, int T, int C, int NH) {
    cpl::grid_dependency();
    if (T <= 0 || NH <= 0) return;
    const int hs = C / NH;
    const int nq = (T + coptc::AT_BR - 1) / coptc::AT_BR;
    if (coptc::AT_WGMMA && hs > 32 && hs <= 64 && hs % 8 == 0 && C % 8 == 0 && coptc::aligned16(qkv)) {
        coptc::at_items(nq, NH, B, [=](int x, int h, int b) {
            if constexpr (coptc::AT_WGMMA) coptc::attn_fwd_tile<64, true>(out, lse, qkv, x, h, b, T, C, NH);
        });
        return;
    }
    // a block an item: geometry.py gives a resident grid (fewer blocks than items) only to the path above
    if ((long long)gridDim.x * gridDim.y * gridDim.z < (long long)nq * NH * B) __trap();
    const int x = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
    if (hs <= 16) coptc::attn_fwd<16>(out, lse, qkv, x, h, b, T, C, NH);
    else if (hs <= 32) coptc::attn_fwd<32>(out, lse, qkv, x, h, b, T, C, NH);
    else if (hs <= 64) {
        if constexpr (coptc::AT_WGMMA) coptc::attn_fwd_tile<64>(out, lse, qkv, x, h, b, T, C, NH);
        else coptc::attn_fwd<64>(out, lse, qkv, x, h, b, T, C, NH);
    }
    else coptc::attn_fwd<128>(out, lse, qkv, x, h, b, T, C, NH);
}
#endif  // COPPELIUS_TC_ATTENTION
