"""Is a persistent sm_90a matmul bound by its SMs or by something they share (L2, memory, power)? Each launch timed
alone (CUDA events) with its persistent grid cut to G blocks (one an SM) for G = 132 .. 33, the SM clock sampled
over the run (bench/clocks.py): where the time grows as 132 / G, each SM runs at its own rate; where it grows
slower, the SMs shared something that bounds them at the full grid. Forty-fifth session: small's forwards run at
~2.9 TFLOP/s an SM in the step, its weight gradients at ~5 on 36-48 SMs
(bench/results/matmul_sm_scaling-2026-12-06-h100.txt).
    python bench/experiments/matmul_sm_scaling.py [LABEL [G ...]]    (sm_90 card, root; this tree's kernels)
LABEL: only the launches whose label holds it; G: only those grids (e.g. under ncu, `-k regex:matmul -c 2`)."""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "gpu"), str(ROOT / "bench" / "experiments"), str(ROOT / "bench")]
import test_tensor_cores_gpu as tc  # noqa: E402
import matmul_forward_ab as ab  # noqa: E402
import clocks  # noqa: E402

SHAPES = [("matmul_forward", "small qkv (ping-pong, K 384)", (16384, 384, 1152)),
          ("matmul_forward", "small fc, plain (128x256, K 384)", (16384, 384, 1536)),
          ("matmul_forward_gelu", "small fc gelu", (16384, 384, 1536)),
          ("matmul_forward", "small fc proj (ping-pong, K 1536)", (16384, 1536, 384)),
          ("matmul_backward_input", "small qkv dinp (ping-pong, K 1152)", (16384, 384, 1152)),
          ("matmul_forward", "gpt2 fc proj (128x256, K 3072)", (32768, 3072, 768))]
GRIDS = (132, 99, 66, 33)


def main(only: str = "", grids: tuple = GRIDS) -> None:
    with clocks.ClockWatch(interval_ms=20) as watch:
        run(tc.Gpu(), only, grids)
    print(clocks.line(watch.summary))


def run(gpu, only: str, grids: tuple) -> None:
    plan_geometry = tc.geometry
    for kernel, label, (N, C, OC) in (shape for shape in SHAPES if only in shape[1]):
        rng = np.random.default_rng(0)
        operands = {"x": tc.h16_timing(rng, N, C), "w": tc.h16_timing(rng, OC, C), "bias": tc.h16_timing(rng, OC),
                    "g": tc.h16_timing(rng, N, OC)}
        flops, base = 2 * N * C * OC, None
        for g in grids:
            tc.geometry = lambda k, s, arch, g=g: ([g, 1, 1], *plan_geometry(k, s, arch)[1:])
            args, _ = ab.arguments(gpu, kernel, label, operands, N, C, OC)
            go = gpu.prepare(kernel, args)
            ms = gpu.timer(go, reps=200)
            gpu.free_all()
            base = base or ms
            scaled = ("" if g == grids[0] else
                      f"  (x{ms / base:4.2f} the first grid's time, x{grids[0] / g:4.2f} its SMs)")
            print(f"{label:>36} G {g:3d}: {1000 * ms:7.1f} us  {flops / ms / 1e9 / g:5.2f} TFLOP/s an SM{scaled}",
                  flush=True)
        tc.geometry = plan_geometry


if __name__ == "__main__":
    main(*(sys.argv[1:2] or [""]), *([tuple(int(g) for g in sys.argv[2:])] if sys.argv[2:] else []))
