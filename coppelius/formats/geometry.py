"""Launch geometry: the grid, block and dynamic shared bytes each catalog kernel expects, from its
scalar arguments and, for the matmuls, the arch (WIDE_TILE_ARCHS). The CUDA kernels read their tile shapes back from
blockDim and blockIdx, so the constants here and those in coppelius/kernels/cuda/*.cuh must agree:
tests/unit/test_nvrtc.py (test_geometry_constants_match_the_kernels) parses the .cuh files and
holds them equal. Of the other kernels only layernorm_backward takes dynamic shared memory, on the archs of
LAYERNORM_STAGED_ARCHS: two batches of its rows staged by cp.async (18 KiB a block at gpt2's width; the kernel reads
the bytes back and loads straight to registers without them).

The eight tensor-core kernels (matmul.cuh, attention.cuh, attention_backward.cuh). Dynamic shared memory is at most
48 KiB (no opt-in attribute needed) except for sm_90a's warp-specialized matmuls below (216 KiB) and its attention
forward (56 KiB) and backward (64.5 KiB), which the host opts in to; the kernels use no static shared memory.
matmuls: a 1-D grid of output tiles (matmul_forward_gelu's and matmul_forward_stats' geometry is matmul_forward's,
matmul_backward_input_gelu's matmul_backward_input's). On the archs of WIDE_TILE_ARCHS (sm_90a's wgmma) the six take
matmul_hopper.cuh's warp-specialized blocks of 128x256 tiles: 384 threads (a producer and two consumer warpgroups),
HOPPER_STAGES stages of 128x64 + 256x64 fp16 filled by the TMA unit, output staging rows, tensor maps and barriers
(216 KiB), one block an SM. matmul_forward and matmul_backward_input take them when there are at least
WIDE_MIN_TILES tiles: up to WIDE_TILES persistent blocks, each walking tiles blockIdx.x, + gridDim.x, ... (the input
gradients' taken from their tile_counter instead); matmul_backward_weight one tile a block, split S = 1 ..
WIDE_BESIDE_SPLITS ways, a cluster of S blocks a tile (wide_split_count: the least time in waves of clusters), each
block summing at least WIDE_MIN_K of K (measured on the H200, docs/notes/gpu-speed.md, "v7" and "v40", and the
H100, the fortieth session); a shorter one (the tiny model's) takes the rule below, as on every arch
(its 64x64 tiles split 8 ways: 7.8 against 9.9 us for 128x128 wgmma tiles at tiny's shapes on the H200, "v39").
Otherwise 256 threads with 128x128 tiles (3 stages of 128x32 + 128x32 fp16: 48 KiB) when there are at least
MATMUL_BIG_TILES of them; otherwise 128 threads with 64x64 tiles (4 stages: 32 KiB), so that small outputs (a 768x768
weight gradient, the tiny models) still spread over the card. matmul_backward_weight splits K (matmul.cuh) on the
archs with thread-block clusters (sm_90 on; cluster_size): unless it has MATMUL_BIG_TILES big tiles without splitting
(the lm head), its grid holds S = 2, 4 or 8 blocks per output tile (split_count: about SPLIT_BLOCKS blocks), 128x128
tiles when that many of them reach SPLIT_BLOCKS, else 64x64. Its grid is S blocks a tile, launched in clusters of S
blocks (the launch's cluster field, docs/formats.md), and the kernel reads S back from its cluster's size; without
clusters (sm_86) S = 1.
The archs other than sm_90 have not been measured: they keep these rules.
attention: 128 threads (4 warps). forward: one block per 64 query rows per (head, batch);
backward: two blocks per 64-row tile per (head, batch), one for the keys (dk, dv), one for the
queries (dq). hs = C / NH is padded to HSP in {16, 32, 64, 128}; hs > 128 is not supported. On the
WGMMA_ARCHS a head-size-64 key block double-buffers its query tiles (64.5 KiB, opted in; three blocks an SM), and
a head-size-64 forward block loads its K/V tiles two ahead (ATTENTION_FORWARD_STAGES; 56 KiB, still four an SM),
and its launch is ATTENTION_FORWARD_RESIDENT blocks that take the (query tile, head, batch) items in turn.
"""

from fractions import Fraction

from .tables import OPS

# Constants of the CUDA kernels (coppelius/kernels/cuda/*.cuh) that their geometry depends on.
THREADS = 256           # threads per block of every non-tensor-core kernel (common.cuh: THREADS)
PACK = 8                # fp16 values per thread in the element-wise kernels (common.cuh: PACK)
ENCODER_ROWS = 8        # vocabulary rows per encoder_backward block (encoder.cuh: eb::ROWS)
ENCODER_CHUNK = 256     # channels per encoder_backward block (eb::CHUNK)
ENCODER_POSITIONS = 8   # dwpe positions per encoder_backward block (eb::POSITIONS)
ENCODER_SEGMENTS = 8    # runs of a dwte row's positions, a warp each (eb::SEGMENTS; host/encoder.c: SEGMENTS)
ENCODER_SORT_TOKENS = 256  # vocabulary rows an encoder_sort block sorts (eb::TOKENS)
ENCODER_SORT_THREADS = 1024  # threads of an encoder_sort block (eb::SORT_THREADS)
ENCODER_SPREAD_VOCAB = 512  # up to this many rows, encoder_backward gives each row a block (eb::SPREAD_VOCAB)
ENCODER_SPREAD_CHUNK = 64  # ... of this many channels (eb::SPREAD_CHUNK: 2 a lane)
LAYERNORM_ROWS = 8      # rows per layernorm_forward block (layernorm.cuh: ln::ROWS)
LAYERNORM_BLOCK_ROWS = 4    # rows a layernorm_backward block aims for: one batch (ln::BLOCK_ROWS; host/layernorm.c)
LAYERNORM_MAX_BLOCKS = 1024  # layernorm_backward blocks at most (ln::MAX_BLOCKS; host/layernorm.c)
LAYERNORM_MAX_THREADS = 512  # a layernorm_backward block: a thread per 8 channels (ln::MAX_THREADS), so C <= 4096
LAYERNORM_WEIGHT_THREADS = 1024  # a layernorm_backward_weight block: 32 columns x 32 row groups (ln::WEIGHT_THREADS)
LAYERNORM_BATCH = 2     # rows a layernorm_backward thread sums between two barriers (ln::BATCH)
LAYERNORM_STAGES = 2    # its batches in dynamic shared memory, each thread's 3 packs a row (ln::STAGES)
# where layernorm_backward stages its loads (measured there; elsewhere its blocks would crowd 100 KiB an SM), for
# widths up to LAYERNORM_STAGED_WIDTH (128 threads, 24 KiB a block); the kernel reads the shared bytes back
LAYERNORM_STAGED_ARCHS = ("sm_90",)
LAYERNORM_STAGED_WIDTH = 1024
MAX_WIDTH = PACK * LAYERNORM_MAX_THREADS  # the widest model the kernels take (config.py refuses a wider one)
MATMUL_BK = 32          # the k-extent of a matmul tile stage (matmul.cuh: MM_BK)
WIDE_TILES = 132        # one wave of one-a-SM blocks on a 132-SM H200; a fixed number, not a device query
WIDE_MIN_TILES = 66     # fewer wide tiles than this take the 128x128 or 64x64 tiles (then one block a wide tile)
WIDE_MIN_K = 1024       # the least K an sm_90a weight-gradient block sums (16 k-tiles): below it prologue and
                        # reduction dominate
# clusters of S = 1 .. 16 one-an-SM blocks (384 threads, 216 KiB) resident at once on the H200
# (cuOccupancyMaxActiveClusters, 2026-12-01; above 8 with the non-portable opt-in the hosts give)
WIDE_CLUSTERS = (132, 66, 39, 30, 22, 17, 15, 15, 9, 7, 7, 7, 7, 7, 7, 7)
# the most splits of an sm_90a weight gradient: the cuda device runs each beside an input gradient, whose blocks take
# their tiles from a counter (matmul_hopper.cuh: HopSchedule) and so fill whatever SMs the weight gradient leaves; what
# counts then is the weight gradient's SM-time (each split's block pays the fixed cost of WIDE_BLOCK_K again), not its
# span, as long as it ends before a later command overwrites its operands (small's fc projection's dout, dresidual,
# ~0.1 ms later). small's step with the counter, splits at most 1, 2, 3 and as the cost model alone: 4.05, 3.745,
# 3.84, 3.89 ms; 3.955 before the counter (H100, 2026-12-05, bench/results/tile_counter_ab-2026-12-05-h100.txt); in a
# second A/B 3.68-3.72 at 2, 3.76-3.81 at 3, 3.94-3.95 before; gpt2-124m 56.6 -> 55.0
# (tile_counter_splits_ab-2026-12-05-h100.txt)
WIDE_BESIDE_SPLITS = 2
# an sm_90a weight-gradient block's fixed cost (launch, prologue, partials through distributed shared memory, stores)
# and each further split's, in units of one K of its main loop (fitted to the H200's times at S = 1 .. 16,
# docs/notes/gpu-speed.md "v40": about 10 us, 0.2 us and 11 ns)
WIDE_BLOCK_K = 900
WIDE_SPLIT_K = 18
HOPPER_THREADS = 384  # matmul_hopper.cuh: MM_HOP_THREADS
HOPPER_BK = 64        # the k-extent of a stage (MM_HOP_BK)
HOPPER_STAGES = 3     # matmul_hopper.cuh: MM_HOP_STAGES
HOPPER_OUT_LD = 264   # matmul_hopper.cuh: MM_HOP_OUT_LD
HOPPER_ID_RING = 16   # matmul_hopper.cuh: HOP_ID_RING, the tile schedule's ids (4 bytes) with an mbarrier (8) each
# its stages of 128x64 + 256x64 fp16, two consumers' 64 output rows of HOPPER_OUT_LD fp16, two TMA tensor maps being
# encoded (128 bytes each), two tiles' 256 fp16 bias values, a full and an empty mbarrier (8 bytes each) a stage, then
# the tile schedule's ring of 16 ids and their mbarriers (matmul_hopper.cuh: MM_HOP_SHARED, HOP_IDS_BYTES); the weight
# gradient has no output rows and spends the same bytes on a deeper ring (hop_ring_stages: 4 stages of 128x256
# tiles' k-tiles, 5 of 128x192)
HOPPER_SHARED = (HOPPER_STAGES * (128 + 256) * HOPPER_BK * 2 + 2 * 64 * HOPPER_OUT_LD * 2 + 2 * 128 + 2 * 256 * 2
                 + HOPPER_STAGES * 2 * 8 + HOPPER_ID_RING * (4 + 8))
# (block, dynamic shared bytes) of each matmul tile: matmul_hopper.cuh's 128x256, matmul.cuh's 128x128 (3 stages of
# 128x32 + 128x32 fp16) and 64x64 (4 stages)
MATMUL_TILES = {"wide": ([HOPPER_THREADS, 1, 1], HOPPER_SHARED), "big": ([256, 1, 1], 3 * (128 + 128) * MATMUL_BK * 2),
                "small": ([128, 1, 1], 4 * (64 + 64) * MATMUL_BK * 2)}
MATMUL_BIG_TILES = 264  # two waves' worth of blocks on a 132-SM H200; a fixed number, not a device query
MATMUL_SPLITS = 8  # the most blocks per output tile of the 64x64 and 128x128 weight gradients (matmul.cuh: MM_SPLITS)
SPLIT_BLOCKS = 2 * MATMUL_BIG_TILES  # blocks a split weight gradient aims for (four waves of 128x128 tiles)

ATTENTION_THREADS = 128  # threads per attention block (attention.cuh: AT_THREADS)
ATTENTION_ROWS = 64      # query rows of a forward or backward query block, keys of a backward key block (AT_BR)
ATTENTION_FORWARD_STAGES = 3  # K/V stages of the wgmma forward at head size 64 (attention.cuh: COPTC_ATTN_FWD_STAGES)
# blocks of a resident wgmma forward at head size 64 (attention.cuh: at_items): the largest prime below its four
# blocks an SM on a 132-SM card (a fixed number, not a device query), so that each block's items go round every
# query tile of a head, the longest first, and the blocks' work evens out
ATTENTION_FORWARD_RESIDENT = 523

WGMMA_ARCHS = ("sm_90",)         # the archs compiled with wgmma (sm_90a): their kernels take its paths
# The archs whose training step fuses the loss's statistics into the lm head (lm_head_leaves_stats), where its wide
# tiles split them between consumers and finishers (matmul_hopper.cuh, MM_STATS). On the H200 at gpt2's lm head, in
# the training step: matmul_forward_stats 4.20 ms + the loss from its statistics 1.66, against matmul_forward 3.75 +
# crossentropy_forward_backward 2.30 (bench/train_gpu.py --profile, 2026-12-03).
LM_HEAD_STATS_ARCHS: tuple[str, ...] = ("sm_90",)
# ... and only for rows longer than the loss block's one sweep of loads (THREADS threads, 4 packs each: loss.cuh's
# UNROLL): a shorter row's second pass reads what its first left in L1, so there is no pass to save.
LM_HEAD_STATS_MIN_V = THREADS * PACK * 4 + 1
# The losses' rows of at most a pack a lane (loss.cuh: WARP_ROW_COLUMNS) take a warp each, THREADS // 32 a block.
LOSS_WARP_ROW_COLUMNS = 32 * PACK
LOSS_WARP_ROW_KERNELS = ("crossentropy_forward", "crossentropy_backward", "crossentropy_forward_backward")
WIDE_TILE_ARCHS = WGMMA_ARCHS    # the archs whose matmuls take matmul_hopper.cuh's tiles (measured there)
PROGRAMMATIC_ARCHS = ("sm_90", "sm_121")  # archs with programmatic dependent launch (launch.cuh)
PROGRAMMATIC_BLOCKS_PER_SM = 4  # the most blocks an SM of either launch of a programmatic edge (measured, programmatic)

TENSOR_CORE = ("matmul_forward", "matmul_forward_gelu", "matmul_forward_stats", "matmul_backward_input",
               "matmul_backward_input_gelu",
               "matmul_backward_weight", "attention_forward", "attention_backward")


def _cdiv(a: int, b: int) -> int:
    return max(1, -(-a // b))


def geometry(kernel: str, scalars: dict, arch: str = "any") -> tuple[list[int], list[int], int]:
    """(grid, block, dynamic shared bytes) of a launch on `arch` (a plan's target arch), as the CUDA kernels
    expect it.

    The cpu device ignores the geometry; the plan records it, admission recomputes it from the
    launch's scalars and refuses a launch whose geometry differs (check device-geometry), and the
    CUDA device replays it as planned. Each kernel's comment in its .cuh file says the same.
    """
    if kernel in TENSOR_CORE:
        return tensor_core_geometry(kernel, scalars, arch)
    s = scalars
    if kernel == "encoder_forward":
        grid = [_cdiv(s["B"] * s["T"] * s["C"], PACK * THREADS), 1, 1]
    elif kernel == "encoder_sort":
        return [_cdiv(s["Vp"], ENCODER_SORT_TOKENS), 1, 1], [ENCODER_SORT_THREADS, 1, 1], 0
    elif kernel == "encoder_backward":  # row-group blocks, then dwpe blocks; channel chunks in y
        dwpe_blocks = _cdiv(s["T"], ENCODER_POSITIONS)
        if s["Vp"] <= ENCODER_SPREAD_VOCAB:  # a row a block, and a row's chunks in x: adjacent, in one wave
            grid = [_cdiv(s["C"], ENCODER_SPREAD_CHUNK), s["Vp"] + dwpe_blocks, 1]
        else:
            grid = [_cdiv(s["Vp"], ENCODER_ROWS) + dwpe_blocks, _cdiv(s["C"], ENCODER_CHUNK), 1]
    elif kernel in ("layernorm_forward", "residual_layernorm_forward"):
        grid = [_cdiv(s["N"], LAYERNORM_ROWS), 1, 1]
    elif kernel == "layernorm_backward":  # a block a run of rows, a thread per 8 channels
        threads = 32 * _cdiv(_cdiv(s["C"], PACK), 32)
        staged = arch in LAYERNORM_STAGED_ARCHS and s["C"] % PACK == 0 and s["C"] <= LAYERNORM_STAGED_WIDTH
        return ([layernorm_backward_blocks(s["N"]), 1, 1], [threads, 1, 1],
                LAYERNORM_STAGES * LAYERNORM_BATCH * 3 * 16 * threads if staged else 0)
    elif kernel == "layernorm_backward_weight":  # a block 32 columns of the partials
        return [_cdiv(2 * s["C"], 32), 1, 1], [LAYERNORM_WEIGHT_THREADS, 1, 1], 0
    elif kernel in ("crossentropy_forward", "crossentropy_backward", "crossentropy_forward_backward",
                    "crossentropy_forward_backward_stats", "argmax_forward"):
        grid = [_cdiv(s["N"], loss_rows_per_block(kernel, s)), 1, 1]
    elif kernel in ("gelu_forward", "gelu_backward", "residual_forward", "nonfinite_check"):
        grid = [_cdiv(s["N"], PACK * THREADS), 1, 1]
    elif kernel in ("adamw", "cast_half"):
        grid = [_cdiv(s["N"], THREADS), 1, 1]
    else:
        raise KeyError(f"{kernel} is not a catalog kernel")
    return grid, [THREADS, 1, 1], 0


def loss_rows_per_block(kernel: str, scalars: dict) -> int:
    """Rows of logits a loss block takes: a warp a row where a row is at most a pack a lane (a byte vocabulary), else
    the block one row."""
    warp_rows = kernel in LOSS_WARP_ROW_KERNELS and scalars["Vp"] <= LOSS_WARP_ROW_COLUMNS
    return THREADS // 32 if warp_rows else 1


def layernorm_backward_blocks(N: int) -> int:
    """Blocks of a layernorm_backward launch, each summing dweight and dbias over its run of ceil(N / blocks) rows
    into one row of the partials that layernorm_backward_weight adds: about N / LAYERNORM_BLOCK_ROWS, at most
    LAYERNORM_MAX_BLOCKS (the CUDA kernel, the cpu device and the C host use the same count)."""
    return max(1, min(_cdiv(N, LAYERNORM_BLOCK_ROWS), LAYERNORM_MAX_BLOCKS))


def encoder_run_length(n: int) -> int:
    """Positions in each run of a dwte row that n positions hold: ceil(n / ENCODER_SEGMENTS). This is the order of
    encoder_backward's sums, which the cpu device (runtime/cpu.py), the C host (host/encoder.c) and the CUDA kernel
    (encoder.cuh) all follow: the row's positions in ascending order fall in runs of this length, each run summed
    in position order from +0, and row v of dwte becomes dwte[v] + (((r_0 + r_1) + r_2) + ...), in run order."""
    return _cdiv(n, ENCODER_SEGMENTS)


def matmul_shape(kernel: str, s: dict) -> tuple[int, int, int]:
    """(M, Nn, K) of the GEMM a matmul kernel computes: out[M, Nn] = sum over K."""
    N, C, OC = int(s["N"]), int(s["C"]), int(s["OC"])
    if kernel in ("matmul_forward", "matmul_forward_gelu", "matmul_forward_stats"):
        return N, OC, C
    if kernel in ("matmul_backward_input", "matmul_backward_input_gelu"):
        return N, C, OC
    if kernel == "matmul_backward_weight":
        return OC, C, N
    raise KeyError(kernel)


def stats_width(scalars: dict, arch: str = "any") -> int:
    """matmul_forward_stats' width: the columns of its launch's tiles (128x256 wide, 128x128 big, 64x64 small)."""
    block = tensor_core_geometry("matmul_forward_stats", scalars, arch)[1][0]
    return {HOPPER_THREADS: 256, 256: 128, 128: 64}[block]


def lm_head_leaves_stats(scalars: dict, arch: str = "any") -> bool:
    """Whether the training step's lm head is matmul_forward_stats and its loss crossentropy_forward_backward_stats
    (scalars: matmul_forward_stats' N, C, OC = Vp, V): on the archs of LM_HEAD_STATS_ARCHS, where the lm head takes the
    wide tiles (the other tiles' statistics read their rows back), for rows of at least LM_HEAD_STATS_MIN_V values
    (scalars' V: the vocabulary)."""
    return arch in LM_HEAD_STATS_ARCHS and scalars["V"] >= LM_HEAD_STATS_MIN_V and stats_width(scalars, arch) == 256


HEAD_PADDINGS = (16, 32, 64, 128)  # the head sizes the attention kernels are instantiated for
MAX_HEAD_SIZE = HEAD_PADDINGS[-1]  # the largest head size of the tensor-core kernels (config.py refuses a larger one)


def head_padding(hs: int) -> int:
    """The padded head size HSP the attention kernels instantiate for head size hs."""
    for hsp in HEAD_PADDINGS:
        if hs <= hsp:
            return hsp
    raise ValueError(f"attention head size {hs} > {MAX_HEAD_SIZE} is not supported by the tensor-core kernels")


def attention_shared_bytes(kernel: str, hsp: int, arch: str = "any") -> int:
    """Dynamic shared bytes of the attention kernels for padded head size hsp on arch (see attention.cuh and
    attention_backward.cuh)."""
    row = hsp * 2  # bytes of one fp16 row
    if kernel == "attention_forward":
        bc = 64 if hsp <= 64 else 32
        stages = ATTENTION_FORWARD_STAGES if arch in WGMMA_ARCHS and hsp == 64 else 2
        return (ATTENTION_ROWS + 2 * stages * bc) * row  # Q + the stages of K and V
    brk = 64 if hsp <= 64 else 16       # key block: query tile
    query_stages = 2 if arch in WGMMA_ARCHS and hsp == 64 else 1  # the wgmma key block double-buffers them
    keys = (2 * ATTENTION_ROWS + 3 * brk * query_stages) * row + 2 * brk * 4  # K, V; Q, dO, out tiles; lse, D rows
    bcq, stages = (64, 2) if hsp <= 64 else (32, 1)
    queries = (2 * ATTENTION_ROWS + 2 * stages * bcq) * row  # Q, dO; stages of K and V
    if query_stages == 2:  # the wgmma query block's out tile and D rows (within the key block's bytes)
        queries += ATTENTION_ROWS * row + ATTENTION_ROWS * 4
    return max(keys, queries)


def split_count(tiles: int, blocks: int = SPLIT_BLOCKS) -> int:
    """Blocks per output tile of a split weight gradient: the fewest of 1, 2, 4 .. MATMUL_SPLITS that
    give `blocks` blocks, else MATMUL_SPLITS."""
    splits = 1
    while splits < MATMUL_SPLITS and tiles * splits < blocks:
        splits *= 2
    return splits


def wide_split_count(tiles: int, K: int) -> int:
    """Blocks per 128x256 tile of an sm_90a weight gradient, a cluster each: of S = 1 .. WIDE_BESIDE_SPLITS (each block
    summing at least WIDE_MIN_K of K), the S whose launch takes the least time, counted in waves of
    WIDE_CLUSTERS[S - 1] clusters, each wave K / S + WIDE_BLOCK_K + WIDE_SPLIT_K * S long; the smaller S on a tie.
    gpt2's fc, fc projection and lm head: S = 1 (one wave of 72 or more tiles); its qkv and attn proj and all of
    small's: 2."""
    best, best_cost = 1, None
    for splits in range(1, WIDE_BESIDE_SPLITS + 1):
        if splits > 1 and K < splits * WIDE_MIN_K:
            break
        waves = _cdiv(tiles, WIDE_CLUSTERS[splits - 1])
        cost = Fraction(waves * (K + WIDE_BLOCK_K * splits + WIDE_SPLIT_K * splits * splits), splits)
        if best_cost is None or cost < best_cost:
            best, best_cost = splits, cost
    return best


def has_clusters(arch: str) -> bool:
    """Whether the arch launches thread-block clusters: sm_90 on (and the generic "any")."""
    return not (arch.startswith("sm_") and int(arch[3:]) < 90)


def weight_gradient_tiles(scalars: dict, arch: str = "any") -> tuple[str, int, int]:
    """(tile, output tiles, S) of a matmul_backward_weight launch: its tile ("wide" 128x256 wgmma, "big" 128x128,
    "small" 64x64), how many of them cover the output, and the blocks each is split over (one cluster a tile).
    A wide tile is 192 columns where as many of those cover the output (matmul_hopper.cuh: hop_split_columns, e.g.
    small's Nn = 384): the same count, a quarter fewer products on zero columns."""
    M, Nn, K = matmul_shape("matmul_backward_weight", scalars)
    big, small, wide = _cdiv(M, 128) * _cdiv(Nn, 128), _cdiv(M, 64) * _cdiv(Nn, 64), _cdiv(M, 128) * _cdiv(Nn, 256)
    if arch in WIDE_TILE_ARCHS and K >= WIDE_MIN_K:
        return "wide", wide, wide_split_count(wide, K)
    if big >= MATMUL_BIG_TILES:  # enough tiles: one block each
        return "big", big, 1
    clustered = has_clusters(arch)
    splits = split_count(big) if clustered else 1
    if big * splits >= SPLIT_BLOCKS:
        return "big", big, splits
    return "small", small, split_count(small) if clustered else 1


def cluster_size(kernel: str, scalars: dict, arch: str = "any") -> int:
    """Blocks of each thread-block cluster a launch is made in (the launch table's cluster field; 1: none): a split
    weight gradient's S, one cluster a tile (1 where the arch has no clusters)."""
    return weight_gradient_tiles(scalars, arch)[2] if kernel == "matmul_backward_weight" else 1


def grid_blocks(grid) -> int:
    return int(grid[0]) * int(grid[1]) * int(grid[2])


def programmatic(arch: str, sm_count: int, before: list[int] | None, grid: list[int],
                 blocks_per_sm: int = PROGRAMMATIC_BLOCKS_PER_SM) -> bool:
    """Whether a launch of `grid` may start while the launch of grid `before` right before it in its piece finishes
    (a programmatic edge of the piece's graph: the kernel waits for its predecessor in launch.cuh's prologue). Only
    on the archs that have it, after a launch (never a copy or memset), and only where both grids have at most
    PROGRAMMATIC_BLOCKS_PER_SM blocks an SM: the dependent's blocks then take the SMs its predecessor's tail leaves
    idle, but beside a larger grid (small's one-wave layernorm_backward) the early residents cost more than they
    hide. Measured on the H200 (the update piece's graph, docs/notes/gpu-speed.md "Fourteenth session"): every
    edge, tiny 0.248 -> 0.232 ms and small 5.02 -> 5.10; these edges, tiny 0.232 and small 5.01."""
    if before is None or arch not in PROGRAMMATIC_ARCHS:
        return False
    return max(grid_blocks(before), grid_blocks(grid)) <= blocks_per_sm * sm_count


def programmatic_launches(commands, launches, ring, arch: str, sm_count: int,
                          blocks_per_sm: int = PROGRAMMATIC_BLOCKS_PER_SM):
    """(command index, launch record, grid before or None, programmatic) of each launch row of a realization's tables
    (formats/tables.py: commands, launches, ring), walked a ring entry at a time as `programmatic` decides."""
    for entry in ring:
        before = None  # the grid of the launch right before, if the row before is one
        for j in range(int(entry["offset"]), int(entry["offset"] + entry["length"])):
            if int(commands[j]["op"]) != OPS["launch"]:
                before = None
                continue
            launch = launches[int(commands[j]["a"])]
            grid = [int(g) for g in launch["grid"]]
            yield j, launch, before, programmatic(arch, sm_count, before, grid, blocks_per_sm)
            before = grid


def tensor_core_geometry(kernel: str, scalars: dict, arch: str = "any") -> tuple[list[int], list[int], int]:
    """(grid, block, dynamic shared bytes) of one of the eight tensor-core kernels' launches."""
    if kernel == "matmul_backward_weight":
        tile, tiles, splits = weight_gradient_tiles(scalars, arch)
        return [tiles * splits, 1, 1], *MATMUL_TILES[tile]
    if kernel.startswith("matmul_"):
        M, Nn, K = matmul_shape(kernel, scalars)
        big, small, wide = _cdiv(M, 128) * _cdiv(Nn, 128), _cdiv(M, 64) * _cdiv(Nn, 64), _cdiv(M, 128) * _cdiv(Nn, 256)
        if arch in WIDE_TILE_ARCHS and wide >= WIDE_MIN_TILES:
            return [min(wide, WIDE_TILES), 1, 1], *MATMUL_TILES["wide"]
        if big >= MATMUL_BIG_TILES:
            return [big, 1, 1], *MATMUL_TILES["big"]
        return [small, 1, 1], *MATMUL_TILES["small"]
    if kernel in ("attention_forward", "attention_backward"):
        B, T, C, NH = (int(scalars[k]) for k in ("B", "T", "C", "NH"))
        if C % NH:
            raise ValueError(f"C={C} is not a multiple of NH={NH}")
        hsp = head_padding(C // NH)
        tiles = max(1, _cdiv(T, ATTENTION_ROWS))
        x = tiles if kernel == "attention_forward" else 2 * tiles
        shared = attention_shared_bytes(kernel, hsp, arch)
        # the kernel checks the same, and qkv's 16-byte alignment (a plane's: 256 on every target); a resident grid
        # that reached another path would trap
        if kernel == "attention_forward" and arch in WGMMA_ARCHS and hsp == 64 and (C // NH) % 8 == 0 and C % 8 == 0:
            return [min(x * NH * B, ATTENTION_FORWARD_RESIDENT), 1, 1], [ATTENTION_THREADS, 1, 1], shared
        return [x, NH, B], [ATTENTION_THREADS, 1, 1], shared
    raise KeyError(f"{kernel} is not a tensor-core kernel")
