"""attention_backward A/B between cubins at small's and gpt2's shapes (with each cubin's forward time first): each
cubin's launch alone, back to back (CUDA events, the tensor-core harness's Gpu.timer), rounds alternating the cubins;
then how many dqkv cells differ from the first cubin's in their bits, the largest difference, and each cubin's
largest error against float64 on two batches (the tests' reference; their tolerance is
test_tensor_cores_gpu.TOL_ATTN_BWD relative to the largest value). The inputs (out, lse) are the first cubin's
forward of the same qkv. Each time is also given as GB/s of the bytes the launch must move at least (attention_bytes):
at small's T = 256 the bytes, not the FLOPs, are the floor (docs/notes/gpu-speed.md, thirty-sixth session).
    [AB_SHAPES=small] python bench/experiments/attention_backward_ab.py before.cubin after.cubin ...   (a CUDA card,
repository root; AB_SHAPES: the shapes to run, by name, comma-separated; default all; AB_ROUNDS: rounds of the
backward, default 3: gpt2's spread on the H100 was ~65 us wide in 3)"""
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "gpu"), str(ROOT)]
import test_tensor_cores_gpu as tc  # noqa: E402
from coppelius.kernels import reference as ref  # noqa: E402

SHAPES = {"small": (64, 256, 384, 6), "gpt2": (32, 1024, 768, 12)}  # (B, T, C, NH)


def attention_bytes(kernel: str, B: int, T: int, C: int, NH: int) -> int:
    """Bytes a launch reads and writes at least, each tensor once: the forward reads qkv and writes out and lse; the
    backward reads qkv, dout, out and lse and writes dqkv."""
    lse = B * NH * T * 4
    halves = 3 * C + C if kernel == "attention_forward" else 3 * C + 2 * C + 3 * C
    return B * T * halves * 2 + lse


def main(paths: list[str]) -> None:
    gpus = [(Path(p).stem, tc.Gpu(Path(p).read_bytes())) for p in paths]
    wanted = os.environ.get("AB_SHAPES", ",".join(SHAPES)).split(",")
    if set(wanted) - set(SHAPES):
        raise SystemExit(f"AB_SHAPES: {','.join(sorted(set(wanted) - set(SHAPES)))} is not one of {', '.join(SHAPES)}")
    for label, (B, T, C, NH) in ((name, SHAPES[name]) for name in wanted):
        rng = np.random.default_rng(0)
        qkv, dout = tc.h16(rng, B, T, 3 * C), tc.h16(rng, B, T, C)
        first = gpus[0][1]
        p_qkv, p_out, p_lse = first.put(qkv), first.alloc(B * T * C * 2), first.alloc(B * NH * T * 4)
        first.launch("attention_forward", {"out": p_out, "lse": p_lse, "qkv": p_qkv, "B": B, "T": T, "C": C, "NH": NH})
        first.sync()
        out, lse = first.get(p_out, np.float16, B * T * C), first.get(p_lse, np.float32, B * NH * T)
        first.free_all()
        forwards, other_bits = {}, {}
        for stem, gpu in gpus:  # the forward too, each cubin's own launch on the same qkv, its bits against the first's
            args = {"out": gpu.alloc(B * T * C * 2), "lse": gpu.alloc(B * NH * T * 4), "qkv": gpu.put(qkv),
                    "B": B, "T": T, "C": C, "NH": NH}
            fwd = gpu.prepare("attention_forward", args)
            forwards[stem] = min(gpu.timer(fwd, reps=20) for _ in range(3)) * 1000
            gpu.sync()
            mine = (gpu.get(args["out"], np.float16, B * T * C), gpu.get(args["lse"], np.float32, B * NH * T))
            other_bits[stem] = sum(int(np.count_nonzero(a.view(np.uint8) != b.view(np.uint8)))
                                   for a, b in zip(mine, (out, lse)))
            gpu.free_all()
        fwd_bytes = attention_bytes("attention_forward", B, T, C, NH)
        print(f"{label} forward: " + "  ".join(f"{stem} {us:.1f} us ({fwd_bytes / us / 1e3:.0f} GB/s,"
                                                f" {other_bits[stem]} bytes of out and lse not the first's)"
                                                for stem, us in forwards.items()))
        runs = []
        for stem, gpu in gpus:
            args = {"dqkv": gpu.alloc(B * T * 3 * C * 2), "dout": gpu.put(dout), "qkv": gpu.put(qkv),
                    "out": gpu.put(out), "lse": gpu.put(lse), "B": B, "T": T, "C": C, "NH": NH}
            runs.append((stem, gpu, args, gpu.prepare("attention_backward", args)))
        times = {stem: [] for stem, *_ in runs}
        for _ in range(int(os.environ.get("AB_ROUNDS", "3"))):
            for stem, gpu, _, go in runs:
                times[stem].append(gpu.timer(go, reps=20) * 1000)
        flop, bwd_bytes = 2.5 * tc.attention_flops(B, T, C, NH), attention_bytes("attention_backward", B, T, C, NH)
        print(f"{label} B={B} T={T} C={C} NH={NH}: " + "  ".join(
            f"{stem} {min(t):.1f}-{max(t):.1f} us, median {np.median(t):.1f} ({flop / min(t) / 1e6:.0f} TF/s, "
            f"{bwd_bytes / min(t) / 1e3:.0f} GB/s)"
            for stem, t in times.items()))
        bs = [0, B - 1]
        want = ref.attention_backward(dout[bs].astype(np.float64), qkv[bs].astype(np.float64),
                                      out.reshape(B, T, C)[bs].astype(np.float64),
                                      lse.reshape(B, NH, T)[bs].astype(np.float64), NH)
        got0 = None
        for stem, gpu, args, go in runs:
            go()
            gpu.sync()
            got = gpu.get(args["dqkv"], np.float16, B * T * 3 * C)
            err = np.abs(got.reshape(B, T, 3 * C)[bs].astype(np.float64) - want).max() / np.abs(want).max()
            line = f"  {stem}: error against float64 {err:.2e} of the largest value"
            if got0 is None:
                got0 = got
            else:
                diff = np.abs(got.astype(np.float64) - got0.astype(np.float64))
                other = np.count_nonzero(got.view(np.uint16) != got0.view(np.uint16))
                line += (f"; cells with other bits than {runs[0][0]}: {other} of {got.size},"
                         f" largest difference {diff.max():.3g}")
            print(line, flush=True)
            gpu.free_all()


if __name__ == "__main__":
    main(sys.argv[1:])
