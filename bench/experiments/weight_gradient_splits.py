"""sm_90a weight gradients at every split S = 1 .. 16 (one 128 x BN tile a cluster of S blocks, grid tiles x S), to
refit geometry.wide_split_count's cost model (WIDE_BLOCK_K, WIDE_SPLIT_K) after a change of the kernel's speed (the
tenth session's table, docs/notes/gpu-speed.md "v40", was taken on the three-stage ring). Each launch alone back to
back (CUDA events, the tensor-core harness's Gpu.timer), us; the rule's S marked with *, the fastest with <. Then
the least-squares fit of a launch = waves x (a + b K / S + c S) over every row, printed in the model's units (a / b,
c / b) with the S the refitted rule would pick.
    python bench/experiments/weight_gradient_splits.py [cubin]   (sm_90 card, root; the tree's kernels by default)"""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "gpu"), str(ROOT / "bench" / "experiments")]
import test_tensor_cores_gpu as tc  # noqa: E402
from weight_gradient_stream import SHAPES, arguments, operands, prepare  # noqa: E402
from coppelius.formats import geometry as geo  # noqa: E402


def main(cubin: str | None) -> None:
    gpu = tc.Gpu(Path(cubin).read_bytes() if cubin else None)
    rows = []  # (waves, K / S, S, us)
    for name, (N, C, OC) in SHAPES.items():
        if "lm head" in name:
            continue
        dout, inp = operands(np.random.default_rng(0), N, C, OC)
        args = arguments(gpu, dout, inp)
        tiles = geo.weight_gradient_tiles(args, "sm_90")[1]
        rule = geo.wide_split_count(tiles, N)
        times = {}
        for S in range(1, len(geo.WIDE_CLUSTERS) + 1):
            if S > 1 and N < S * geo.WIDE_MIN_K:
                break
            times[S] = gpu.timer(prepare(gpu, "clusters", args, splits=S), reps=20) * 1000
            rows.append((-(-tiles // geo.WIDE_CLUSTERS[S - 1]), N / S, S, times[S]))
        best = min(times, key=times.get)
        print(f"{name:>15} ({tiles} tiles): " + " ".join(
            f"{S}:{t:.1f}{'*' if S == rule else ''}{'<' if S == best else ''}" for S, t in times.items()), flush=True)
        gpu.free_all()
    waves, per_k, splits, us = (np.array(c, dtype=np.float64) for c in zip(*rows))
    design = np.stack([waves, waves * per_k, waves * splits], axis=1)
    (a, b, c), *_ = np.linalg.lstsq(design, us, rcond=None)
    print(f"fit: a = {a:.2f} us, b = {b * 1000:.3f} ns a K, c = {c:.3f} us a split; in units of b: "
          f"WIDE_BLOCK_K ~ {a / b:.0f}, WIDE_SPLIT_K ~ {c / b:.1f}")
    for name, (N, C, OC) in SHAPES.items():
        if "lm head" in name:
            continue
        tiles = geo.weight_gradient_tiles({"N": N, "C": C, "OC": OC}, "sm_90")[1]
        cost = {S: -(-tiles // geo.WIDE_CLUSTERS[S - 1]) * (a + b * N / S + c * S)
                for S in range(1, 17) if S == 1 or N >= S * geo.WIDE_MIN_K}
        print(f"  {name}: refitted rule S = {min(cost, key=cost.get)} (now {geo.wide_split_count(tiles, N)})")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
