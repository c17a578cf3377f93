"""sm_90a forwards with fewer 128x256 tiles than a wave: the wide tiles (this tree's geometry: at least
WIDE_MIN_TILES, one block a tile) against the 128x128 / 64x64 tiles the geometry took below WIDE_TILES before.
One cubin, two geometries; each launch alone back to back (CUDA events, the tensor-core harness's Gpu.timer); then
whether the two launches' outputs are equal to within fp16 rounding (different tiles sum k in another order).
    python bench/experiments/wide_threshold_ab.py tree.cubin   (sm_90 card, repository root)"""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "gpu"), str(ROOT)]
import test_tensor_cores_gpu as tc  # noqa: E402
from coppelius.formats import geometry as geo  # noqa: E402

# (label, kernel, (N, C, OC)): wide tiles = ceil(M / 128) ceil(Nn / 256)
SHAPES = [("small lm head fwd (128 tiles)", "matmul_forward", (16384, 384, 256)),
          ("99 tiles, K 384", "matmul_forward", (12672, 384, 256)),
          ("66 tiles, K 384", "matmul_forward", (8448, 384, 256)),
          ("33 tiles, K 384", "matmul_forward", (4224, 384, 256)),
          ("128 tiles, K 768", "matmul_forward", (8192, 768, 512)),
          ("66 tiles, K 768", "matmul_forward", (8448, 768, 256)),
          ("71 tiles ragged", "matmul_forward", (9000, 136, 200)),
          ("small lm head dinp-like (128 tiles, K 256)", "matmul_backward_input", (16384, 256, 256))]


def main(path: str) -> None:
    gpu = tc.Gpu(Path(path).read_bytes())
    for rep in range(2):
        for label, kernel, (N, C, OC) in SHAPES:
            rng = np.random.default_rng(0)
            x, w, b = tc.h16_timing(rng, N, C), tc.h16_timing(rng, OC, C), tc.h16_timing(rng, OC)
            g = tc.h16_timing(rng, N, OC)
            if kernel == "matmul_forward":
                args, out, count = {"out": gpu.alloc(N * OC * 2), "inp": gpu.put(x), "weight": gpu.put(w),
                                    "bias": gpu.put(b), "N": N, "C": C, "OC": OC}, "out", N * OC
            else:
                args, out, count = {"dinp": gpu.alloc(N * C * 2), "dout": gpu.put(g), "weight": gpu.put(w),
                                    "N": N, "C": C, "OC": OC}, "dinp", N * C
            row, outs = [], []
            for name, least in (("wide", geo.WIDE_MIN_TILES), ("before", geo.WIDE_TILES)):
                saved, geo.WIDE_MIN_TILES = geo.WIDE_MIN_TILES, least
                grid = tc.geometry(kernel, {"N": N, "C": C, "OC": OC}, gpu.arch)[0][0]
                go = gpu.prepare(kernel, args)
                geo.WIDE_MIN_TILES = saved
                ms = gpu.timer(go, reps=30)
                row.append(f"{name} {ms * 1000:.1f} us ({2 * N * C * OC / ms / 1e9:.0f} TF/s, {grid} blocks)")
                if rep == 0:
                    gpu.poison(args[out], count * 2)
                    go()
                    gpu.sync()
                    outs.append(gpu.get(args[out], np.float16, count).astype(np.float32))
            gpu.free_all()
            diff = f"  max |wide - before| {np.abs(outs[0] - outs[1]).max():.3g}" if outs else ""
            print(f"{rep} {label:>42}: " + "  ".join(row) + diff, flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
