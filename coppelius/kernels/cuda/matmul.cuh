// Coppelius tensor-core matmuls: matmul_forward, matmul_backward_input, matmul_backward_weight, the first two with
// a gelu in their epilogues (matmul_forward_gelu, matmul_backward_input_gelu), and matmul_forward with the rows'
// softmax statistics (matmul_forward_stats): MmEpilogue below.
//
// Parameters are the kernel catalog's (coppelius/formats/kernels.py), in its order; the launch
// geometry is coppelius/formats/geometry.py's. fp16 in memory, fp32 accumulation on the
// tensor cores (mma.sync m16n8k16, operands through ldmatrix), results rounded to nearest even.
//
// One tiled GEMM, C[M,Nn] = sum_k A(m,k) B(k,n), with each operand either K-major ([M][K],
// [Nn][K]) or "transposed" ([K][M], [K][Nn]) in memory:
//   forward          M=N   Nn=OC K=C   A = inp  [N][C]   (K-major)   B = weight [OC][C] (K-major)
//   backward_input   M=N   Nn=C  K=OC  A = dout [N][OC]  (K-major)   B = weight [OC][C] ([K][Nn])
//   backward_weight  M=OC  Nn=C  K=N   A = dout [N][OC]  ([K][M])    B = inp    [N][C]  ([K][Nn])
// Three tile shapes, chosen by the geometry and read back here from blockDim.x:
//   384 threads: sm_90a only, matmul_hopper.cuh's warp-specialized 128x256 tiles (128x128 where those would leave a
//                fifth of their columns empty; opted in to 216 KiB);
//   256 threads: 128x128 block tile, 8 warps of 64x32 (on sm_90a two warpgroups of 64x128 on wgmma), k-tile
//                32, 3 cp.async stages (48 KiB);
//   128 threads:  64x64 block tile,  4 warps of 32x32, k-tile 32, 4 stages (32 KiB), for launches
//                 with few 128x128 tiles.
// Shared tiles are XOR-swizzled in 16-byte chunks so that ldmatrix and cp.async are free of bank
// conflicts. Ragged edges: out-of-range chunks are zero-filled (cp.async src-size 0), stores are
// guarded. When C or OC is not a multiple of 8 (or a pointer is not 16-byte aligned), tiles are
// loaded element by element instead (same tiles, same arithmetic order: only slower).
// Deterministic: every output element is one thread's fp32 accumulator, summed in k order; no
// atomics. dbias (backward_weight) is summed by the blocks of the first column tile, one thread
// a row of dout^T, in n order (matmul_hopper.cuh's tiles sum it on the tensor cores).
// Split-K (backward_weight, whose K = B*T is long and whose output is often only a few tiles):
// from sm_90 on it is launched in thread-block clusters of S blocks, one output tile a cluster
// (S = 1, 2, 4 or 8 here, up to 16 for matmul_hopper.cuh's tiles; planned by formats/geometry.py,
// read back from the cluster's size). Block rank s sums k-tiles [s*KT/S, (s+1)*KT/S), puts its fp32
// partial tile in its shared memory, and after a cluster barrier each block reduces its share of the
// tile's rows, reading the S partials through distributed shared memory in split order 0..S-1
// (then + old dweight, one rounding). The sum order is fixed by the code, never by timing:
// deterministic without atomics or scratch memory. Below sm_90 (no clusters) S = 1.
#pragma once
#include <cuda_fp16.h>

#include "gelu.cuh"
#include "softmax.cuh"
#include "tensor_core.cuh"

#ifndef COPPELIUS_TC_MATMUL
#define COPPELIUS_TC_MATMUL
namespace coptc {

constexpr int MM_BK = 32;       // k-tile of the 128x128 and 64x64 tiles
constexpr int MM_SPLITS = 8;  // the most blocks (a cluster) per backward_weight output tile of these tiles

// Round two fp32 results (+ the old values when accumulate) to out[row][col], out[row][col + 1].
__device__ __forceinline__ void mm_store_pair(__half* o, int col, int Nn, float v0, float v1, bool accumulate,
                                              bool pair_ok) {
    if (pair_ok && col + 1 < Nn) {
        if (accumulate) {
            const float2 old = __half22float2(*reinterpret_cast<const __half2*>(o));
            v0 += old.x;
            v1 += old.y;
        }
        *reinterpret_cast<__half2*>(o) = __floats2half2_rn(v0, v1);
    } else {
        // (not + 0.f when not accumulating: that turns a -0 into +0, where the pair store keeps it)
        if (col < Nn) o[0] = __float2half_rn(accumulate ? v0 + __half2float(o[0]) : v0);
        if (col + 1 < Nn) o[1] = __float2half_rn(accumulate ? v1 + __half2float(o[1]) : v1);
    }
}

// What the epilogue does with the fp32 results (the catalog's matmuls): store them rounded (MM_PLAIN); store gelu's
// slope at the rounded values to out and their gelu to aux, of out's shape [M][Nn] (matmul_forward_gelu: out = slope,
// aux = out_gelu; gelu.cuh); or store the rounded values times the slope aux holds (as gelu_backward would, with aux
// read: matmul_backward_input_gelu, aux = slope); or store them rounded and leave each row's softmax statistics
// over the tile's columns (matmul_forward_stats: MmStats).
enum MmEpilogue { MM_PLAIN, MM_GELU, MM_GELU_BACKWARD, MM_STATS };

// MM_STATS' output: for row r and the tile of columns from n0, (max, sum of exp(x - max)) of its fp16 values x in
// columns [n0, n0 + width) below V, at stats[2 (r P + n0 / width)], P = ceil(Nn / width); width = the tile's.
struct MmStats {
    float* stats;
    int V, width;

    __device__ __forceinline__ void put(int r, int n0, int Nn, float m, float s) const {
        reinterpret_cast<float2*>(stats)[(size_t)r * ((Nn + width - 1) / width) + n0 / width] = make_float2(m, s);
    }
};

template <int EPI>
__device__ __forceinline__ bool mm_pairs_ok(const __half* out, const __half* aux, int Nn) {
    const bool aux_stored = EPI == MM_GELU || EPI == MM_GELU_BACKWARD;
    const size_t bits = reinterpret_cast<size_t>(out) | (aux_stored ? reinterpret_cast<size_t>(aux) : 0);
    return (Nn & 1) == 0 && (bits & 3) == 0;
}

// aux's two values at element `at` = [row][col] (0 past Nn): gelu's slopes for MM_GELU_BACKWARD.
__device__ __forceinline__ __half2 mm_aux_pair(const __half* aux, size_t at, int col, int Nn, bool pair_ok) {
    if (pair_ok && col + 1 < Nn) return *reinterpret_cast<const __half2*>(aux + at);
    const __half zero = __float2half_rn(0.f);
    return __halves2half2(col < Nn ? aux[at] : zero, col + 1 < Nn ? aux[at + 1] : zero);
}

// The epilogue of two results at element `at` = [row][col] of the outputs, col + 1 < Nn or not; x: MM_GELU_BACKWARD's
// aux pair there (mm_aux_pair), read ahead by the caller.
template <int EPI>
__device__ __forceinline__ void mm_epilogue_pair(__half* out, __half* aux, size_t at, int col, int Nn, float v0,
                                                 float v1, bool accumulate, bool pair_ok, __half2 x = {}) {
    if (EPI == MM_PLAIN || EPI == MM_STATS) {
        mm_store_pair(out + at, col, Nn, v0, v1, accumulate, pair_ok);
        return;
    }
    v0 = __half2float(__float2half_rn(v0));
    v1 = __half2float(__float2half_rn(v1));
    if (EPI == MM_GELU_BACKWARD) {
        const float2 slope = __half22float2(x);
        mm_store_pair(out + at, col, Nn, v0 * slope.x, v1 * slope.y, false, pair_ok);  // gelu_backward_pair's bits
        return;
    }
    const cpl::GeluValueSlope g0 = cpl::gelu_value_slope(v0), g1 = cpl::gelu_value_slope(v1);
    mm_store_pair(out + at, col, Nn, g0.slope, g1.slope, false, pair_ok);
    mm_store_pair(aux + at, col, Nn, g0.value, g1.value, false, pair_ok);
}

// MM_STATS from a stored tile read back (out written by this block's threads before a barrier): rows [r0, r0 + rows),
// warp w of `warps` the rows w, w + warps, ..., lane l the columns n0 + l + 32 i.
__device__ __forceinline__ void mm_stats_from_out(const MmStats& st, const __half* out, int r0, int rows, int n0,
                                                  int M, int Nn, int warp, int warps) {
    const int lane = threadIdx.x & 31, end = min(n0 + st.width, st.V);
    for (int r = r0 + warp; r < min(r0 + rows, M); r += warps) {
        float m = cpl::neg_inf(), s = 0.f;
        for (int col = n0 + lane; col < end; col += 32) {
            const float x = __half2float(out[(size_t)r * Nn + col]);
            cpl::softmax_add<1>(m, s, &x, 1);
        }
        cpl::softmax_warp_merge(m, s);
        if (lane == 0) st.put(r, n0, Nn, m, s);
    }
}

// The column-tile / row-tile of a 1-D block index, in groups of 8 row tiles so that the blocks
// resident at one time share their A rows and B columns in L2.
__device__ __forceinline__ void mm_tile_of(int pid, int tilesM, int tilesN, int& tm, int& tn) {
    constexpr int GROUP = 8;
    const int width = GROUP * tilesN;
    const int group = pid / width;
    const int first = group * GROUP;
    const int gsize = min(tilesM - first, GROUP);
    const int in = pid - group * width;
    tm = first + in % gsize;
    tn = in / gsize;
}

// Element offset of chunk c (r c*8..c*8+7) of k row k in a transposed tile laid out as wgmma's
// MN-major atoms: [R/64 atoms][BK k][64], each k row of an atom 128 bytes, 16-byte chunks XOR-swizzled
// by k % 8 (the 128-byte swizzle; atoms start BK * 128 bytes apart).
template <int BK>
__device__ __forceinline__ int mn_atom(int k, int c) {
    return (c >> 3) * (BK * 64) + k * 64 + (((c & 7) ^ (k & 7)) << 3);
}

// mm_load's element-wise path (a dimension or leading dimension not a multiple of 8, or a misaligned
// operand), out of line: inlined, its bounds checks sat between the main loop's instructions, which then
// missed the instruction cache (as attention.cuh's at_load_elementwise). Inlined on sm_90a: ptxas ignores
// setmaxnreg (matmul_hopper.cuh's 128 x 192 ping-pong) in a kernel that holds a call (C7507).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define COPPELIUS_MM_ELEMENTWISE __forceinline__
#define COPPELIUS_MM_ELEMENTWISE_INLINED true
#else
#define COPPELIUS_MM_ELEMENTWISE __noinline__
#define COPPELIUS_MM_ELEMENTWISE_INLINED false
#endif
template <int R, int BK, int NT, bool KMAJOR, bool ATOMS>
__device__ COPPELIUS_MM_ELEMENTWISE void mm_load_elementwise(__half* s, const __half* __restrict__ g, int r0, int k0,
                                                             int Rmax, int K, int ld) {
    constexpr int CH = KMAJOR ? BK / 8 : R / 8;
    constexpr int CHUNKS = (KMAJOR ? R : BK) * CH;
    for (int id = threadIdx.x; id < CHUNKS; id += NT) {
        const int row = id / CH, c = id % CH;
        const int gr = KMAJOR ? r0 + row : r0 + c * 8, gk = KMAJOR ? k0 + c * 8 : k0 + row;
        const size_t off = KMAJOR ? (size_t)gr * ld + gk : (size_t)gk * ld + gr;
        __align__(16) __half v[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const bool ok = KMAJOR ? (gr < Rmax && gk + e < K) : (gk < K && gr + e < Rmax);
            v[e] = ok ? g[off + e] : __float2half_rn(0.f);
        }
        *reinterpret_cast<uint4*>(s + (!KMAJOR && ATOMS ? mn_atom<BK>(row, c) : swz<CH>(row, c))) =
            *reinterpret_cast<uint4*>(v);
    }
}

// Load one k-tile of an operand into shared memory.
// KMAJOR: global [R rows][ld] with k along the row: tile [R][BK], chunk (r, c) = rows r, k c*8..
// else:   global [K rows][ld] with r along the row: tile [BK][R], chunk (k, c) = k row, r c*8..
//         (ATOMS: laid out by mn_atom, for wgmma; else swizzled rows of R, for ldmatrix.trans)
template <int R, int BK, int NT, bool KMAJOR, bool ATOMS = false>
__device__ __forceinline__ void mm_load(__half* s, const __half* __restrict__ g, int r0, int k0, int Rmax, int K,
                                        int ld, bool vec) {
    constexpr int CH = KMAJOR ? BK / 8 : R / 8;
    constexpr int CHUNKS = (KMAJOR ? R : BK) * CH;
    static_assert(CHUNKS % NT == 0, "tile chunks must divide among the threads");
    if (!vec) {
        mm_load_elementwise<R, BK, NT, KMAJOR, ATOMS>(s, g, r0, k0, Rmax, K, ld);
        return;
    }
#pragma unroll
    for (int i = 0; i < CHUNKS / NT; ++i) {
        const int id = threadIdx.x + i * NT;
        const int row = id / CH, c = id % CH;
        int gr, gk;  // the tile's row index (m or n) and k index of the chunk's first element
        if (KMAJOR) { gr = r0 + row; gk = k0 + c * 8; } else { gk = k0 + row; gr = r0 + c * 8; }
        const bool ok = gr < Rmax && gk < K;
        cp_async16(s + (!KMAJOR && ATOMS ? mn_atom<BK>(row, c) : swz<CH>(row, c)),
                   ok ? g + (KMAJOR ? (size_t)gr * ld + gk : (size_t)gk * ld + gr) : g, ok);
    }
}

// mm_tile's MM_GELU_BACKWARD epilogue (no bias, no accumulate): the aux pairs of 8 fragments at a time loaded before
// their stores (read one at a time between the stores, their latencies added up: tiny's fc projection took 11.4 us
// against 6.0 plain, H200); the 64x64 tiles' 8 fragments a thread in one group, without spilling where the 128x128
// tiles' 16 at once did. frag_row, frag_col: mm_tile's fragment origins.
template <int F, typename FragRow, typename FragCol>
__device__ __forceinline__ void mm_tile_store_gelu_backward(__half* out, const __half* aux, const float (&acc)[F][4],
                                                            FragRow frag_row, FragCol frag_col, int m0, int n0, int M,
                                                            int Nn, int lane, bool pair_ok) {
    constexpr int GROUP = F < 8 ? F : 8;
    static_assert(F % GROUP == 0, "whole groups of fragments");
#pragma unroll
    for (int f0 = 0; f0 < F; f0 += GROUP) {
        __half2 x[GROUP][2];
        auto row_of = [&](int j, int h) { return m0 + frag_row(f0 + j) + (lane >> 2) + h * 8; };
        auto col_of = [&](int j) { return n0 + frag_col(f0 + j) + (lane & 3) * 2; };
#pragma unroll
        for (int j = 0; j < GROUP; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                x[j][h] = row_of(j, h) < M ? mm_aux_pair(aux, (size_t)row_of(j, h) * Nn + col_of(j), col_of(j), Nn,
                                                         pair_ok)
                                           : __half2{};
#pragma unroll
        for (int j = 0; j < GROUP; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                if (row_of(j, h) < M)
                    mm_epilogue_pair<MM_GELU_BACKWARD>(out, nullptr, (size_t)row_of(j, h) * Nn + col_of(j), col_of(j),
                                                       Nn, acc[f0 + j][2 * h], acc[f0 + j][2 * h + 1], false, pair_ok,
                                                       x[j][h]);
    }
}

// out[M,Nn] (leading dimension Nn) = A B (+ bias[n]) (+ out when accumulate), through epilogue EPI with aux;
// dbias[m] = sum_k A(m,k) when dbias is given (only with A stored [K][M]). splits > 1 (only in a kernel
// launched in clusters of that many blocks, at most MM_SPLITS): the blocks of a cluster share one tile and
// split its K.
template <int BM, int BN, int WM, int WN, int BK, int STAGES, bool AK, bool BK_MAJOR, int EPI = MM_PLAIN,
          typename Vec = bool>
__device__ __forceinline__ void mm_tile(__half* __restrict__ out, __half* __restrict__ aux,
                                        const __half* __restrict__ A, const __half* __restrict__ B,
                                        const __half* __restrict__ bias, __half* __restrict__ dbias, int M, int Nn,
                                        int K, int lda, int ldb, bool accumulate, Vec vec, int splits,
                                        MmStats st = {}) {
    constexpr int NT = WM * WN * 32;
    constexpr int WTM = BM / WM, WTN = BN / WN;
    constexpr int MI = WTM / 16, NI = WTN / 8;
    static_assert(NI % 2 == 0, "warp tile n must be a multiple of 16");
    constexpr int A_ELEMS = BM * BK, STAGE_ELEMS = (BM + BN) * BK;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    // sm_90a, 128x128 tiles: a warpgroup (4 warps) a 64-row band of 128 columns on wgmma, operands straight
    // from the shared tiles (K-major tiles are already wgmma's 64-byte-swizzled layout for k-tiles of 32;
    // transposed ones are laid out as its 128-byte-swizzled MN-major atoms).
    constexpr bool WG = BN == 128 && WN == 4 && WM * 64 == BM;
#else
    constexpr bool WG = false;
#endif
    static_assert(BK == MM_BK, "the tiles take k-tiles of MM_BK");
    constexpr int AHEAD = STAGES - 1;  // k-tiles loaded ahead of the one being multiplied
    // wgmma's swizzle patterns hold for tiles at 1024-byte-aligned shared addresses
    extern __shared__ __align__(1024) unsigned char coptc_mm_smem[];
    __half* sm = reinterpret_cast<__half*>(coptc_mm_smem);

    if (M <= 0 || Nn <= 0) return;  // nothing to write
    const int tilesM = (M + BM - 1) / BM, tilesN = (Nn + BN - 1) / BN;
    // Split-K: a cluster of `splits` blocks a tile, block rank `split` summing the split-th part of K.
    const int tiles = tilesM * tilesN;
    int pid = blockIdx.x, split = 0;
#if __CUDA_ARCH__ >= 900
    if (splits > 1) pid = (int)(blockIdx.x / splits), split = (int)cluster_rank();
#endif
    if (splits == 1 && pid >= tiles) return;
    // A split block past the last tile (a grid larger than planned) has no work, but takes part in its cluster's
    // barriers.
    const bool idle = pid >= tiles;
    int tm = tilesM, tn = 0;
    if (!idle) mm_tile_of(pid, tilesM, tilesN, tm, tn);
    const int m0 = tm * BM, n0 = tn * BN;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WN, wn = warp % WN;
    const int KT_ALL = (K + BK - 1) / BK;
    const int kt0 = (int)((long long)KT_ALL * split / splits);
    const int KT = idle ? 0 : (int)((long long)KT_ALL * (split + 1) / splits) - kt0;  // this split's k-tiles
    const bool do_bias_sum = dbias != nullptr && tn == 0;

    // 16 x 8 fragments of the warp's accumulators (mma.sync and wgmma register layouts alike):
    // element e of fragment f is row frag_row(f) + lane/4 + 8*(e/2), column frag_col(f) + 2*(lane%4) + e%2.
    float acc[MI * NI][4];
#pragma unroll
    for (int f = 0; f < MI * NI; ++f)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[f][e] = 0.f;
    auto frag_row = [&](int f) { return WG ? warp * 16 : wm * WTM + (f / NI) * 16; };
    auto frag_col = [&](int f) { return WG ? f * 8 : wn * WTN + (f % NI) * 8; };
    float bsum = 0.f;

    auto load_stage = [&](int stage, int kt) {
        __half* sA = sm + stage * STAGE_ELEMS;
        __half* sB = sA + A_ELEMS;
        mm_load<BM, BK, NT, AK, WG>(sA, A, m0, (kt0 + kt) * BK, M, K, lda, vec);
        mm_load<BN, BK, NT, BK_MAJOR, WG>(sB, B, n0, (kt0 + kt) * BK, Nn, K, ldb, vec);
    };

#pragma unroll
    for (int s = 0; s < AHEAD; ++s) {
        if (s < KT) load_stage(s, s);
        cp_async_commit();
    }

    for (int kt = 0; kt < KT; ++kt) {
        cp_async_wait<AHEAD - 1>();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
        if constexpr (WG) {
            fence_proxy_async();  // this thread's tile writes, visible to the tensor cores
            wg_wait<0>();  // this warpgroup's products of the last k-tile are done reading their stage
        }
#endif
        __syncthreads();
        auto load_ahead = [&]() {
            const int nk = kt + AHEAD;
            if (nk < KT) load_stage(nk % STAGES, nk);
            cp_async_commit();
        };
        // matmul_forward's wgmma tiles load below, once the products are issued (measured on the H200: its
        // tiles 4-5% faster, 8192^3 552 -> 576 TF/s; the transposed-operand kernels 1-3% slower that way)
        constexpr bool LOAD_AFTER = WG && AK && BK_MAJOR;
        if (!LOAD_AFTER) load_ahead();
        const __half* sA = sm + (kt % STAGES) * STAGE_ELEMS;
        const __half* sB = sA + A_ELEMS;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
        if constexpr (WG) {
            // A: this warpgroup's 64 rows. K-major tiles: rows of BK halves (64 bytes, that swizzle), 8 rows
            // BK * 16 bytes apart, k16 32 bytes on; transposed: one 128-byte-swizzled atom (BK * 128 bytes),
            // 8 k rows 1024 bytes apart, k16 2048 bytes on.
            constexpr unsigned K_SWIZZLE = 2, ATOM = BK * 128;
            const int wg = warp >> 2;
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < BK / 16; ++kk) {
                const unsigned long long a = AK ? wg_desc(sA + wg * 64 * BK + kk * 16, 16, BK * 16, K_SWIZZLE)
                                                : wg_desc(sA + wg * 64 * BK + kk * 16 * 64, ATOM, 1024, 1);
                const unsigned long long b = BK_MAJOR ? wg_desc(sB + kk * 16, 16, BK * 16, K_SWIZZLE)
                                                      : wg_desc(sB + kk * 16 * 64, ATOM, 1024, 1);
                wgmma_m64n128k16<AK ? 0 : 1, BK_MAJOR ? 0 : 1>(acc, a, b);
            }
            wg_commit();
            wg_fence_acc(acc);
            // the stage AHEAD k-tiles on (last read by the products one back, which every warp has waited for
            // before the barrier), loaded after this k-tile's products are issued: its address arithmetic stays
            // off their path
            if (LOAD_AFTER) load_ahead();
        }
#endif
#pragma unroll
        for (int kk = 0; kk < (WG ? 0 : BK / 16); ++kk) {
            unsigned af[MI][4], bf[NI][2];
#pragma unroll
            for (int mi = 0; mi < MI; ++mi) {
                const int mb = wm * WTM + mi * 16;
                if (AK) {
                    const __half* p = sA + swz<BK / 8>(mb + (lane & 15), kk * 2 + (lane >> 4));
                    ldsm_x4(p, af[mi][0], af[mi][1], af[mi][2], af[mi][3]);
                } else {
                    const __half* p = sA + swz<BM / 8>(kk * 16 + ((lane >> 4) << 3) + (lane & 7),
                                                       (mb >> 3) + ((lane >> 3) & 1));
                    ldsm_x4_t(p, af[mi][0], af[mi][1], af[mi][2], af[mi][3]);
                }
            }
#pragma unroll
            for (int ni = 0; ni < NI; ni += 2) {
                const int nb = wn * WTN + ni * 8;
                if (BK_MAJOR) {
                    const __half* p = sB + swz<BK / 8>(nb + ((lane >> 4) << 3) + (lane & 7),
                                                          kk * 2 + ((lane >> 3) & 1));
                    ldsm_x4(p, bf[ni][0], bf[ni][1], bf[ni + 1][0], bf[ni + 1][1]);
                } else {
                    const __half* p = sB + swz<BN / 8>(kk * 16 + (lane & 15), (nb >> 3) + (lane >> 4));
                    ldsm_x4_t(p, bf[ni][0], bf[ni][1], bf[ni + 1][0], bf[ni + 1][1]);
                }
            }
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                for (int ni = 0; ni < NI; ++ni) mma16816(acc[mi * NI + ni], af[mi], bf[ni][0], bf[ni][1]);
        }
        if (!AK && do_bias_sum && tid < BM) {  // row tid of A^T: this k-tile's 32 values, in k order
#pragma unroll 8
            for (int k = 0; k < BK; ++k)
                bsum += __half2float(sA[(WG ? mn_atom<BK>(k, tid >> 3) : swz<BM / 8>(k, tid >> 3)) + (tid & 7)]);
        }
    }
    cp_async_wait<0>();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (WG) {
        wg_wait<0>();
        wg_fence_acc(acc);
    }
#endif
    const bool pair_ok = mm_pairs_ok<EPI>(out, aux, Nn);

#if __CUDA_ARCH__ >= 900
    if (splits > 1) {  // reduce the cluster's partial tiles, one band of warp rows (WTM rows) at a time (EPI: plain)
        constexpr int LD = BN + 8;   // fp32 row stride of a band: conflict-free float2 fragment stores
        constexpr int VEC = BN / 4;  // float4s a row
        static_assert(WTM * LD * 4 + BM * 4 <= STAGES * STAGE_ELEMS * 2,
                      "a band of partials and the dbias partials fit in the pipeline's shared memory");
        const int R0 = WTM * split / splits, ROWS = WTM * (split + 1) / splits - R0;  // band rows this block reduces
        float* band_sum = reinterpret_cast<float*>(coptc_mm_smem);
        float* bias_part = band_sum + WTM * LD;
        __syncthreads();  // every warp is done with the pipeline's tiles
        if (do_bias_sum && tid < BM) bias_part[tid] = bsum;
        for (int band = 0; band < WM; ++band) {
            if (wm == band) {  // (with wgmma too: warpgroup band = warps 4 band .. 4 band + 3 = rows of band wm)
#pragma unroll
                for (int f = 0; f < MI * NI; ++f)
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const int r = frag_row(f) - band * WTM + (lane >> 2) + h * 8;
                        const int c = frag_col(f) + (lane & 3) * 2;
                        *reinterpret_cast<float2*>(band_sum + r * LD + c) =
                            make_float2(acc[f][2 * h], acc[f][2 * h + 1]);
                    }
            }
            cluster_sync();  // every block's partial band (and dbias partials) written
            for (int i = tid; i < ROWS * VEC; i += NT) {
                const int r = R0 + i / VEC, c = (i % VEC) * 4;
                const int row = m0 + band * WTM + r, col = n0 + c;
                float4 v = ld_cluster_f4(band_sum + r * LD + c, 0);
                for (int s = 1; s < splits; ++s) {
                    const float4 p = ld_cluster_f4(band_sum + r * LD + c, s);
                    v.x += p.x; v.y += p.y; v.z += p.z; v.w += p.w;
                }
                if (row < M) {
                    __half* o = out + (size_t)row * Nn + col;
                    mm_store_pair(o, col, Nn, v.x, v.y, accumulate, pair_ok);
                    mm_store_pair(o + 2, col + 2, Nn, v.z, v.w, accumulate, pair_ok);
                }
            }
            const int B0 = BM * split / splits;  // the dbias rows this block adds up
            if (band == 0 && do_bias_sum && tid < BM * (split + 1) / splits - B0) {
                const int r = B0 + tid;
                float b = ld_cluster_f32(bias_part + r, 0);
                for (int s = 1; s < splits; ++s) b += ld_cluster_f32(bias_part + r, s);
                if (m0 + r < M) dbias[m0 + r] = __float2half_rn(b);
            }
            cluster_sync();  // every block is done reading this band before it is overwritten (or exits)
        }
        return;
    }
#endif

    if (do_bias_sum && tid < BM && m0 + tid < M) dbias[m0 + tid] = __float2half_rn(bsum);

    if constexpr (EPI == MM_GELU_BACKWARD) {
        mm_tile_store_gelu_backward<MI * NI>(out, aux, acc, frag_row, frag_col, m0, n0, M, Nn, lane, pair_ok);
        return;
    }
#pragma unroll
    for (int f = 0; f < MI * NI; ++f) {
        const int col = n0 + frag_col(f) + (lane & 3) * 2;
        float b0 = 0.f, b1 = 0.f;
        if (bias != nullptr) {
            if (col < Nn) b0 = __half2float(bias[col]);
            if (col + 1 < Nn) b1 = __half2float(bias[col + 1]);
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = m0 + frag_row(f) + (lane >> 2) + h * 8;
            if (row >= M) continue;
            mm_epilogue_pair<EPI>(out, aux, (size_t)row * Nn + col, col, Nn, acc[f][2 * h] + b0,
                                  acc[f][2 * h + 1] + b1, accumulate, pair_ok);
        }
    }
    if constexpr (EPI == MM_STATS) {
        __syncthreads();  // the tile is in out
        mm_stats_from_out(st, out, m0, BM, n0, M, Nn, warp, NT / 32);
    }
}

}  // namespace coptc
#include "matmul_hopper.cuh"
namespace coptc {

// The tile shapes; blockDim.x (planned by formats/geometry.py) says which. The matmul kernels' entries leave the wait
// for the launch before (launch.cuh) to this dispatch, which makes it where each path can. sm_90a: 384 threads are
// matmul_hopper.cuh's warp-specialized tiles, persistent for the forward and the input gradient (A K-major), one tile a
// block split over a cluster for the weight gradient.
template <bool AK, bool BK_MAJOR, int EPI = MM_PLAIN>
__device__ __forceinline__ void mm_dispatch(__half* out, __half* aux, const __half* A, const __half* B,
                                            const __half* bias, __half* dbias, int M, int Nn, int K, int lda, int ldb,
                                            bool accumulate, bool vec, int splits, unsigned* counter = nullptr,
                                            MmStats st = {}) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    const int tile_n = blockDim.x == MM_HOP_THREADS ? 256 : blockDim.x == 256 ? 128 : 64;
#else
    const int tile_n = blockDim.x == 256 ? 128 : 64;
#endif
    // MM_STATS' parts are the tiles' columns: a launch planned with another width is the planner's bug
    if (EPI == MM_STATS && st.width != tile_n) __trap();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if (blockDim.x == MM_HOP_THREADS) {
        if constexpr (AK)
            mm_hopper<AK, BK_MAJOR, EPI>(out, aux, A, B, bias, M, Nn, K, lda, ldb, vec, counter, st);
        else if (hop_split_columns(Nn) == 192)
            mm_hopper_split<AK, BK_MAJOR, 192>(out, A, B, dbias, M, Nn, K, lda, ldb, accumulate, vec, splits);
        else
            mm_hopper_split<AK, BK_MAJOR, 256>(out, A, B, dbias, M, Nn, K, lda, ldb, accumulate, vec, splits);
        return;
    }
#endif
    cpl::grid_dependency();  // the wait for the launch before (matmul_hopper.cuh's blocks wait after their prologue)
    auto tile = [&](auto vec_k) {
        if (blockDim.x == 256)
            mm_tile<128, 128, 2, 4, MM_BK, 3, AK, BK_MAJOR, EPI>(out, aux, A, B, bias, dbias, M, Nn, K, lda, ldb,
                                                                  accumulate, vec_k, splits, st);
        else
            mm_tile<64, 64, 2, 2, MM_BK, 4, AK, BK_MAJOR, EPI>(out, aux, A, B, bias, dbias, M, Nn, K, lda, ldb,
                                                                accumulate, vec_k, splits, st);
    };
    // Where the element-wise loads are inlined (sm_90a) the tiles are built once for each value of vec: tested
    // inside the k-loop, the element-wise code sat between A's and B's 16-byte copies (tiny's step 0.155 -> 0.168
    // ms, H100, 2026-12-06). The whole tile, not only its k-loop: the two loops joined before one epilogue had
    // ptxas serialize every wgmma of the kernel (C7515).
    if constexpr (COPPELIUS_MM_ELEMENTWISE_INLINED) {
        if (vec)
            tile(StaticBool<true>{});
        else
            tile(StaticBool<false>{});
    } else {
        tile(vec);
    }
}

}  // namespace coptc

// sm_90a: matmul_hopper.cuh's 384 threads a block with 168 registers a thread (a consumer's 64x256 fp32
// accumulators); elsewhere two blocks of 256 threads an SM.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define COPPELIUS_MM_BOUNDS __launch_bounds__(coptc::MM_HOP_THREADS, 1)
#else
#define COPPELIUS_MM_BOUNDS __launch_bounds__(256, 2)
#endif

// out[N,OC] = inp[N,C] @ weight[OC,C]^T + bias (bias may be null)
extern "C" __global__ void COPPELIUS_MM_BOUNDS
    matmul_forward(__half* out, const __half* inp, const __half* weight, const __half* bias, int N, int C, int OC) {
    const bool vec = (C % 8) == 0 && coptc::aligned16(inp) && coptc::aligned16(weight);
    coptc::mm_dispatch<true, true>(out, nullptr, inp, weight, bias, nullptr, N, OC, C, C, C, false, vec, 1);
}

// matmul_forward's products rounded to fp16, x: slope = gelu'(x), out_gelu = gelu(x) (gelu.cuh)
extern "C" __global__ void COPPELIUS_MM_BOUNDS
    matmul_forward_gelu(__half* slope, __half* out_gelu, const __half* inp, const __half* weight, const __half* bias,
                        int N, int C, int OC) {
    const bool vec = (C % 8) == 0 && coptc::aligned16(inp) && coptc::aligned16(weight);
    coptc::mm_dispatch<true, true, coptc::MM_GELU>(slope, out_gelu, inp, weight, bias, nullptr, N, OC, C, C, C, false,
                                                   vec, 1);
}

// matmul_forward without bias, and each row's softmax statistics over each tile's columns below V (MM_STATS): the lm
// head's, so that crossentropy_forward_backward_stats reads the logits once
extern "C" __global__ void COPPELIUS_MM_BOUNDS
    matmul_forward_stats(__half* out, float* stats, const __half* inp, const __half* weight, int N, int C, int OC,
                         int V, int width) {
    const bool vec = (C % 8) == 0 && coptc::aligned16(inp) && coptc::aligned16(weight);
    coptc::mm_dispatch<true, true, coptc::MM_STATS>(out, nullptr, inp, weight, nullptr, nullptr, N, OC, C, C, C, false,
                                                    vec, 1, nullptr, {stats, V, width});
}

// dinp[N,C] = dout[N,OC] @ weight[OC,C]; tile_counter: 0 before and after, the persistent tiles' schedule on sm_90a
// (matmul_hopper.cuh: HopSchedule), unused elsewhere
extern "C" __global__ void COPPELIUS_MM_BOUNDS
    matmul_backward_input(__half* dinp, const __half* dout, const __half* weight, int* tile_counter, int N, int C,
                          int OC) {
    const bool vec = (C % 8) == 0 && (OC % 8) == 0 && coptc::aligned16(dout) && coptc::aligned16(weight);
    coptc::mm_dispatch<true, false>(dinp, nullptr, dout, weight, nullptr, nullptr, N, C, OC, OC, C, false, vec, 1,
                                    reinterpret_cast<unsigned*>(tile_counter));
}

// matmul_backward_input, then dinp *= slope from dinp's fp16 values (gelu_backward's bits, in one pass)
extern "C" __global__ void COPPELIUS_MM_BOUNDS
    matmul_backward_input_gelu(__half* dinp, const __half* dout, const __half* weight, const __half* slope,
                               int* tile_counter, int N, int C, int OC) {
    const bool vec = (C % 8) == 0 && (OC % 8) == 0 && coptc::aligned16(dout) && coptc::aligned16(weight);
    coptc::mm_dispatch<true, false, coptc::MM_GELU_BACKWARD>(dinp, const_cast<__half*>(slope), dout, weight,
                                                             nullptr, nullptr, N, C, OC, OC, C, false, vec, 1,
                                                             reinterpret_cast<unsigned*>(tile_counter));
}

// dweight[OC,C] = dout^T @ inp (+ dweight when accumulate); dbias[OC] = column sums of dout (if not null).
// From sm_90 on launched in clusters of S blocks, S the blocks each output tile's K is split over (see the top).
extern "C" __global__ void COPPELIUS_MM_BOUNDS
    matmul_backward_weight(__half* dweight, __half* dbias, const __half* dout, const __half* inp, int N, int C, int OC,
                           unsigned int accumulate) {
    const bool vec = (C % 8) == 0 && (OC % 8) == 0 && coptc::aligned16(dout) && coptc::aligned16(inp);
#if __CUDA_ARCH__ >= 900
    const int splits = (int)coptc::cluster_size();
#else
    const int splits = 1;
#endif
    coptc::mm_dispatch<false, false>(dweight, nullptr, dout, inp, nullptr, dbias, OC, C, N, OC, C, accumulate != 0,
                                     vec, splits);
}
#endif  // COPPELIUS_TC_MATMUL
