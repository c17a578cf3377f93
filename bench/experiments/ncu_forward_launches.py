"""One launch each of the sm_90a forward matmuls at small's and gpt2's shapes (small's qkv and fc at K 384, its fc proj
at K 1536; gpt2's qkv, fc proj and fc), for Nsight Compute's counters; with a second argument each is also timed
alone (CUDA events, the tensor-core test harness's Gpu.timer):
    ncu --metrics lts__throughput.avg.pct_of_peak_sustained_elapsed,... -k regex:matmul \
        python3 bench/experiments/ncu_forward_launches.py k.cubin
    python3 bench/experiments/ncu_forward_launches.py k.cubin time
The counters of 2026-12-04 (L2 30-43% of its peak at every shape; ncu's source view of small's qkv) are in
docs/notes/gpu-speed.md, twenty-ninth session."""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "gpu")]
import test_tensor_cores_gpu as tc  # noqa: E402

SHAPES = [("matmul_forward", (16384, 384, 1152)), ("matmul_forward_gelu", (16384, 384, 1536)),
          ("matmul_forward", (16384, 1536, 384)), ("matmul_forward", (32768, 768, 2304)),
          ("matmul_forward", (32768, 3072, 768)), ("matmul_forward_gelu", (32768, 768, 3072))]  # (N, C, OC)


def main(cubin: str, timed: bool) -> None:
    gpu, rng = tc.Gpu(Path(cubin).read_bytes()), np.random.default_rng(0)
    for kernel, (N, C, OC) in SHAPES:
        args = {"out": gpu.alloc(N * OC * 2), "inp": gpu.put(tc.h16_timing(rng, N, C)),
                "weight": gpu.put(tc.h16_timing(rng, OC, C)), "bias": gpu.put(tc.h16_timing(rng, OC)),
                "N": N, "C": C, "OC": OC}
        if kernel == "matmul_forward_gelu":  # (its outputs: gelu's slope and value)
            args["slope"], args["out_gelu"] = args.pop("out"), gpu.alloc(N * OC * 2)
        go = gpu.prepare(kernel, args)
        go()
        gpu.sync()
        if timed:
            print(f"{kernel} {N} x {C} -> {OC}: {gpu.timer(go, reps=50) * 1000:.1f} us", flush=True)
        gpu.free_all()


if __name__ == "__main__":
    main(sys.argv[1], len(sys.argv) > 2)
