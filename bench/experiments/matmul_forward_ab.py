"""sm_90a matmuls, A/B between cubins: e.g. e3e51fe's (no ping-pong), this tree's (ping-pong
where hop_pingpong_pays) and one with matmul_pingpong.patch applied to e3e51fe (ping-pong at every K <= 1024; `git
worktree add /tmp/p e3e51fe && git -C /tmp/p apply $PWD/bench/experiments/matmul_pingpong.patch`), each a cubin
built from its tree (docs/notes/gpu-speed.md, eighteenth session); the weight gradients' 192-column tiles
(twenty-sixth session) against 256-column ones; the consumers staggered (thirtieth session). Each launch alone back
to back (CUDA events, the tensor-core test harness's Gpu.timer) at gpt2's and small's shapes with the launches' own
geometry (the same in every build), the builds alternating; then whether the builds' outputs have the same bits on
the same operands.
    python bench/experiments/matmul_forward_ab.py main.cubin tree.cubin   (sm_90 card, root)
AB_LABELS (a regular expression) keeps the launches whose labels it matches."""
import os
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "gpu")]
import test_tensor_cores_gpu as tc  # noqa: E402

# (kernel, label, (N, C, OC)); the lm head without bias, as the plan launches it
SHAPES = [("matmul_forward", "gpt2 qkv", (32768, 768, 2304)), ("matmul_forward", "gpt2 attn proj", (32768, 768, 768)),
          ("matmul_forward", "gpt2 fc proj (K 3072)", (32768, 3072, 768)),
          ("matmul_forward", "gpt2 lm head", (32768, 768, 50304)),
          ("matmul_backward_input", "gpt2 attn proj dinp", (32768, 768, 768)),
          ("matmul_forward", "small qkv", (16384, 384, 1152)), ("matmul_forward", "small attn proj", (16384, 384, 384)),
          ("matmul_forward", "ragged", (2000, 520, 1000)), ("matmul_forward", "ragged ping-pong", (8999, 200, 328)),
          ("matmul_backward_input", "small attn proj dinp", (16384, 384, 384)),
          ("matmul_forward", "small fc proj (K 1536)", (16384, 1536, 384)),
          ("matmul_backward_input", "small qkv dinp (K 1152)", (16384, 384, 1152)),
          ("matmul_backward_input", "small fc dinp (K 1536)", (16384, 384, 1536)),
          ("matmul_backward_weight", "small qkv dw", (16384, 384, 1152)),
          ("matmul_backward_weight", "small attn proj dw", (16384, 384, 384)),
          ("matmul_backward_weight", "small fc dw", (16384, 384, 1536)),
          ("matmul_backward_weight", "small fc proj dw", (16384, 1536, 384)),
          ("matmul_backward_weight", "small lm head dw", (16384, 384, 256)),
          ("matmul_backward_weight", "gpt2 qkv dw", (32768, 768, 2304)),
          ("matmul_backward_weight", "gpt2 attn proj dw", (32768, 768, 768)),
          ("matmul_forward_gelu", "small fc gelu", (16384, 384, 1536)),
          ("matmul_forward_gelu", "gpt2 fc gelu", (32768, 768, 3072)),
          ("matmul_backward_input_gelu", "small fc proj dinp gelu", (16384, 1536, 384)),
          ("matmul_backward_input_gelu", "gpt2 fc proj dinp gelu", (32768, 3072, 768)),
          ("matmul_backward_input", "gpt2 fc dinp", (32768, 768, 3072))]


def arguments(gpu, kernel: str, label: str, operands: dict, N: int, C: int, OC: int) -> tuple[dict, dict]:
    """The launch's arguments on this card's copies of the operands, and its outputs' element counts by name."""
    if kernel == "matmul_forward":
        bias = None if "lm head" in label else gpu.put(operands["bias"])
        return ({"out": gpu.alloc(N * OC * 2), "inp": gpu.put(operands["x"]), "weight": gpu.put(operands["w"]),
                 "bias": bias, "N": N, "C": C, "OC": OC}, {"out": N * OC})
    if kernel == "matmul_forward_gelu":
        return ({"slope": gpu.alloc(N * OC * 2), "out_gelu": gpu.alloc(N * OC * 2), "inp": gpu.put(operands["x"]),
                 "weight": gpu.put(operands["w"]), "bias": gpu.put(operands["bias"]), "N": N, "C": C, "OC": OC},
                {"slope": N * OC, "out_gelu": N * OC})
    if kernel == "matmul_backward_input_gelu":
        return ({"dinp": gpu.alloc(N * C * 2), "dout": gpu.put(operands["g"]), "weight": gpu.put(operands["w"]),
                 "slope": gpu.put(operands["x"]), "N": N, "C": C, "OC": OC}, {"dinp": N * C})
    if kernel == "matmul_backward_weight":
        return ({"dweight": gpu.alloc(OC * C * 2), "dbias": gpu.alloc(OC * 2), "dout": gpu.put(operands["g"]),
                 "inp": gpu.put(operands["x"]), "N": N, "C": C, "OC": OC, "accumulate": 0},
                {"dweight": OC * C, "dbias": OC})
    return ({"dinp": gpu.alloc(N * C * 2), "dout": gpu.put(operands["g"]), "weight": gpu.put(operands["w"]),
             "N": N, "C": C, "OC": OC}, {"dinp": N * C})


def main(paths: list[str]) -> None:
    gpus = [(Path(p).stem, tc.Gpu(Path(p).read_bytes())) for p in paths]
    for rep in range(2):
        for kernel, label, (N, C, OC) in SHAPES:
            if not re.search(os.environ.get("AB_LABELS", ""), label):
                continue
            rng = np.random.default_rng(0)
            operands = {"x": tc.h16_timing(rng, N, C), "w": tc.h16_timing(rng, OC, C), "bias": tc.h16_timing(rng, OC),
                        "g": tc.h16_timing(rng, N, OC)}
            row, outs = [], []
            for stem, gpu in gpus:
                args, counts = arguments(gpu, kernel, label, operands, N, C, OC)
                go = gpu.prepare(kernel, args)
                ms = gpu.timer(go, reps=10 if "lm head" in label else 30)
                row.append(f"{stem} {ms:.4f} ({2 * N * C * OC / ms / 1e9:.0f} TF/s)")
                if rep == 0:
                    for name, count in counts.items():
                        gpu.poison(args[name], count * 2)
                    go()
                    gpu.sync()
                    outs.append(np.concatenate([gpu.get(args[n], np.uint16, c) for n, c in counts.items()]))
                gpu.free_all()
            same = f"  same bits: {all(np.array_equal(outs[0], o) for o in outs[1:])}" if outs else ""
            print(f"{rep} {label:>22}: " + "  ".join(row) + same, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
