// Coppelius matmuls on sm_90a: warp-specialized 128x256 tiles (matmul.cuh includes this file and dispatches to it
// for blocks of MM_HOP_THREADS threads; its mm_load_elementwise, mn_atom, swz, mm_tile_of and mm_store_pair are
// used here).
//
// Why: matmul.cuh's tiles have every thread load, wait and meet at a barrier each k-tile, a tile's first loads and
// its stores leave the tensor cores idle, and 64x128 products read the B tile from shared memory once per 64 rows;
// at gpt2's shapes they ran at 0.4-0.74 of cuBLAS (bench/kernel_ab.py, H200, 2026-12-01). A block here is three
// warpgroups:
//   warpgroup 0, the producer, copies k-tiles into a ring of MM_HOP_STAGES shared stages (the weight gradient's
//     and the ping-pong's deeper: hop_ring_stages), in matmul.cuh's swizzled layouts, which
//     are the TMA unit's 128-byte swizzle, waiting on a stage's `empty` barrier before it refills it: one thread
//     issues the stage's TMA copies (tensor maps the block encodes itself, below), which complete the stage's
//     `full` barrier by their bytes; operands that are not 16-byte rows (no TMA) are stored by all 128 threads
//     (matmul.cuh's element-wise loads), each arriving on `full`;
//   warpgroups 1 and 2, the consumers, multiply each tile together, 64 rows each on m64n256k16 (the widest wgmma:
//     its A read once for 256 columns), waiting on `full`, releasing a stage on `empty` once the products that
//     read it are done. A stage returns to the producer only when both have released it, so the two run in
//     lockstep: a tile's bias and epilogue leave the tensor cores idle (~16% of a K = 768 tile, ~26% at K = 384),
//     and a staggered start does not last past the first tile (bench/experiments/matmul_stagger.patch, H200,
//     2026-12-04).
// mm_hopper (forward, input gradient): a persistent block an SM walks its tiles (blockIdx.x, + gridDim.x, ..., or the
// input gradient's taken from a counter one at a time: HopSchedule); the next tile's first k-tiles load while this
// one's last are multiplied, the sums start from the bias, and the results are rounded into shared staging that leaves
// under the next tile's products: a plain output's by the TMA unit's tensor stores (hop_store_boxes), the gelus' and
// the lm head statistics' by the producer warpgroup's idle warps (hop_finish_store), and where the operands' loads are
// element-wise (every producer warp busy) by the TMA unit's row copies.
// mm_hopper_pingpong (plain forwards and input gradients whose columns leave a 128x256 tile a fifth empty): each
// consumer a whole 128x128 or 128x192 tile, the two in turn, one's epilogue under the other's products.
// mm_hopper_split (weight gradient): one tile a block, K split over a cluster, the partials added in
// split order through distributed shared memory, dbias on the tensor cores.
// Every output element is one thread's fp32 accumulator summed in k order (or S of them added in split order),
// stored once: deterministic, independent of timing.
// The wait for the launch before (launch.cuh; matmul.cuh's mm_dispatch leaves it to these paths) comes
// after a block's prologue, which reads no memory another launch writes: its barriers, and its tensor maps (only
// the operands' addresses, in this SM's slot, which no other matmul block uses while this one lives: a block takes
// the SM's shared memory). So when the launch is programmatic they are made under the tail of the one before.
#pragma once
#include <cuda_fp16.h>

#include "launch.cuh"
#include "tensor_core.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
namespace coptc {

constexpr int MM_HOP_THREADS = 384;  // a producer and two consumer warpgroups (formats/geometry.py: HOPPER_THREADS)
constexpr int MM_HOP_STAGES = 3;     // shared stages of 128x64 + 256x64 fp16 (48 KiB each) (HOPPER_STAGES)
constexpr int MM_HOP_BK = 64;        // the k-extent of a stage (HOPPER_BK)
constexpr int MM_HOP_OUT_LD = 264;  // halves a row of a consumer's 64x256 output staging (HOPPER_OUT_LD; +16 bytes:
                                    // an 8x8 matrix's 8 rows in 8 bank groups, stmatrix without conflicts)
// a block's dynamic shared bytes (HOPPER_SHARED): hop_smem's layout below
constexpr int HOP_ID_RING = 16;                                    // the tile schedule's ring (HopSchedule)
constexpr int HOP_IDS_BYTES = HOP_ID_RING * 4 + HOP_ID_RING * 8;  // its ids, then their barriers
constexpr int MM_HOP_SHARED = MM_HOP_STAGES * (128 + 256) * MM_HOP_BK * 2 + 2 * 64 * MM_HOP_OUT_LD * 2 + 2 * 128 +
                              2 * 256 * 2 + MM_HOP_STAGES * 2 * 8 + HOP_IDS_BYTES;

// mbarriers in shared memory (PTX ISA: mbarrier); phases alternate parity 0, 1, 0, ...
__device__ __forceinline__ void mbar_init(unsigned long long* bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned long long* bar) {
    asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(smem_u32(bar))
                 : "memory");
}
// Returns once the phase of this parity has completed (a fresh barrier's "previous" phase, parity 1, has).
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
    asm volatile(
        "{\n.reg .pred done;\nWAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT;\n}\n" ::"r"(smem_u32(bar)),
        "r"(parity)
        : "memory");
}
// The executing thread arrives on the barrier once its cp.async copies so far have landed (no count added; after
// plain shared stores, at once).
__device__ __forceinline__ void mbar_arrive_cp_async(unsigned long long* bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}

// The TMA unit's copies (sm_90a) read a tensor map (CUtensorMap: 128 opaque bytes) from global memory. A block
// encodes its two maps itself, as cuTensorMapEncodeTiled would on the host: tensormap.replace on 128 zeroed bytes
// of shared memory (every field a 2-D tile map has), then one warp's fenced copy into its SM's slot here. So a
// launch's parameter block stays the catalog's pointers and sizes, and the maps follow the arena wherever it lies.
// One slot an SM (%smid): a block holds more than half an SM's shared memory, so no two blocks share an SM, and the
// TMA copies of a block are all complete before it ends. A slot holds the operands' two maps and each consumer's map of
// the output (mm_hopper's tensor stores).
struct __align__(128) HopMap {
    unsigned long long bytes[16];
};
constexpr int HOP_MAP_SLOTS = 256;  // more than any card's SM ids
__device__ HopMap hop_maps[HOP_MAP_SLOTS][4];

__device__ __forceinline__ unsigned sm_id() {
    unsigned id;
    asm volatile("mov.u32 %0, %%smid;\n" : "=r"(id));
    return id;
}

// The map of fp16 matrix g ([rows][ld], its first `cols` of a row used), copied in boxes of box_cols x box_rows into
// the 128-byte swizzle, zeros past the matrix's edges; encoded in `tmp` (shared) and published to `dst` by the
// calling warp (all 32 lanes).
__device__ __forceinline__ void hop_encode_map(HopMap* dst, HopMap* tmp, const __half* g, int cols, int rows, int ld,
                                               int box_cols, int box_rows) {
    const int lane = threadIdx.x & 31;
    const unsigned t = smem_u32(tmp), one = 1;
    reinterpret_cast<unsigned*>(tmp)[lane] = 0u;
    __syncwarp();
    if (lane == 0)
        asm volatile(
            "tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%0], %1;\n"
            "tensormap.replace.tile.rank.shared::cta.b1024.b32 [%0], %7;\n"  // rank - 1
            "tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%0], 0, %2;\n"
            "tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%0], 1, %3;\n"
            "tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], 0, %4;\n"
            "tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%0], 1, %5;\n"
            "tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%0], 0, %6;\n"  // bytes, rows 1..
            "tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%0], 0, %7;\n"
            "tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%0], 1, %7;\n"
            "tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [%0], 6;\n"      // .f16
            "tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [%0], 3;\n"  // 128 B
            ::"r"(t), "l"(g), "r"(box_cols), "r"(box_rows), "r"(cols), "r"(rows), "l"((unsigned long long)ld * 2),
            "r"(one)
            : "memory");  // interleave none, fill zeros: the zeroed fields
    __syncwarp();
    asm volatile(
        "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned"
        " [%0], [%1], 128;\n" ::"l"(dst),
        "r"(t)
        : "memory");
}
// The issuing thread's view of a map published above (and no stale copy of its slot's previous map).
__device__ __forceinline__ void hop_acquire_map(const HopMap* map) {
    asm volatile(
        "fence.proxy.tensormap::generic.acquire.gpu [%0], 128;\n"
        "cp.async.bulk.commit_group;\n"  // then an empty bulk wait: ptxas otherwise may not order the fence (Triton's
        "cp.async.bulk.wait_group.read 0;\n" ::"l"(map)  // TMA lowering carries the same workaround)
        : "memory");
}
// One box of a map at element coordinates (x: within a row, y: the row) into shared dst; its bytes complete bar.
__device__ __forceinline__ void tma_load(void* dst, const HopMap* map, int x, int y, unsigned long long* bar) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(smem_u32(dst)),
        "l"(map), "r"(x), "r"(y), "r"(smem_u32(bar))
        : "memory");
}
// One box of a map at element coordinates (x, y) from shared src (in the map's swizzle) to global memory, in the
// issuing thread's bulk group; the TMA unit writes only the box's part inside the matrix.
__device__ __forceinline__ void tma_store(const HopMap* map, const void* src, int x, int y) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(map), "r"(x),
                 "r"(y), "r"(smem_u32(src))
                 : "memory");
}
// The executing thread arrives on bar and adds `bytes` to the transfers its phase waits for.
__device__ __forceinline__ void mbar_expect_tx(unsigned long long* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes)
                 : "memory");
}

// Asynchronous bulk copies from shared to global memory (the TMA unit, no tensor map: contiguous bytes, 16-byte
// aligned, a multiple of 16), in bulk groups of the issuing thread.
__device__ __forceinline__ void bulk_store(void* dst, const void* src, unsigned bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(smem_u32(src)),
                 "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
__device__ __forceinline__ void bulk_wait() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
// A named barrier of the 128 threads of consumer c (ids 1, 2; 0 is __syncthreads).
__device__ __forceinline__ void consumer_sync(int c) { asm volatile("bar.sync %0, 128;\n" ::"r"(1 + c) : "memory"); }
// Named barrier 3: the 256 threads of both consumers.
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 3, 256;\n" ::: "memory"); }

// Four 8x8 fp16 matrices into shared memory from the mma accumulator layout: register j of lane l holds matrix j's
// pair (row l / 4, columns 2 (l % 4), +1); lane l gives the address of row l % 8 of matrix l / 8 (16 bytes).
__device__ __forceinline__ void stmatrix_x4(void* row, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(smem_u32(row)), "r"(r0),
                 "r"(r1), "r"(r2), "r"(r3)
                 : "memory");
}

// A consumer's results rounded to fp16: the thread's rows `row` and row + 8 (of its warp's 16), the 8F columns from
// n0 (global). STAGED: into the consumer's staging rows (dst, ld; `row` local, columns from 0) for its bulk copies,
// two fragments' 16 x 16 a stmatrix. Else (an output that takes no 16-byte rows): pairs to out (dst = out, ld = Nn,
// `row` global) through epilogue EPI. The same roundings either way.
template <bool STAGED, int F, int EPI = MM_PLAIN>
__device__ __forceinline__ void hop_store(__half* dst, int ld, const float (&acc)[F][4], int row, int n0, int M, int Nn,
                                          bool pair_ok, __half* aux = nullptr) {
    const int lane = threadIdx.x & 31, q = lane & 3;
    if (STAGED) {  // matrix j of a stmatrix: fragment f + j / 2, its rows 8 (j % 2) ..
        const int mat = lane >> 3;
        __half* p = dst + (row - (lane >> 2) + (mat & 1) * 8 + (lane & 7)) * ld + (mat >> 1) * 8;
#pragma unroll
        for (int f = 0; f < F; f += 2)
            stmatrix_x4(p + f * 8, pack_half2(acc[f][0], acc[f][1]), pack_half2(acc[f][2], acc[f][3]),
                        pack_half2(acc[f + 1][0], acc[f + 1][1]), pack_half2(acc[f + 1][2], acc[f + 1][3]));
        return;
    }
#pragma unroll
    for (int f = 0; f < F; ++f)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const int r = row + e * 8, col = n0 + f * 8 + 2 * q;
            if (r < M)  // (an output of rows that are not 16 bytes: a slow path; aux read where it is used)
                mm_epilogue_pair<EPI>(dst, aux, (size_t)r * ld + col, col, Nn, acc[f][2 * e], acc[f][2 * e + 1], false,
                                      pair_ok,
                                      EPI == MM_GELU_BACKWARD ? mm_aux_pair(aux, (size_t)r * ld + col, col, Nn, pair_ok)
                                                              : __half2{});
        }
}

// MM_PLAIN's output through the TMA unit (mm_hopper's tensor stores): a consumer's rounded results (hop_store's
// roundings) into its staging as four 64 x 64 boxes of the 128-byte swizzle, 8 KiB each: element (r, c) of its
// 64 x 256 at box c / 64, row r, 16-byte chunk (c % 64) / 8 XOR r % 8, which the eight rows of an 8x8 matrix write in
// eight bank groups.
__device__ __forceinline__ void hop_store_boxes(__half* stg, const float (&acc)[32][4], int row) {
    const int lane = threadIdx.x & 31, mat = lane >> 3;
    const int r = row - (lane >> 2) + (mat & 1) * 8 + (lane & 7);  // the row of matrix `mat` this lane addresses
#pragma unroll
    for (int f = 0; f < 32; f += 2) {
        const int chunk = f + (mat >> 1);  // its 8 columns, of the 32 chunks of 256
        __half* p = stg + (chunk >> 3) * 64 * 64 + r * 64 + ((chunk & 7) ^ (r & 7)) * 8;
        stmatrix_x4(p, pack_half2(acc[f][0], acc[f][1]), pack_half2(acc[f][2], acc[f][3]),
                    pack_half2(acc[f + 1][0], acc[f + 1][1]), pack_half2(acc[f + 1][2], acc[f + 1][3]));
    }
}

// The shared memory of a block: STAGES stages of A (128 x 64) and B (256 x 64) tiles, then the consumers' output
// staging rows (the weight gradient: its 1 KiB of fp16 ones there), the two tensor maps being encoded, two tiles' 256
// bias values (fp16 pairs), then the full and empty barriers, then the tile schedule's ring (HOP_IDS_BYTES).
struct HopSmem {
    __half* stages;
    __half* staging;
    HopMap* maps;
    unsigned* bias;
    unsigned long long* full;
    unsigned long long* empty;
};
__device__ __forceinline__ HopSmem hop_smem() {
    extern __shared__ __align__(1024) unsigned char coptc_mm_smem[];
    HopSmem m;
    m.stages = reinterpret_cast<__half*>(coptc_mm_smem);
    m.staging = m.stages + MM_HOP_STAGES * (128 + 256) * MM_HOP_BK;
    m.maps = reinterpret_cast<HopMap*>(m.staging + 2 * 64 * MM_HOP_OUT_LD);
    m.bias = reinterpret_cast<unsigned*>(m.maps + 2);
    m.full = reinterpret_cast<unsigned long long*>(m.bias + 2 * 128);
    m.empty = m.full + MM_HOP_STAGES;
    return m;
}

// A deeper ring than mm_hopper's, for the paths without its two consumers' 64-row stagings and bias values: as many
// stages of 128 x 64 + BN x 64 fp16 as the block's bytes (MM_HOP_SHARED) hold beside STAGING halves of staging, the two
// tensor maps being encoded, the barriers and the tile schedule's ring, laid out in that order. The weight gradient
// (STAGING: its 1 KiB of fp16 ones) takes 4 stages of 128 x 256 tiles' k-tiles or 5 of 128 x 192; the ping-pong (each
// consumer's 128 rows) 4 of 128 x 128 (mm_hopper's layout left either 3). Why: a k-tile waits out its loads' latency,
// which three stages did not cover (the weight gradient's 192-column k-tile took as many cycles as a 256-column one,
// ~1150: H200, 2026-12-04, bench/experiments/weight_gradient_trace.py); and one warpgroup multiplies alone at ~90% of
// the tensor pipe when its operands are already there, at ~50% when they are loaded
// (bench/experiments/matmul_noload.patch).
template <int BN, int STAGING>
constexpr int hop_ring_stages() {
    return (MM_HOP_SHARED - STAGING * 2 - 2 * 128 - HOP_IDS_BYTES) / ((128 + BN) * MM_HOP_BK * 2 + 2 * 8);
}
template <int BN, int STAGING>
__device__ __forceinline__ HopSmem hop_ring_smem() {
    extern __shared__ __align__(1024) unsigned char coptc_mm_smem[];
    constexpr int STAGES = hop_ring_stages<BN, STAGING>();
    HopSmem m;
    m.stages = reinterpret_cast<__half*>(coptc_mm_smem);
    m.staging = m.stages + STAGES * (128 + BN) * MM_HOP_BK;
    m.maps = reinterpret_cast<HopMap*>(m.staging + STAGING);
    m.bias = nullptr;
    m.full = reinterpret_cast<unsigned long long*>(m.maps + 2);
    m.empty = m.full + STAGES;
    return m;
}
constexpr int HOP_ONES = 512;  // halves of the weight gradient's staging: fp16 ones for dbias on the tensor cores

// The producer warpgroup's start: with TMA (vec), warp 0 encodes the operands' maps into this SM's slot and returns
// it to thread 0, the one that issues the copies; the warpgroup's other threads get nullptr and have nothing to do.
// Without TMA every thread stores element-wise, and gets the slot unused.
template <bool AK, bool BK_MAJOR, int BN = 256>
__device__ __forceinline__ const HopMap* hop_producer_maps(const HopSmem& m, const __half* A, const __half* B, int M,
                                                           int Nn, int K, int lda, int ldb, bool vec) {
    HopMap* slot = hop_maps[sm_id() % HOP_MAP_SLOTS];
    if (!vec) return slot;
    if (threadIdx.x >= 32) return nullptr;
    // a K-major operand's box is a whole tile (64 of k by its rows); an MN-major one's a 64 x 64 swizzle column
    hop_encode_map(&slot[0], &m.maps[0], A, AK ? K : M, AK ? M : K, lda, 64, AK ? 128 : 64);
    hop_encode_map(&slot[1], &m.maps[1], B, BK_MAJOR ? K : Nn, BK_MAJOR ? Nn : K, ldb, 64, BK_MAJOR ? BN : 64);
    if (threadIdx.x != 0) return nullptr;
    hop_acquire_map(&slot[0]);
    hop_acquire_map(&slot[1]);
    return slot;
}

// One operand's k-tile (rows r0.., k from k0) by TMA into shared s: a K-major operand's box is the whole R x 64 tile,
// an MN-major one's R / 64 boxes of 64 x 64 (its swizzle columns, mn_atom's layout).
template <int R, bool KMAJOR>
__device__ __forceinline__ void hop_tma_tile(__half* s, const HopMap* map, int r0, int k0, unsigned long long* bar) {
    if (KMAJOR) {
        tma_load(s, map, k0, r0, bar);
        return;
    }
#pragma unroll
    for (int j = 0; j < R / 64; ++j) tma_load(s + j * 64 * MM_HOP_BK, map, r0 + j * 64, k0, bar);
}

// The producer's part of one tile: k-tiles kt0 .. kt0 + KT - 1 of tile (tm, tn) into the ring, from its position g
// (stages of 128 x 64 A and BN x 64 B).
template <bool AK, bool BK_MAJOR, int BN = 256, int STAGES = MM_HOP_STAGES>
__device__ __forceinline__ void hop_produce(const HopSmem& m, const HopMap* maps, const __half* __restrict__ A,
                                            const __half* __restrict__ B, int tm, int tn, int kt0, int KT, int M,
                                            int Nn, int K, int lda, int ldb, bool vec, int& g) {
    constexpr int BM = 128, BK = MM_HOP_BK;
    for (int kt = kt0; kt < kt0 + KT; ++kt, ++g) {
        const int st = g % STAGES;
        mbar_wait(&m.empty[st], ((g / STAGES) & 1) ^ 1);
        __half* sA = m.stages + st * (BM + BN) * BK;
        __half* sB = sA + BM * BK;
        if (vec) {  // past the edges the boxes fill zeros, and count their bytes
            mbar_expect_tx(&m.full[st], (BM + BN) * BK * 2);
            hop_tma_tile<BM, AK>(sA, &maps[0], tm * BM, kt * BK, &m.full[st]);
            hop_tma_tile<BN, BK_MAJOR>(sB, &maps[1], tn * BN, kt * BK, &m.full[st]);
            continue;
        }
        mm_load_elementwise<BM, BK, 128, AK, true>(sA, A, tm * BM, kt * BK, M, K, lda);
        mm_load_elementwise<BN, BK, 128, BK_MAJOR, true>(sB, B, tn * BN, kt * BK, Nn, K, ldb);
        mbar_arrive_cp_async(&m.full[st]);  // once this thread's copies so far have landed
    }
}

// The wgmma descriptor of k16 step kk of an operand's k-tile in shared memory, as mm_tile's (k-tile 64: 128-byte
// swizzle): K-major rows of 64 k, else mn_atom's atoms.
template <bool KMAJOR>
__device__ __forceinline__ unsigned long long hop_desc(const __half* s, int kk) {
    return KMAJOR ? wg_desc(s + kk * 16, 16, MM_HOP_BK * 16, 1) : wg_desc(s + kk * 16 * 64, MM_HOP_BK * 128, 1024, 1);
}

// Consumer c's part of one tile: acc += its 64 rows of A times B over the KT k-tiles from ring position g, and,
// when BIAS_SUM, bias_acc += A times a 16x8 tile of ones (the rows' sums, dbias, on the tensor cores). A template
// argument, not a flag: a wgmma under a branch had ptxas fence the products around it (C7519) in every block.
// B is BN = 256 or 192 columns (the weight gradient's narrow tile, hop_split_columns).
template <bool AK, bool BK_MAJOR, bool BIAS_SUM, int BN = 256, int STAGES = MM_HOP_STAGES>
__device__ __forceinline__ void hop_consume(const HopSmem& m, int c, int KT, float (&acc)[BN / 8][4],
                                            float (&bias_acc)[1][4], int& g) {
    static_assert(BN == 256 || BN == 192, "the consumers' products are m64n256k16 or m64n192k16");
    constexpr int BM = 128, BK = MM_HOP_BK;
    const int lane = threadIdx.x & 31;
    int kt = 0;
    // a do-while (KT > 0): a loop that could run zero times serializes wgmma across its back-edge (C7515)
    do {
        const int st = g % STAGES;
        mbar_wait(&m.full[st], (g / STAGES) & 1);
        fence_proxy_async();  // the producer's landed copies, ordered before the tensor cores' reads
        const __half* sA = m.stages + st * (BM + BN) * BK + c * 64 * BK;  // this consumer's 64 rows
        const __half* sB = m.stages + st * (BM + BN) * BK + BM * BK;
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
            const unsigned long long a = hop_desc<AK>(sA, kk), b = hop_desc<BK_MAJOR>(sB, kk);
            if constexpr (BN == 256)
                wgmma_m64n256k16<AK ? 0 : 1, BK_MAJOR ? 0 : 1>(acc, a, b);
            else
                wgmma_m64n192k16<AK ? 0 : 1, BK_MAJOR ? 0 : 1>(acc, a, b);
            // every element of the ones tile is 1, so its layout is immaterial: no swizzle, 8-row cores
            if (BIAS_SUM) wgmma_m64n8k16<AK ? 0 : 1, 0>(bias_acc, a, wg_desc(m.staging, 128, 256, 0));
        }
        wg_commit();
        wg_wait<1>();  // the previous k-tile's products are done: its stage goes back to the producer
        wg_fence_acc(acc);
        wg_fence_acc(bias_acc);
        if (kt > 0 && lane == 0) mbar_arrive(&m.empty[(g - 1) % STAGES]);
        ++g;
        ++kt;
    } while (kt < KT);
    wg_wait<0>();
    wg_fence_acc(acc);
    wg_fence_acc(bias_acc);
    if (lane == 0) mbar_arrive(&m.empty[(g - 1) % STAGES]);
}

__device__ __forceinline__ void hop_init_barriers(const HopSmem& m, bool vec, unsigned readers = 8,
                                                  int stages = MM_HOP_STAGES) {
    if (threadIdx.x == 0) {
        for (int s = 0; s < stages; ++s) {
            // TMA: the issuing thread (and the bytes it expects); cp.async: every producer thread, once its copies
            // of the stage have landed
            mbar_init(&m.full[s], vec ? 1 : 128);
            mbar_init(&m.empty[s], readers);  // the consumer warps that read it (8; ping-pong's 4), once done
        }
    }
}

// Named barriers between consumer c and the finishers (hop_finish_store, hop_finish_gelu_backward): ids 4 + c (its
// tile is staged) and 6 + c (the finishers are done reading it), each of the consumer's 128 threads and the 96
// finishers.
constexpr int HOP_FINISHERS = 96;
__device__ __forceinline__ void named_sync(int id) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(128 + HOP_FINISHERS) : "memory");
}
__device__ __forceinline__ void named_arrive(int id) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(128 + HOP_FINISHERS) : "memory");
}

// A 16-byte chunk of 8 products times gelu's 8 slopes (matmul_backward_input_gelu's epilogue), in place.
__device__ __forceinline__ void hop_gelu_backward_chunk(uint4& v, const uint4& slope) {
    __half2* w = reinterpret_cast<__half2*>(&v);
    const __half2* x = reinterpret_cast<const __half2*>(&slope);
#pragma unroll
    for (int j = 0; j < 4; ++j) w[j] = cpl::gelu_backward_pair(w[j], x[j]);
}

// A 16-byte chunk of 8 products to gelu's 8 slopes (in place) and 8 values (matmul_forward_gelu's epilogue).
__device__ __forceinline__ void hop_gelu_forward_chunk(uint4& v, uint4& value) {
    unsigned* w = reinterpret_cast<unsigned*>(&v);
    unsigned* y = reinterpret_cast<unsigned*>(&value);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&w[j]));
        const cpl::GeluValueSlope g0 = cpl::gelu_value_slope(a.x), g1 = cpl::gelu_value_slope(a.y);
        w[j] = pack_half2(g0.slope, g1.slope);
        y[j] = pack_half2(g0.value, g1.value);
    }
}

// MM_STATS: each row's (max, sum of exp) over its 256 columns below V, a row's statistics split between the consumers
// and the finishers so that neither holds the products back. The consumers take every row's maximum from their
// fragments (fp16 pairs, cheap) and the whole statistics of their rows row (e = 0); the finishers, after storing the
// staged rows, the sums of the rows row + 8 (e = 1) against the maxima the consumers left in shared memory. The sums
// are exp2(x log2 e - m log2 e) on the MUFU, the statistics' real cost: a value each, 16 an SM a cycle. Measured at
// gpt2's lm head (H200, 2026-12-03, bench/experiments/lm_head_stats_ab.py; matmul_forward 3.9-4.1 ms, in the training
// step 3.75): this split 4.53-4.62 (in the step 4.20, the loss from the statistics 1.66 against 2.30: 0.20 ms a step
// saved); every row in the consumers 4.72-4.92 (step 4.27-4.33: their MUFU time adds to the products'); every row in
// the finishers, a thread a row, 5.07-5.18 with the maximum first and four running sums (7.7-8.0 online, 13.3 a warp
// a row by a butterfly: the finishers' barriers held the consumers); the consumers' maxima and a warp a row of the
// finishers' stores summing as they go, 8.0.
// The values are the fp16 roundings the staging holds (pack_half2, as hop_store). Thread (warp, quad lane q) of a
// consumer holds rows row and row + 8 of its 64, columns f * 8 + 2q, + 1 of fragment f; a row's four quad lanes
// merge by shuffles. CUT: the tile holds V's last column (the rest of its columns are not the row's).
__device__ __forceinline__ __half2 hop_value_pair(const float (&acc)[32][4], int f, int e) {
    const unsigned p = pack_half2(acc[f][2 * e], acc[f][2 * e + 1]);
    return *reinterpret_cast<const __half2*>(&p);
}

// m[e] <- the maximum of row row + 8e over the row's four quad lanes (every lane of the quad gets it)
template <bool CUT>
__device__ __forceinline__ void hop_fragment_max(const float (&acc)[32][4], int q, int cols, float (&m)[2]) {
    const __half lowest = __float2half_rn(cpl::neg_inf());
    // one chain a row (two a row spilled 16 bytes at the launch's 168-register cap)
    __half2 top[2] = {__halves2half2(lowest, lowest), __halves2half2(lowest, lowest)};
#pragma unroll
    for (int f = 0; f < 32; ++f)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            __half2 h = hop_value_pair(acc, f, e);
            if (CUT) {
                const int col = f * 8 + 2 * q;
                h = __halves2half2(col < cols ? __low2half(h) : lowest, col + 1 < cols ? __high2half(h) : lowest);
            }
            top[e] = __hmax2(top[e], h);
        }
#pragma unroll
    for (int e = 0; e < 2; ++e) {
        m[e] = fmaxf(__low2float(top[e]), __high2float(top[e]));
        m[e] = fmaxf(m[e], __shfl_xor_sync(cpl::FULL, m[e], 1));
        m[e] = fmaxf(m[e], __shfl_xor_sync(cpl::FULL, m[e], 2));
    }
}

// exp(x - m) = 2^(x log2 e + shift); a row with no columns (m = -inf) sums to 0, not NaN.
__device__ __forceinline__ float hop_exp2_shift(float m) { return m == cpl::neg_inf() ? 0.f : -m * cpl::LOG2E; }

// The sum of exp(x - m) over the thread's values of row row (e = 0), CUT as hop_fragment_max's.
template <bool CUT>
__device__ __forceinline__ float hop_fragment_row0_sum(const float (&acc)[32][4], int q, int cols, float m) {
    const float shift = hop_exp2_shift(m);
    float sum[2] = {0.f, 0.f};
#pragma unroll
    for (int f = 0; f < 32; ++f) {
        const float2 x = __half22float2(hop_value_pair(acc, f, 0));
        float a = exp2_approx(fmaf(x.x, cpl::LOG2E, shift)), b = exp2_approx(fmaf(x.y, cpl::LOG2E, shift));
        if (CUT) {
            const int col = f * 8 + 2 * q;
            a = col < cols ? a : 0.f;
            b = col + 1 < cols ? b : 0.f;
        }
        sum[f & 1] += a + b;
    }
    return sum[0] + sum[1];
}

// The consumer's part: rows row's statistics to st.stats, rows row + 8's maxima to rowmax[warp * 8 + lane / 4].
__device__ __forceinline__ void hop_consumer_stats(const MmStats& st, const float (&acc)[32][4], float* rowmax, int row,
                                                    int m0, int n0, int M, int Nn) {
    const int q = threadIdx.x & 3, cols = st.V - n0;
    float m[2], s;
    if (cols >= 256) {
        hop_fragment_max<false>(acc, q, cols, m);
        s = hop_fragment_row0_sum<false>(acc, q, cols, m[0]);
    } else {
        hop_fragment_max<true>(acc, q, cols, m);
        s = hop_fragment_row0_sum<true>(acc, q, cols, m[0]);
    }
    s += __shfl_xor_sync(cpl::FULL, s, 1);
    s += __shfl_xor_sync(cpl::FULL, s, 2);
    if (q == 0) {
        if (m0 + row < M) st.put(m0 + row, n0, Nn, m[0], s);
        rowmax[(row >> 4) * 8 + (row & 7)] = m[1];
    }
}

// The finishers' part: the 32 rows j of the consumer's e = 1 (staged row (j / 8) * 16 + 8 + j % 8), finisher warp w
// summing exp(x - rowmax[j]) over chunks [11w, 11w + 11) of row j in lane j; the three partial sums (partial: 3 x
// 32 floats) added in warp order after a barrier of the 96 (named barrier 8).
__device__ __forceinline__ void hop_finish_sums(const MmStats& st, const float* rowmax, float* partial,
                                                const __half* stg, int m0, int n0, int M, int Nn, int t) {
    const int w = t >> 5, j = t & 31, r = (j >> 3) * 16 + 8 + (j & 7);
    const int cols = st.V - n0, end = min(cols, min(256, Nn - n0));
    const float m = rowmax[j], shift = hop_exp2_shift(m);
    float sum[2] = {0.f, 0.f};
    const int ch1 = min(32, 11 * w + 11);
#pragma unroll 4
    for (int ch = 11 * w; ch < ch1; ++ch) {
        if (ch * 8 >= end) break;
        const cpl::Pack x = cpl::unpack(*reinterpret_cast<const uint4*>(stg + r * MM_HOP_OUT_LD + ch * 8));
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            const float e = exp2_approx(fmaf(x.v[k], cpl::LOG2E, shift));
            sum[k & 1] += ch * 8 + k < end ? e : 0.f;
        }
    }
    partial[t] = sum[0] + sum[1];
    asm volatile("bar.sync 8, %0;\n" ::"n"(HOP_FINISHERS) : "memory");
    if (w == 0 && m0 + r < M) st.put(m0 + r, n0, Nn, m, (partial[j] + partial[32 + j]) + partial[64 + j]);
}

// The finishers store a consumer's staged tile (its rounded products, rows from m0, columns from n0): the producer
// warpgroup's warps 1-3, which TMA leaves idle, while the consumers multiply their next tile: with GELU their gelu's
// slopes to out and values to aux (the statistics' rows to out), 16 bytes a lane, a warp a row a step, a batch of
// steps' shared loads before their stores. (A plain output leaves by TMA tensor stores, mm_hopper.)
// Why not the TMA unit's bulk copies (64 a consumer's tile, a row each): queued beside the next k-tiles' loads they
// cost the products 14% at gpt2's fc (0.264 ms against 0.226 with no stores; the finishers' stores of both outputs
// 0.271, H200, 2026-12-02).
// Rows row0 .. row0 + rows - 1 of the staged 64 (by default all; ROWS > 0: the last ROWS, a count ptxas knows), by
// THREADS threads of which this is thread t. EPI: MM_PLAIN (the rows to out), MM_GELU (their gelu's slopes to out,
// values to aux), MM_GELU_BACKWARD (the rows times aux's slopes to out). The gelus take two chunks a batch: four
// spilled in the consumers.
template <int EPI, int THREADS = HOP_FINISHERS, int ROWS = 0>
__device__ __forceinline__ void hop_finish_store(const __half* stg, __half* out, __half* aux, int m0, int n0, int M,
                                                 int Nn, int t, int row0 = ROWS ? 64 - ROWS : 0,
                                                 int rows = ROWS ? ROWS : 64) {
    constexpr int BATCH = EPI == MM_PLAIN || EPI == MM_STATS ? 4 : 2;
    const int CHUNKS = rows * 32;  // 16-byte chunks of the rows
    const int chunks_in_row = min(256, Nn - n0) / 8;
    for (int i0 = t; i0 < CHUNKS; i0 += BATCH * THREADS) {
        uint4 v[BATCH], x[BATCH];
        size_t at[BATCH];
        bool ok[BATCH];
#pragma unroll
        for (int b = 0; b < BATCH; ++b) {
            const int i = i0 + b * THREADS, r = row0 + (i >> 5), ch = i & 31;
            ok[b] = i < CHUNKS && m0 + r < M && ch < chunks_in_row;
            at[b] = (size_t)(m0 + r) * Nn + n0 + ch * 8;
            if (!ok[b]) continue;
            v[b] = *reinterpret_cast<const uint4*>(stg + r * MM_HOP_OUT_LD + ch * 8);
            if (EPI == MM_GELU_BACKWARD) x[b] = *reinterpret_cast<const uint4*>(aux + at[b]);
        }
#pragma unroll
        for (int b = 0; b < BATCH; ++b) {
            if (!ok[b]) continue;
            if (EPI == MM_GELU_BACKWARD) hop_gelu_backward_chunk(v[b], x[b]);
            if (EPI == MM_GELU) {
                hop_gelu_forward_chunk(v[b], x[b]);
                *reinterpret_cast<uint4*>(aux + at[b]) = x[b];
            }
            *reinterpret_cast<uint4*>(out + at[b]) = v[b];
        }
    }
}

// MM_GELU's three finisher warps take longer than a tile's products (ncu at gpt2's fc: their issue slots 25% busy,
// fixed-latency waits; without the gelu the launch takes 0.271 ms, with it 0.303), so each consumer finishes the
// last rows of its own 64 itself after staging them, costing its eight warps less than the wait on the finishers.
// How many: the shorter the products (K), the more. With the gelu's value alone, at gpt2's fc (K = 768; 8, 12, 16, 20
// rows: 0.293, 0.292, 0.294, 0.302 ms against 0.303 with none) and small's (K = 384: 0.062, 0.061, 0.058, 0.057
// against 0.066), H200, 2026-12-02. With its slope too (gelu.cuh), rows at short K / long K: 12 / 4: small 0.064,
// gpt2 0.309; 20 / 12: 0.061, 0.308-0.312; 28 / 20: 0.059, 0.308-0.309 (H200, 2026-12-03,
// bench/experiments/gelu_epilogues.py). (Rows a compile-time count: with a count known at run time ptxas spilled.)
constexpr int HOP_GELU_SHORT_K = 512, HOP_GELU_ROWS_SHORT_K = 28, HOP_GELU_ROWS = 20;
__device__ __forceinline__ int hop_consumer_gelu_rows(int K) {
    return K <= HOP_GELU_SHORT_K ? HOP_GELU_ROWS_SHORT_K : HOP_GELU_ROWS;
}

// MM_GELU_BACKWARD finishes a staged tile as hop_finish_store does, the rows times the slopes' rows to out, the
// slopes read HOP_FINISH_AHEAD chunks ahead, the first before the finishers wait for the staging (hop_finish_slope):
// read a batch at a time after it, their latency left the consumers waiting (H200, 2026-12-02: 0.45 against 0.40 ms
// for the unfused pair at gpt2's fc projection, when the epilogue still computed the slope; all of a finisher's 22
// chunks ahead spilled, 16 ahead took 0.44).
// The consumers finish the last CROWS rows of their 64 themselves (hop_finish_store, as matmul_forward_gelu's), the
// finishers the rows before them: with the slope stored by the forward, a multiply a pair, only at short K. Rows
// at short K / long K, ms at small's fc projection (K = 384) and gpt2's (K = 768): 0 / 0: 0.056, 0.278; 16 / 8:
// 0.051-0.052, 0.290-0.298; 16 / 0: 0.051, 0.265-0.270; 24 / 4: 0.056, 0.270-0.296; 32 / 20: 0.059-0.060,
// 0.313-0.326; the unfused pair 0.080, 0.38-0.40; computing the slope here (before): 0.070, 0.35-0.37 (H200,
// 2026-12-03, bench/experiments/gelu_epilogues.py).
constexpr int HOP_GELU_BACKWARD_ROWS_SHORT_K = 16, HOP_GELU_BACKWARD_ROWS = 0;
constexpr int HOP_FINISH_AHEAD = 12;

// Consumer c finishes the last ROWS rows of its staged tile itself (none for MM_PLAIN or ROWS = 0).
template <int EPI, int ROWS>
__device__ __forceinline__ void hop_consumer_finish(const __half* stg, __half* out, __half* aux, int c, int m0, int n0,
                                                    int M, int Nn) {
    if constexpr ((EPI == MM_GELU || EPI == MM_GELU_BACKWARD) && ROWS > 0) {
        consumer_sync(c);  // the consumer's rows are whole
        hop_finish_store<EPI, 128, ROWS>(stg, out, aux, m0, n0, M, Nn, threadIdx.x & 127);
    }
}
template <int CROWS>
constexpr int hop_finish_per() {  // a finisher's 16-byte chunks of its (64 - CROWS) x 256 rows
    return ((64 - CROWS) * 32 + HOP_FINISHERS - 1) / HOP_FINISHERS;
}

// Chunk k of this finisher: its element offset in [M][Nn], or -1 outside the matrix.
template <int CROWS>
__device__ __forceinline__ long long hop_finish_at(int k, int m0, int n0, int M, int Nn) {
    const int i = (int)threadIdx.x - 32 + k * HOP_FINISHERS, r = i >> 5, ch = i & 31;
    const bool ok = k < hop_finish_per<CROWS>() && r < 64 - CROWS && m0 + r < M && ch < min(256, Nn - n0) / 8;
    return ok ? (long long)(m0 + r) * Nn + n0 + ch * 8 : -1;
}

// slope's chunk k of this finisher (zeros outside the matrix).
template <int CROWS>
__device__ __forceinline__ uint4 hop_finish_slope(const __half* slope, int k, int m0, int n0, int M, int Nn) {
    const long long at = hop_finish_at<CROWS>(k, m0, n0, M, Nn);
    return at >= 0 ? *reinterpret_cast<const uint4*>(slope + at) : make_uint4(0u, 0u, 0u, 0u);
}

// Consumer c's staged tile times the gelu's slopes: their first chunks read before the wait for the staging.
template <int CROWS>
__device__ __forceinline__ void hop_finish_gelu_backward(const __half* stg, __half* out, const __half* slope, int c,
                                                         int m0, int n0, int M, int Nn) {
    constexpr int BATCH = 4, PER = hop_finish_per<CROWS>();  // BATCH: shared loads before their stores
    uint4 x[HOP_FINISH_AHEAD];
#pragma unroll
    for (int k = 0; k < HOP_FINISH_AHEAD; ++k) x[k] = hop_finish_slope<CROWS>(slope, k, m0, n0, M, Nn);
    named_sync(4 + c);
#pragma unroll
    for (int k0 = 0; k0 < PER; k0 += BATCH) {
        uint4 v[BATCH];
        long long at[BATCH];
#pragma unroll
        for (int b = 0; b < BATCH; ++b) {
            const int i = (int)threadIdx.x - 32 + (k0 + b) * HOP_FINISHERS;
            at[b] = hop_finish_at<CROWS>(k0 + b, m0, n0, M, Nn);
            if (at[b] >= 0) v[b] = *reinterpret_cast<const uint4*>(stg + (i >> 5) * MM_HOP_OUT_LD + (i & 31) * 8);
        }
#pragma unroll
        for (int b = 0; b < BATCH; ++b) {
            const int k = k0 + b;
            if (at[b] >= 0) {
                hop_gelu_backward_chunk(v[b], x[k % HOP_FINISH_AHEAD]);
                *reinterpret_cast<uint4*>(out + at[b]) = v[b];
            }
            if (k + HOP_FINISH_AHEAD < PER)
                x[k % HOP_FINISH_AHEAD] = hop_finish_slope<CROWS>(slope, k + HOP_FINISH_AHEAD, m0, n0, M, Nn);
        }
    }
}

// Ping-pong (MM_PLAIN with TMA loads and 16-byte output rows, where hop_pingpong_pays): each consumer warpgroup a
// whole 128x128 tile (two m64n128k16 a k16; or 128x192, hop_pingpong_columns), the block's tiles taken by the
// consumers in turn (slot s by consumer s % 2), the producer filling one ring of 32 KiB stages (40 KiB) with them in
// slot order. A consumer's products start once the other's last k-tile is waited on (named barrier 9 + c: so that no
// consumer waits on a stage's phase more than one ahead of the ring), so that one's epilogue (staging, bulk copies,
// the next tile's bias) runs under the other's products. The same sums in the same order as mm_hopper's (bias
// first, then the k-tiles in order): the same bits.
// Why only where 128x256 tiles would leave a tenth or more of their columns empty (small's Nn = 384: its attn proj
// 0.0148 ms against 0.0187; its qkv, Nn = 1152, ~39 -> ~36 us a launch in the step and the step 3.660 -> 3.615 ms
// with the encoder change beside it, H100, 2026-12-06, bench/results/step_tail_ab-2026-12-06-h100.txt and
// encoder_vec_ab-2026-12-06-h100.txt; a fifth before): elsewhere the 128x128 tiles' 33% more L2-to-shared bytes a
// FLOP cost more than the idle tensor pipe they win back (gpt2's qkv 0.217 against 0.189, its lm head 5.26 against
// 3.89; H200, 2026-12-02, bench/experiments/matmul_forward_ab.py), at any K (small's fc proj forward, K = 1536:
// 0.0464 against 0.0469-0.0490; its qkv input gradient, K = 1152: the same, 0.037; H200, 2026-12-03).
// Measured and dropped (H200, 2026-12-05; bench/experiments/matmul_pingpong_{multicast,gelu}.patch, their runs
// in bench/results/matmul_pingpong_*-2026-12-05.txt): clusters of 2 walking pairs of row tiles, each block
// multicasting half of B's k-tile into both (24 KiB a k-tile from L2 instead of 32), the same bits but 6-8% slower
// at small's Nn 384 (attn proj 0.0151 -> 0.0161 ms, fc proj 0.0382 -> 0.0404): L2-to-shared bytes are not what holds
// the ping-pong; and the gelu epilogues here at K 384 (each consumer finishing its own tile): small's fc forward
// 0.0583 -> 0.0603, fc proj input gradient 0.0507 -> 0.0554.
__device__ __forceinline__ bool hop_pingpong_pays(int Nn) { return 10 * ((Nn + 255) / 256 * 256 - Nn) >= Nn; }
// A consumer's tile is 128 x 192 where 192-column tiles leave no more columns empty than 128-column ones (small's
// Nn = 384 and 1152) and either K is long or each consumer gets two tiles or more; else 128 x 128. Why: at the full
// grid a tile's k-tiles take as long as the card takes to deliver their stage bytes into the SMs (~6.7-7.6 TB/s over
// the H100's 132: bench/experiments/l2_bandwidth.py, and ncu_grid_card.sh, where cuBLAS's 192 x 128 tiles and our
// 128 x 128 ones both moved ~6.7 TB/s and cuBLAS took 15% fewer cycles for 17% fewer bytes), and a 128 x 192 tile
// takes 17% fewer bytes a FLOP than a 128 x 128 one: small's fc proj forward 41.0 -> 38.3 us, its qkv input gradient
// 33.7 -> 31.0, its fc input gradient 41.9 -> 37.0, its qkv forward 36.3 -> 35.3, its step 3.62 -> 3.58 ms (H100;
// the H200 alike: bench/results/matmul_pingpong192-2026-12-06-{h100,h200}.txt). But at K = 384 with ~2 tiles a
// block (its attn proj: 15.3 -> 16.1) no consumer's epilogue runs under the other's products. The 192 accumulators
// a thread need setmaxnreg: the consumers get 232 registers, the producer 40.
__device__ __forceinline__ int hop_pingpong_columns(int M, int Nn, int K) {
    if ((Nn + 191) / 192 * 192 > (Nn + 127) / 128 * 128) return 128;
    const int tiles = (M + 127) / 128 * ((Nn + 191) / 192);
    return K >= 1024 || tiles >= 4 * (int)gridDim.x ? 192 : 128;
}
constexpr int HOP_PP_LD = 136;  // halves a row of a consumer's 128x128 staging (+16 bytes, as MM_HOP_OUT_LD)
constexpr int HOP_PP_STAGING = 2 * 128 * HOP_PP_LD;  // halves of both consumers' stagings (hop_ring_smem)
// 128 x 192 tiles stage their results 64 rows at a time (a consumer's 64 x 200 halves), so that four stages fit
constexpr int HOP_PP192_LD = 200, HOP_PP192_STAGING = 2 * 64 * HOP_PP192_LD;
constexpr int HOP_PP192_PRODUCER_REGS = 40, HOP_PP192_CONSUMER_REGS = 232;  // 2 x 128 x 232 + 128 x 40 <= 65536
__device__ __forceinline__ void turn_sync(int c) { asm volatile("bar.sync %0, 256;\n" ::"r"(9 + c) : "memory"); }
__device__ __forceinline__ void turn_arrive(int c) { asm volatile("bar.arrive %0, 256;\n" ::"r"(9 + c) : "memory"); }

// The persistent tiles' schedule. A block's producer publishes each slot's tile (-1 past its last) in a ring of
// HOP_ID_RING ids in shared memory, each with a barrier the slot's readers wait on; it publishes slot s + 1 before it
// loads slot s, so that a reader may look one slot ahead (the next tile's bias, whether there is one), and two -1s
// after the last tile (one for each of the ping-pong's consumers). The ring needs no `empty` side: the producer is
// never more than its stages' worth of slots ahead of any reader. The tiles are blockIdx.x, + gridDim.x, ... or, with
// a counter (the input gradients', plan plane tile_counter), taken one at a time from it: the weight gradient the
// cuda device runs beside an input gradient holds some SMs for a while, and the input gradient's blocks that start
// late on them then take fewer tiles instead of a fixed share, so the two end together (small's step 3.955 -> 3.890
// ms with the weight gradients' splits as they were, H100, 2026-12-05, bench/results/tile_counter_ab-2026-12-05-h100
// .txt). Every block fetches until it gets a value past the tiles, so tiles + grid - 1 is the launch's last fetch,
// and that block puts the counter back to 0 for the next launch (which fetches only after its wait for this one;
// the counter's writes order the launches that share it, formats/kernels.py). A tile's sums do not depend on the
// block that makes them: the same bits in any order.
struct HopSchedule {
    int* ids;
    unsigned long long* full;
    unsigned* counter;  // null: the static walk
    int tiles;
    __device__ __forceinline__ void publish(int slot, int tile) const {
        ids[slot % HOP_ID_RING] = tile;
        mbar_arrive(&full[slot % HOP_ID_RING]);  // (a release: the id before the arrive)
    }
    __device__ __forceinline__ int wait(int slot) const {
        mbar_wait(&full[slot % HOP_ID_RING], (slot / HOP_ID_RING) & 1);
        return ids[slot % HOP_ID_RING];
    }
    __device__ __forceinline__ int next(int slot) const {
        if (counter == nullptr) {
            const int t = (int)blockIdx.x + slot * (int)gridDim.x;
            return t < tiles ? t : -1;
        }
        const unsigned t = atomicAdd(counter, 1u);
        if (t < (unsigned)tiles) return (int)t;
        if (t == (unsigned)tiles + gridDim.x - 1) atomicExch(counter, 0u);  // the launch's last fetch
        return -1;
    }
};
// The schedule's ring at `at` (HOP_IDS_BYTES of shared memory, 8-byte aligned), its barriers initialized by thread 0
// (before the block's __syncthreads).
__device__ __forceinline__ HopSchedule hop_schedule(void* at, unsigned* counter, int tiles) {
    HopSchedule sc{reinterpret_cast<int*>(at), reinterpret_cast<unsigned long long*>(at) + HOP_ID_RING / 2, counter,
                   tiles};
    if (threadIdx.x == 0)
        for (int i = 0; i < HOP_ID_RING; ++i) mbar_init(&sc.full[i], 1);
    return sc;
}
// The producer's walk: load(tile) for each of the block's slots in order, by every thread that calls it (with TMA
// one, element-wise the warpgroup); `leader` publishes.
template <class Load>
__device__ __forceinline__ void hop_walk(const HopSchedule& sc, bool leader, Load load) {
    int cur = -1;  // (the leader's) slot s's tile
    if (leader) sc.publish(0, cur = sc.next(0));
    for (int s = 0;; ++s) {
        if (leader) {
            const int n = cur < 0 ? -1 : sc.next(s + 1);
            sc.publish(s + 1, n);
            cur = n;
        }
        const int t = sc.wait(s);
        if (t < 0) return;
        load(t);
    }
}

template <bool AK, bool BK_MAJOR, int BN>
__device__ __forceinline__ void mm_hopper_pingpong(__half* __restrict__ out, const __half* __restrict__ A,
                                                   const __half* __restrict__ B, const __half* __restrict__ bias,
                                                   int M, int Nn, int K, int lda, int ldb, unsigned* counter) {
    static_assert(BN == 128 || BN == 192, "the ping-pong's tiles are 128 x 128 or 128 x 192");
    constexpr bool WIDE = BN == 192;
    constexpr int BM = 128, BK = MM_HOP_BK, F = BN / 8;
    constexpr int LD = WIDE ? HOP_PP192_LD : HOP_PP_LD, STAGING = WIDE ? HOP_PP192_STAGING : HOP_PP_STAGING;
    constexpr int STAGED_ROWS = WIDE ? 64 : BM;  // a consumer's rows staged at a time
    constexpr int STAGES = hop_ring_stages<BN, STAGING>();
    const HopSmem m = hop_ring_smem<BN, STAGING>();
    const int tilesM = (M + BM - 1) / BM, tilesN = (Nn + BN - 1) / BN, tiles = tilesM * tilesN;
    const int KT = (K + BK - 1) / BK;
    const int tid = threadIdx.x, wg = tid >> 7;
    hop_init_barriers(m, true, 4, STAGES);
    const HopSchedule sc = hop_schedule(m.empty + STAGES, counter, tiles);
    __syncthreads();
    if (KT == 0) return;

    if (wg == 0) {
        if constexpr (WIDE) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(HOP_PP192_PRODUCER_REGS));
        const HopMap* maps = hop_producer_maps<AK, BK_MAJOR, BN>(m, A, B, M, Nn, K, lda, ldb, true);
        if (maps == nullptr) return;
        cpl::grid_dependency();
        int g = 0;
        hop_walk(sc, true, [&](int t) {
            int tm, tn;
            mm_tile_of(t, tilesM, tilesN, tm, tn);
            hop_produce<AK, BK_MAJOR, BN, STAGES>(m, maps, A, B, tm, tn, 0, KT, M, Nn, K, lda, ldb, true, g);
        });
        return;
    }

    if constexpr (WIDE) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(HOP_PP192_CONSUMER_REGS));
    const int c = wg - 1, warp = (tid >> 5) & 3, lane = tid & 31, ctid = tid & 127;
    __half* stg = m.staging + c * STAGED_ROWS * LD;
    cpl::grid_dependency();
    for (int s = c;; s += 2) {
        const int t = sc.wait(s);
        if (t < 0) {  // the slots' tiles are a prefix: the other consumer's turn_arrive is for the first past them
            if (s > 0 && sc.wait(s - 1) >= 0) turn_sync(c);
            break;
        }
        int tm, tn;
        mm_tile_of(t, tilesM, tilesN, tm, tn);
        const int m0 = tm * BM, n0 = tn * BN;
        float acc[2][F][4];
#pragma unroll
        for (int f = 0; f < F; ++f) {
            const int col = n0 + f * 8 + 2 * (lane & 3);
            const float b0 = bias != nullptr && col < Nn ? __half2float(bias[col]) : 0.f;
            const float b1 = bias != nullptr && col + 1 < Nn ? __half2float(bias[col + 1]) : 0.f;
#pragma unroll
            for (int h = 0; h < 2; ++h) acc[h][f][0] = acc[h][f][2] = b0, acc[h][f][1] = acc[h][f][3] = b1;
        }
        if (s > 0) turn_sync(c);  // the other consumer has waited on its tile's last stage
        int g = s * KT, kt = 0;
        do {  // a do-while (KT > 0): see hop_consume
            const int st = g % STAGES;
            mbar_wait(&m.full[st], (g / STAGES) & 1);
            if (kt == KT - 1) turn_arrive(1 - c);  // (a slot past the tiles turn_syncs too)
            fence_proxy_async();
            const __half* sA = m.stages + st * (BM + BN) * BK;
            const __half* sB = sA + BM * BK;
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < BK / 16; ++kk) {
                const unsigned long long b = hop_desc<BK_MAJOR>(sB, kk);
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const unsigned long long a = hop_desc<AK>(sA + h * 64 * BK, kk);
                    if constexpr (WIDE)
                        wgmma_m64n192k16<AK ? 0 : 1, BK_MAJOR ? 0 : 1>(acc[h], a, b);
                    else
                        wgmma_m64n128k16<AK ? 0 : 1, BK_MAJOR ? 0 : 1>(acc[h], a, b);
                }
            }
            wg_commit();
            wg_wait<1>();  // the previous k-tile's products are done: its stage goes back to the producer
            wg_fence_acc(acc[0]);
            wg_fence_acc(acc[1]);
            if (kt > 0 && lane == 0) mbar_arrive(&m.empty[(g - 1) % STAGES]);
            ++g;
            ++kt;
        } while (kt < KT);
        wg_wait<0>();
        wg_fence_acc(acc[0]);
        wg_fence_acc(acc[1]);
        if (lane == 0) mbar_arrive(&m.empty[(g - 1) % STAGES]);

        const int row = warp * 16 + (lane >> 2);
        const unsigned row_bytes = (unsigned)min(BN, Nn - n0) * 2;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            if ((h == 0 && s >= 2) || (WIDE && h == 1)) {  // the copies before have read these staging rows
                bulk_wait_read();
                consumer_sync(c);
            }
            if constexpr (WIDE) {
                hop_store<true>(stg, LD, acc[h], row, n0, M, Nn, true);
            } else {
                hop_store<true>(stg + h * 64 * LD, LD, acc[h], row, n0, M, Nn, true);
                if (h == 0) continue;  // both halves staged, then copied together
            }
            fence_proxy_async();  // the staging writes, ordered before the bulk copies' reads
            consumer_sync(c);
            const int r = m0 + (WIDE ? h * 64 : 0) + ctid;
            if (ctid < STAGED_ROWS && r < M)  // a row each
                bulk_store(out + (size_t)r * Nn + n0, stg + ctid * LD, row_bytes);
            bulk_commit();
        }
    }
    bulk_wait();  // every copy written before the block ends
}

// A consumer thread's fragment row in its 64 (warp * 16 + lane / 4), from %tid.x read again where the epilogue uses
// it: ptxas kept the one computed before the products across them and spilled it (matmul_forward, 4 bytes, once the
// 128 x 192 ping-pong's setmaxnreg sat beside this path).
__device__ __forceinline__ int hop_fragment_row() {
    unsigned tid;
    asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(tid));
    return ((tid >> 5) & 3) * 16 + ((tid & 31) >> 2);
}

// out[M,Nn] = A B (+ bias[n]) through epilogue EPI with aux; operand layouts as mm_tile's (AK: A stored [M][K],
// BK_MAJOR: B stored [Nn][K]). The gelu epilogues (an exp and a reciprocal a value: in the consumers MM_GELU's cost
// about as much as the products at K = 768, docs/notes/gpu-speed.md, seventh session) are finished, and every
// staged tile stored, by the finisher warps under the next tile's products.
template <bool AK, bool BK_MAJOR, int EPI>
__device__ __forceinline__ void mm_hopper(__half* __restrict__ out, __half* __restrict__ aux,
                                          const __half* __restrict__ A, const __half* __restrict__ B,
                                          const __half* __restrict__ bias, int M, int Nn, int K, int lda, int ldb,
                                          bool vec, unsigned* counter, MmStats st = {}) {
    constexpr int BM = 128, BN = 256, BK = MM_HOP_BK;
    const HopSmem m = hop_smem();
    if (M <= 0 || Nn <= 0) return;
    const int tilesM = (M + BM - 1) / BM, tilesN = (Nn + BN - 1) / BN, tiles = tilesM * tilesN;
    const int KT = (K + BK - 1) / BK;
    const int tid = threadIdx.x, wg = tid >> 7;
    const bool vec_out = (Nn & 7) == 0 && aligned16(out) && (EPI == MM_PLAIN || EPI == MM_STATS || aligned16(aux));
    if (EPI == MM_PLAIN && vec && vec_out && hop_pingpong_pays(Nn)) {
        if (hop_pingpong_columns(M, Nn, K) == 192)
            mm_hopper_pingpong<AK, BK_MAJOR, 192>(out, A, B, bias, M, Nn, K, lda, ldb, counter);
        else
            mm_hopper_pingpong<AK, BK_MAJOR, 128>(out, A, B, bias, M, Nn, K, lda, ldb, counter);
        return;
    }
    // MM_PLAIN with the TMA unit's loads and 16-byte output rows: each consumer's staged tile leaves by TMA tensor
    // stores, four boxes a tile, issued by one thread. Why: the finishers' 16-byte stores cost the products ~0.9 us a
    // tile at any K (bench/experiments/matmul_tile_cost.py, H200, 2026-12-04: 1730 ns a tile against 812 with their
    // shared loads and barriers but not their stores); the tensor stores win back a little of it (gpt2's qkv
    // 0.186 -> 0.183 ms, its attn proj 0.067 -> 0.066, small's qkv 36.0 -> 35.4-36.0 us; the same bits;
    // bench/results/matmul_tensor_store-2026-12-04.txt).
    const bool tensor_store = EPI == MM_PLAIN && vec && vec_out;
    // the finishers are the producer's warps 1-3, idle only when its copies are the TMA unit's; the gelu and the
    // statistics epilogues take them
    const bool finished = EPI != MM_PLAIN && vec && vec_out;
    hop_init_barriers(m, vec);
    const HopSchedule sc = hop_schedule(m.empty + MM_HOP_STAGES, counter, tiles);
    __syncthreads();
    if (KT == 0) return;

    if (wg == 0) {  // the producer: stage g of the block's sequence is k-tile g % KT of slot g / KT
        if (finished && tid >= 32) {
            cpl::grid_dependency();
            for (int s = 0;; ++s) {
                const int t = sc.wait(s);
                if (t < 0) break;
                int tm, tn;
                mm_tile_of(t, tilesM, tilesN, tm, tn);
                const bool more = sc.wait(s + 1) >= 0;  // (published before slot s was loaded)
                for (int c = 0; c < 2; ++c) {
                    const __half* stg = m.staging + c * 64 * MM_HOP_OUT_LD;
                    const int m0 = tm * BM + c * 64, n0 = tn * BN;
                    if constexpr (EPI == MM_GELU_BACKWARD) {
                        if (K <= HOP_GELU_SHORT_K)
                            hop_finish_gelu_backward<HOP_GELU_BACKWARD_ROWS_SHORT_K>(stg, out, aux, c, m0, n0, M, Nn);
                        else
                            hop_finish_gelu_backward<HOP_GELU_BACKWARD_ROWS>(stg, out, aux, c, m0, n0, M, Nn);
                    } else {
                        named_sync(4 + c);
                        hop_finish_store<EPI>(stg, out, aux, m0, n0, M, Nn, tid - 32, 0,
                                              EPI == MM_GELU ? 64 - hop_consumer_gelu_rows(K) : 64);
                        if constexpr (EPI == MM_STATS)
                            hop_finish_sums(st, reinterpret_cast<const float*>(m.bias) + c * 128,
                                            reinterpret_cast<float*>(m.bias) + c * 128 + 32, stg, m0, n0, M, Nn,
                                            tid - 32);
                    }
                    if (more) named_arrive(6 + c);
                }
            }
            return;
        }
        const HopMap* maps = hop_producer_maps<AK, BK_MAJOR>(m, A, B, M, Nn, K, lda, ldb, vec);
        if (maps == nullptr) return;
        cpl::grid_dependency();
        int g = 0;
        hop_walk(sc, tid == 0, [&](int t) {
            int tm, tn;
            mm_tile_of(t, tilesM, tilesN, tm, tn);
            hop_produce<AK, BK_MAJOR>(m, maps, A, B, tm, tn, 0, KT, M, Nn, K, lda, ldb, vec, g);
        });
        return;
    }

    const int c = wg - 1, warp = (tid >> 5) & 3, lane = tid & 31, ctid = tid & 127;
    const bool pair_ok = mm_pairs_ok<EPI>(out, aux, Nn);
    // The consumer's map of the output, 64 x 64 boxes, encoded by its warp 0 (its staging, unused yet, the scratch)
    // and used by its thread 0, which issues the stores.
    HopMap* out_map = &hop_maps[sm_id() % HOP_MAP_SLOTS][2 + c];
    if (tensor_store) {
        if (warp == 0) {
            hop_encode_map(out_map, reinterpret_cast<HopMap*>(m.staging + c * 64 * MM_HOP_OUT_LD), out, Nn, M, Nn, 64,
                           64);
            if (lane == 0) hop_acquire_map(out_map);
        }
        consumer_sync(c);  // the scratch is free before any warp stages a tile there
    }
    cpl::grid_dependency();
    // The sums start from bias[n] (else 0). A tile's 256 values are read from global memory by consumer 0 under the
    // previous tile's products (thread t the pair 2t, 2t + 1, as fp16 bits, zeros past Nn) and put in shared memory
    // after them, in the buffer of the tile's slot parity, so that no tile waits for their loads. The bits are joined
    // only after the products: joined before them (as fp16 -> fp32 -> fp16 pairs, the same bits), consumer 0 waited
    // out the loads' latency before its first wgmma, ~0.4 us a tile (bench/experiments/matmul_tile_trace.py, H200,
    // 2026-12-04: its bias phase 0.7-1.1 us against consumer 1's 0.4-0.7).
    struct BiasBits {
        unsigned short lo, hi;
    };
    auto bias_bits = [&](int tile) -> BiasBits {
        int tm, tn;
        mm_tile_of(tile, tilesM, tilesN, tm, tn);
        const int col = tn * BN + 2 * ctid;
        return {col < Nn ? __half_as_ushort(bias[col]) : (unsigned short)0,
                col + 1 < Nn ? __half_as_ushort(bias[col + 1]) : (unsigned short)0};
    };
    auto joined = [](BiasBits b) { return (unsigned)b.lo | (unsigned)b.hi << 16; };
    if (bias != nullptr && c == 0 && sc.wait(0) >= 0) m.bias[ctid] = joined(bias_bits(sc.wait(0)));
    int g = 0;
    for (int s = 0;; ++s) {
        const int t = sc.wait(s);
        if (t < 0) break;
        int tm, tn;
        mm_tile_of(t, tilesM, tilesN, tm, tn);
        float acc[32][4], unused_bias_sum[1][4];
        if (bias != nullptr) {
            consumers_sync();  // this tile's bias is in shared memory, the one before it read
            const __half2* pairs = reinterpret_cast<const __half2*>(m.bias + (s & 1) * 128);
#pragma unroll
            for (int f = 0; f < 32; ++f) {
                const float2 b = __half22float2(pairs[f * 4 + (lane & 3)]);
                acc[f][0] = acc[f][2] = b.x;
                acc[f][1] = acc[f][3] = b.y;
            }
        } else {
#pragma unroll
            for (int f = 0; f < 32; ++f) acc[f][0] = acc[f][1] = acc[f][2] = acc[f][3] = 0.f;
        }
        const int next = bias != nullptr && c == 0 ? sc.wait(s + 1) : -1;  // (published before slot s was loaded)
        const bool prefetch = next >= 0;
        const BiasBits next_bias = prefetch ? bias_bits(next) : BiasBits{0, 0};
        hop_consume<AK, BK_MAJOR, false>(m, c, KT, acc, unused_bias_sum, g);
        if (prefetch) m.bias[((s + 1) & 1) * 128 + ctid] = joined(next_bias);

        const int row = hop_fragment_row(), m0 = tm * BM + c * 64, n0 = tn * BN;  // the thread's, the consumer's
        if (!vec_out || (EPI != MM_PLAIN && !finished)) {
            hop_store<false, 32, EPI>(out, Nn, acc, m0 + row, n0, M, Nn, pair_ok, aux);
            if constexpr (EPI == MM_STATS) {
                consumer_sync(c);  // the consumer's rows are in out
                mm_stats_from_out(st, out, m0, 64, n0, M, Nn, warp, 4);
            }
            continue;
        }
        // 16-byte rows: staged in shared memory, then stored by the TMA unit's tensor stores or the finishers (or
        // copied out a row at a time by the TMA unit) while the next tile's products run
        __half* stg = m.staging + c * 64 * MM_HOP_OUT_LD;
        if (tensor_store) {
            if (s > 0) {  // this consumer's previous tile's stores have read its staging
                if (ctid == 0) bulk_wait_read();
                consumer_sync(c);
            }
            hop_store_boxes(stg, acc, row);
            fence_proxy_async();  // the staging writes, ordered before the TMA unit's reads
            consumer_sync(c);
            if (ctid == 0) {
#pragma unroll
                for (int b = 0; b < 4; ++b)
                    if (n0 + b * 64 < Nn) tma_store(out_map, stg + b * 64 * 64, n0 + b * 64, m0);
                bulk_commit();
            }
            continue;
        }
        if (finished) {
            if (s > 0) named_sync(6 + c);  // the finishers are done with the previous tile's rows
            if constexpr (EPI == MM_STATS)  // (no bias: its shared memory holds the statistics' rowmax, partial)
                hop_consumer_stats(st, acc, reinterpret_cast<float*>(m.bias) + c * 128, row, m0, n0, M, Nn);
            hop_store<true>(stg, MM_HOP_OUT_LD, acc, row, n0, M, Nn, pair_ok);
            named_arrive(4 + c);
            if (K <= HOP_GELU_SHORT_K)
                hop_consumer_finish<EPI, EPI == MM_GELU ? HOP_GELU_ROWS_SHORT_K : HOP_GELU_BACKWARD_ROWS_SHORT_K>(
                    stg, out, aux, c, m0, n0, M, Nn);
            else
                hop_consumer_finish<EPI, EPI == MM_GELU ? HOP_GELU_ROWS : HOP_GELU_BACKWARD_ROWS>(stg, out, aux, c, m0,
                                                                                                  n0, M, Nn);
            continue;
        }
        if (s > 0) {  // the previous tile's copies have read the staging rows
            if (ctid < 64) bulk_wait_read();
            consumer_sync(c);
        }
        hop_store<true>(stg, MM_HOP_OUT_LD, acc, row, n0, M, Nn, pair_ok);
        fence_proxy_async();  // the staging writes, ordered before the bulk copies' reads
        consumer_sync(c);
        if (ctid < 64) {  // a row each
            if (m0 + ctid < M)
                bulk_store(out + (size_t)(m0 + ctid) * Nn + n0, stg + ctid * MM_HOP_OUT_LD,
                           (unsigned)min(BN, Nn - n0) * 2);
            bulk_commit();
        }
    }
    if (vec_out && !finished && ctid < 64) bulk_wait();  // every copy written before the block ends
}

// The columns of the weight gradient's tiles: 192 where as many 192-column tiles as 256-column ones cover Nn (the
// geometry's count, formats/geometry.py: weight_gradient_tiles), else 256. small's Nn = 384 fills two 192-column
// tiles, where two of 256 leave a quarter of their products on zero columns.
__device__ __forceinline__ int hop_split_columns(int Nn) { return (Nn + 191) / 192 == (Nn + 255) / 256 ? 192 : 256; }

// The weight gradient, out[M,Nn] = A B (+ out when accumulate), dbias[m] = sum_k A(m,k) when dbias is given, with
// A and B both transposed ([K][M], [K][Nn]), split-K as mm_tile's: launched in clusters of S = `splits` blocks
// (1 .. 16), a cluster a 128 x BN tile (BN = hop_split_columns(Nn)), block rank r summing the r-th of S runs of its
// K. A block has one tile (K is long); its consumers put their fp32 partial rows in the stages' shared memory, and
// after a cluster barrier block r adds the tile's rows [128 r / S, 128 (r + 1) / S), reading the S partials through
// distributed shared memory in split order 0 .. S-1 (then + old out, one rounding): a sum order fixed by the code,
// deterministic without atomics or scratch memory.
template <bool AK, bool BK_MAJOR, int BN>
__device__ __forceinline__ void mm_hopper_split(__half* __restrict__ out, const __half* __restrict__ A,
                                                const __half* __restrict__ B, __half* __restrict__ dbias, int M,
                                                int Nn, int K, int lda, int ldb, bool accumulate, bool vec,
                                                int splits) {
    constexpr int BM = 128, BK = MM_HOP_BK, LD = BN + 8;  // fp32 row stride of the partials (float2 stores)
    constexpr int STAGES = hop_ring_stages<BN, HOP_ONES>();
    static_assert(BM * LD * 4 + BM * 4 <= STAGES * (BM + BN) * BK * 2, "partials fit in the stages");
    const HopSmem m = hop_ring_smem<BN, HOP_ONES>();
    if (M <= 0 || Nn <= 0) return;
    const int tilesM = (M + BM - 1) / BM, tilesN = (Nn + BN - 1) / BN, tiles = tilesM * tilesN;
    const int S = splits, split = (int)cluster_rank(), pid = (int)(blockIdx.x / S);
    const bool idle = pid >= tiles;  // past the last tile (a grid larger than planned): only the barriers
    int tm = 0, tn = 0;
    if (!idle) mm_tile_of(pid, tilesM, tilesN, tm, tn);
    const int KT_ALL = (K + BK - 1) / BK;
    const int kt0 = (int)((long long)KT_ALL * split / S);
    const int KT = idle ? 0 : (int)((long long)KT_ALL * (split + 1) / S) - kt0;
    const bool bias_sum = dbias != nullptr && tn == 0;
    const int tid = threadIdx.x, wg = tid >> 7, lane = tid & 31, warp = (tid >> 5) & 3;
    hop_init_barriers(m, vec, 8, STAGES);
    if (tid < HOP_ONES / 2) reinterpret_cast<unsigned*>(m.staging)[tid] = 0x3C003C00u;  // fp16 1.0 pairs
    fence_proxy_async();  // the ones, visible to the tensor cores
    __syncthreads();

    float* part = reinterpret_cast<float*>(m.stages);  // [BM][LD] partial sums, then [BM] dbias partials
    float* bias_part = part + BM * LD;
    const HopMap* maps = wg == 0 && KT > 0 ? hop_producer_maps<AK, BK_MAJOR, BN>(m, A, B, M, Nn, K, lda, ldb, vec)
                                           : nullptr;
    cpl::grid_dependency();
    if (wg == 0 && KT > 0) {  // the producer's threads without copies to issue go on to the cluster barriers
        int g = 0;
        if (maps != nullptr)
            hop_produce<AK, BK_MAJOR, BN, STAGES>(m, maps, A, B, tm, tn, kt0, KT, M, Nn, K, lda, ldb, vec, g);
    } else if (wg > 0 && !idle) {
        const int c = wg - 1;
        float acc[BN / 8][4], bias_acc[1][4] = {{0.f, 0.f, 0.f, 0.f}};
#pragma unroll
        for (int f = 0; f < BN / 8; ++f)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[f][e] = 0.f;
        if (KT > 0) {
            int g = 0;
            if (bias_sum)
                hop_consume<AK, BK_MAJOR, true, BN, STAGES>(m, c, KT, acc, bias_acc, g);
            else
                hop_consume<AK, BK_MAJOR, false, BN, STAGES>(m, c, KT, acc, bias_acc, g);
        }
        consumers_sync();     // both consumers' products are done reading the stages,
        fence_proxy_async();  // ... which their partials now overwrite
        const int row = c * 64 + warp * 16 + (lane >> 2);
#pragma unroll
        for (int f = 0; f < BN / 8; ++f)
#pragma unroll
            for (int e = 0; e < 2; ++e)
                *reinterpret_cast<float2*>(part + (row + 8 * e) * LD + f * 8 + (lane & 3) * 2) =
                    make_float2(acc[f][2 * e], acc[f][2 * e + 1]);
        if (bias_sum && (lane & 3) == 0) {
            bias_part[row] = bias_acc[0][0];
            bias_part[row + 8] = bias_acc[0][2];
        }
    }
    cluster_sync();  // every block's partial rows written (the producer's copies all consumed before)
    const int R0 = BM * split / S, ROWS = BM * (split + 1) / S - R0, m0 = tm * BM, n0 = tn * BN;  // rows to add
    const bool pair_ok = (Nn & 1) == 0 && (reinterpret_cast<size_t>(out) & 3) == 0;
    if (!idle) {
        for (int i = tid; i < ROWS * (BN / 4); i += MM_HOP_THREADS) {
            const int r = R0 + i / (BN / 4), col4 = (i % (BN / 4)) * 4;
            const int grow = m0 + r, gcol = n0 + col4;
            if (grow >= M || gcol >= Nn) continue;
            float4 v = ld_cluster_f4(part + r * LD + col4, 0);
            for (int s = 1; s < S; ++s) {
                const float4 p = ld_cluster_f4(part + r * LD + col4, s);
                v.x += p.x; v.y += p.y; v.z += p.z; v.w += p.w;
            }
            __half* o = out + (size_t)grow * Nn + gcol;
            mm_store_pair(o, gcol, Nn, v.x, v.y, accumulate, pair_ok);
            mm_store_pair(o + 2, gcol + 2, Nn, v.z, v.w, accumulate, pair_ok);
        }
        if (bias_sum && tid < ROWS && m0 + R0 + tid < M) {
            const int r = R0 + tid;
            float b = ld_cluster_f32(bias_part + r, 0);
            for (int s = 1; s < S; ++s) b += ld_cluster_f32(bias_part + r, s);
            dbias[m0 + r] = __float2half_rn(b);
        }
    }
    cluster_sync();  // every block is done reading the others' partials before any exits
}

}  // namespace coptc
#endif
