"""One launch of each kernel the gpt2 profile weighs most, at gpt2's shapes, for Nsight Compute to count (sm_90 card,
root; the tensor-core test harness's Gpu, a cubin of this tree's kernels):
    ncu --set full -k regex:"matmul|attention" -o $OUT/report python3 bench/experiments/ncu_launches.py main.cubin
matmul_backward_weight at qkv's shape with dbias and without; matmul_forward at fc's (K 768), fc proj's (K 3072) and
the lm head's (4096 rows); matmul_forward_gelu at fc's; attention_forward then attention_backward (B 32, T 1024).
The counters of 2026-12-02: bench/results/ncu-forward-attention-2026-12-02.txt and the end of
bench/results/weight_gradient_bias-ab-2026-12-02.txt.
    python3 bench/experiments/ncu_launches.py main.cubin forwards [time]
launches only the forwards at small's and gpt2's shapes (FORWARDS), with `time` each also timed alone (CUDA events);
their L2 counters of 2026-12-04: bench/results/ncu_forward_l2-2026-12-04.txt."""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "gpu"), str(ROOT / "bench" / "experiments")]
import test_tensor_cores_gpu as tc  # noqa: E402
import matmul_forward_ab as ab  # noqa: E402


# small's qkv and fc (K 384) and fc proj (K 1536), gpt2's qkv, fc proj (K 3072) and fc: (kernel, (N, C, OC))
FORWARDS = [("matmul_forward", (16384, 384, 1152)), ("matmul_forward_gelu", (16384, 384, 1536)),
            ("matmul_forward", (16384, 1536, 384)), ("matmul_forward", (32768, 768, 2304)),
            ("matmul_forward", (32768, 3072, 768)), ("matmul_forward_gelu", (32768, 768, 3072))]


def launch_forwards(gpu, rng, shapes, timed: bool = False) -> None:
    """One launch of each (kernel, (N, C, OC)) on fresh operands; timed: each also timed alone, printed."""
    for kernel, (N, C, OC) in shapes:
        operands = {"x": tc.h16_timing(rng, N, C), "w": tc.h16_timing(rng, OC, C), "bias": tc.h16_timing(rng, OC)}
        args, _ = ab.arguments(gpu, kernel, kernel, operands, N, C, OC)  # (every one with its bias)
        go = gpu.prepare(kernel, args)
        go()
        gpu.sync()
        if timed:
            print(f"{kernel} {N} x {C} -> {OC}: {gpu.timer(go, reps=50) * 1000:.1f} us", flush=True)
        gpu.free_all()


def main(cubin: str, mode: list[str]) -> None:
    gpu, rng = tc.Gpu(Path(cubin).read_bytes()), np.random.default_rng(0)
    if mode[:1] == ["forwards"]:
        launch_forwards(gpu, rng, FORWARDS, timed=mode[1:] == ["time"])
        return
    N, C, OC = 32768, 768, 2304
    dout, inp = gpu.put(tc.h16_timing(rng, N, OC)), gpu.put(tc.h16_timing(rng, N, C))
    for dbias in (gpu.alloc(OC * 2), None):
        gpu.launch("matmul_backward_weight", {"dweight": gpu.alloc(OC * C * 2), "dbias": dbias, "dout": dout,
                                              "inp": inp, "N": N, "C": C, "OC": OC, "accumulate": 0})
    gpu.sync()
    gpu.free_all()
    launch_forwards(gpu, rng, [("matmul_forward", (32768, 768, 3072)), ("matmul_forward", (32768, 3072, 768)),
                               ("matmul_forward", (4096, 768, 50304)), ("matmul_forward_gelu", (32768, 768, 3072))])
    B, T, C, NH = 32, 1024, 768, 12
    qkv, dout = gpu.put(tc.h16_timing(rng, B * T, 3 * C)), gpu.put(tc.h16_timing(rng, B * T, C))
    out, lse, dqkv = gpu.alloc(B * T * C * 2), gpu.alloc(B * NH * T * 4), gpu.alloc(B * T * 3 * C * 2)
    sizes = {"B": B, "T": T, "C": C, "NH": NH}
    gpu.launch("attention_forward", {"out": out, "lse": lse, "qkv": qkv, **sizes})
    gpu.launch("attention_backward", {"dqkv": dqkv, "dout": dout, "qkv": qkv, "out": out, "lse": lse, **sizes})
    gpu.sync()
    print("launched", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
