"""Launch geometry of the five tensor-core kernels (coppelius/kernels/cuda/matmul.cuh, attention.cuh).

`tensor_core_geometry(kernel, scalars) -> (grid, block, dynamic shared bytes)`, the same on every
arch (sm_86, sm_90, sm_121): the kernels read their tile shape back from blockDim and blockIdx, so
the numbers here and the constants in the .cuh files must agree. Dynamic shared memory is at most
48 KiB (no opt-in attribute needed); the kernels use no static shared memory.

matmuls: a 1-D grid of output tiles. 256 threads with 128x128 tiles (3 stages of 128x32 + 128x32
fp16: 48 KiB) when there are at least MATMUL_BIG_TILES of them; otherwise 128 threads with 64x64
tiles (4 stages: 32 KiB), so that small outputs (a 768x768 weight gradient, the tiny models)
still spread over the card. matmul_backward_weight splits K (matmul.cuh): unless it has
MATMUL_BIG_TILES big tiles without splitting (the lm head), its grid holds S = 2, 4 or 8 blocks per
output tile (split_count: about SPLIT_BLOCKS blocks), 128x128 tiles when that many of them reach
SPLIT_BLOCKS, else 64x64; the grid is always whole clusters of MATMUL_SPLITS blocks (from sm_90 on it
is launched in such clusters).
attention: 128 threads (4 warps). forward: one block per 64 query rows per (head, batch);
backward: two blocks per 64-row tile per (head, batch), one for the keys (dk, dv), one for the
queries (dq). hs = C / NH is padded to HSP in {16, 32, 64, 128}; hs > 128 is not supported.
"""

MATMUL_BIG_TILES = 264  # two waves' worth of blocks on a 132-SM H200; a fixed number, not a device query
MATMUL_SPLITS = 8  # blocks of a matmul_backward_weight cluster, the most per output tile (matmul.cuh: MM_SPLITS)
SPLIT_BLOCKS = 2 * MATMUL_BIG_TILES  # blocks a split weight gradient aims for (four waves of 128x128 tiles)
SHARED_LIMIT = 48 * 1024

ATTENTION_THREADS = 128
ATTENTION_ROWS = 64  # query rows of a forward block / of a backward query block; keys of a backward key block

KERNELS = ("matmul_forward", "matmul_backward_input", "matmul_backward_weight", "attention_forward",
           "attention_backward")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def split_count(tiles: int) -> int:
    """Blocks per output tile of a split weight gradient: the fewest of 1, 2, 4 .. MATMUL_SPLITS that
    give SPLIT_BLOCKS blocks, else MATMUL_SPLITS."""
    splits = 1
    while splits < MATMUL_SPLITS and tiles * splits < SPLIT_BLOCKS:
        splits *= 2
    return splits


def matmul_shape(kernel: str, s: dict) -> tuple[int, int, int]:
    """(M, Nn, K) of the GEMM a matmul kernel computes: out[M, Nn] = sum over K."""
    N, C, OC = int(s["N"]), int(s["C"]), int(s["OC"])
    if kernel == "matmul_forward":
        return N, OC, C
    if kernel == "matmul_backward_input":
        return N, C, OC
    if kernel == "matmul_backward_weight":
        return OC, C, N
    raise KeyError(kernel)


def head_padding(hs: int) -> int:
    """The padded head size HSP the attention kernels instantiate for head size hs."""
    for hsp in (16, 32, 64, 128):
        if hs <= hsp:
            return hsp
    raise ValueError(f"attention head size {hs} > 128 is not supported by the tensor-core kernels")


def attention_shared_bytes(kernel: str, hsp: int) -> int:
    """Dynamic shared bytes of the attention kernels for padded head size hsp (see attention.cuh)."""
    row = hsp * 2  # bytes of one fp16 row
    if kernel == "attention_forward":
        bc = 64 if hsp <= 64 else 32
        return (ATTENTION_ROWS + 2 * 2 * bc) * row  # Q + 2 stages of K and V
    brk = 64 if hsp <= 64 else 16       # key block: query tile
    keys = (2 * ATTENTION_ROWS + 3 * brk) * row + 2 * brk * 4  # K, V, Q, dO, out tiles; lse and D rows
    bcq, stages = (64, 2) if hsp <= 64 else (32, 1)
    queries = (2 * ATTENTION_ROWS + 2 * stages * bcq) * row  # Q, dO; stages of K and V
    return max(keys, queries)


def tensor_core_geometry(kernel: str, scalars: dict) -> tuple[list[int], list[int], int]:
    """(grid, block, dynamic shared bytes) of one of the five tensor-core kernels' launches."""
    if kernel.startswith("matmul_"):
        M, Nn, _ = matmul_shape(kernel, scalars)
        big = _cdiv(M, 128) * _cdiv(Nn, 128)
        big_tile, small_tile = ([256, 1, 1], 3 * (128 + 128) * 32 * 2), ([128, 1, 1], 4 * (64 + 64) * 32 * 2)
        if kernel != "matmul_backward_weight":
            if big >= MATMUL_BIG_TILES:
                return [big, 1, 1], *big_tile
            return [max(1, _cdiv(M, 64) * _cdiv(Nn, 64)), 1, 1], *small_tile
        if big >= MATMUL_BIG_TILES:  # enough tiles: one block each, the grid rounded up to whole clusters
            return [_cdiv(big, MATMUL_SPLITS) * MATMUL_SPLITS, 1, 1], *big_tile
        splits = split_count(big)
        if big * splits >= SPLIT_BLOCKS:
            return [_cdiv(big * splits, MATMUL_SPLITS) * MATMUL_SPLITS, 1, 1], *big_tile
        small = max(1, _cdiv(M, 64) * _cdiv(Nn, 64))
        return [_cdiv(small * split_count(small), MATMUL_SPLITS) * MATMUL_SPLITS, 1, 1], *small_tile
    if kernel in ("attention_forward", "attention_backward"):
        B, T, C, NH = (int(scalars[k]) for k in ("B", "T", "C", "NH"))
        if C % NH:
            raise ValueError(f"C={C} is not a multiple of NH={NH}")
        hsp = head_padding(C // NH)
        tiles = max(1, _cdiv(T, ATTENTION_ROWS))
        x = tiles if kernel == "attention_forward" else 2 * tiles
        shared = attention_shared_bytes(kernel, hsp)
        assert shared <= SHARED_LIMIT
        return [x, NH, B], [ATTENTION_THREADS, 1, 1], shared
    raise KeyError(f"{kernel} is not a tensor-core kernel")
