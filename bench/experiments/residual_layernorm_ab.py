"""matmul_forward_residual_layernorm against the two launches it fuses (matmul_forward, then
residual_layernorm_forward), from one cubin, alone, at small's attention and MLP projections: CUDA events around each
(the tensor-core harness's Gpu.timer), rounds alternating; the bytes each must move at least, as GB/s.
    python bench/experiments/residual_layernorm_ab.py kernels.cubin   (a CUDA card, repository root; AB_ROUNDS, 3;
AB_SHAPES: the shapes by name, comma-separated, default both)"""
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "gpu"), str(ROOT)]
import test_tensor_cores_gpu as tc  # noqa: E402

SHAPES = {"small attn proj": (16384, 384, 384), "small fc proj": (16384, 1536, 384)}  # (N, C, OC)


def operands(g, N: int, C: int, OC: int) -> dict:
    """matmul_forward_residual_layernorm's arguments at (N, C, OC): the inputs drawn from seed 0, the outputs
    allocated."""
    rng = np.random.default_rng(0)
    return {"inp": g.put(tc.h16_timing(rng, N, C)), "weight": g.put(tc.h16(rng, OC, C, scale=0.2)),
            "bias": g.put(tc.h16(rng, OC)), "inp1": g.put(tc.h16_timing(rng, N, OC)),
            "ln_weight": g.put(tc.h16(rng, OC)), "ln_bias": g.put(tc.h16(rng, OC)),
            "residual": g.alloc(N * OC * 2), "out": g.alloc(N * OC * 2), "mean": g.alloc(N * 4),
            "rstd": g.alloc(N * 4), "N": N, "C": C, "OC": OC}


def main(path: str) -> None:
    g = tc.Gpu(Path(path).read_bytes())
    wanted = os.environ.get("AB_SHAPES", ",".join(SHAPES)).split(",")  # e.g. "small fc proj" alone, for ncu
    for label, (N, C, OC) in ((name, SHAPES[name]) for name in wanted):
        a, y = operands(g, N, C, OC), g.alloc(N * OC * 2)
        fused = g.prepare("matmul_forward_residual_layernorm", a)
        matmul = g.prepare("matmul_forward", {"out": y, "inp": a["inp"], "weight": a["weight"], "bias": a["bias"],
                                              "N": N, "C": C, "OC": OC})
        norm = g.prepare("residual_layernorm_forward", {"residual": a["residual"], "out": a["out"], "mean": a["mean"],
                                                        "rstd": a["rstd"], "inp1": a["inp1"], "inp2": y,
                                                        "weight": a["ln_weight"], "bias": a["ln_bias"], "N": N,
                                                        "C": OC})
        least = (N * C + OC * C + 4 * N * OC) * 2  # inp, weight, inp1 read; residual, out written
        for r in range(int(os.environ.get("AB_ROUNDS", 3))):
            t = {"matmul_forward": g.timer(matmul) * 1000, "residual_layernorm_forward": g.timer(norm) * 1000}
            t["both"] = g.timer(lambda: (matmul(), norm())) * 1000
            t["fused"] = g.timer(fused) * 1000
            print(f"{r} {label}: " + "  ".join(f"{k} {v:.1f} us" for k, v in t.items()) +
                  f"  fused/both {t['fused'] / t['both']:.3f}  fused {least / t['fused'] / 1e3:.0f} GB/s of the least")
        g.free_all()


if __name__ == "__main__":
    main(sys.argv[1])
