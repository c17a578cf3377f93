"""The sm_90a persistent matmul's cost a tile, by fit and by ablation: matmul_forward at Nn = 2304 columns (gpt2's
qkv), M = 16384 and 32768 rows (9 and 18 128x256 tiles a block) and K = 256 .. 3072, each cubin's launch alone back
to back (CUDA events, the tensor-core test harness's Gpu.timer); then, per cubin, the least-squares fit of the time
to a + b (k-tiles a block) + c (tiles a block): b is the main loop's cost a k-tile, c the rest of a tile's (its bias
prologue, the drain of its last products, its epilogue, the pipeline's refill). Cubins built with
matmul_tile_ablation.patch applied to 9484110, the tree it was measured on (HOP_ABLATE 1: no epilogue, 2: no bias,
4: the staging but no finishers, 8: the finishers without their global stores; timings only, the outputs are garbage)
tell the parts of c apart:
    git worktree add /tmp/abl 9484110 && git -C /tmp/abl apply $PWD/bench/experiments/matmul_tile_ablation.patch
    SOURCES=/tmp/abl/coppelius/kernels/cuda python bench/experiments/build_variants.py OUT matmul_hopper.cuh \
        HOP_ABLATE 0 1 2 3
    python bench/experiments/matmul_tile_cost.py main.cubin OUT/HOP_ABLATE-1.cubin ...   (sm_90 card)"""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "gpu")]
import test_tensor_cores_gpu as tc  # noqa: E402

NN, BLOCKS = 2304, 132
SHAPES = [(M, K) for M in (16384, 32768) for K in (256, 384, 768, 1536, 3072)]


def main(paths: list[str]) -> None:
    gpus = [(Path(p).stem, tc.Gpu(Path(p).read_bytes())) for p in paths]
    times = {stem: {} for stem, _ in gpus}
    for M, K in SHAPES:
        rng = np.random.default_rng(0)
        x, w, bias = tc.h16_timing(rng, M, K), tc.h16_timing(rng, NN, K), tc.h16_timing(rng, NN)
        for _ in range(2):
            for stem, gpu in gpus:
                go = gpu.prepare("matmul_forward", {"out": gpu.alloc(M * NN * 2), "inp": gpu.put(x),
                                                    "weight": gpu.put(w), "bias": gpu.put(bias), "N": M, "C": K,
                                                    "OC": NN})
                us = gpu.timer(go, reps=30) * 1000
                times[stem][M, K] = min(us, times[stem].get((M, K), us))
                gpu.free_all()
    for stem, by_shape in times.items():
        per_block = {M: -(-(M // 128) * (NN // 256) // BLOCKS) for M, _ in SHAPES}  # the busiest block's tiles
        rows = np.array([[1.0, per_block[M] * (K // 64), per_block[M]] for M, K in SHAPES])
        (a, b, c), *_ = np.linalg.lstsq(rows, np.array([by_shape[s] for s in SHAPES]), rcond=None)
        print(f"{stem}: " + "  ".join(f"{M}x{K} {by_shape[M, K]:.1f}" for M, K in SHAPES)
              + f" us | fit: {a:.1f} us + {b * 1000:.0f} ns a k-tile + {c * 1000:.0f} ns a tile", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
