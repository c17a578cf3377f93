"""The sm_90a matmuls' epilogues, A/B between cubins: each launch alone back to back (CUDA events, the tensor-core
test harness's Gpu.timer), at gpt2's and small's fc shapes, the cubins alternating so that clock drift shows:
matmul_forward against matmul_forward_gelu (and gelu_forward alone), matmul_backward_input then gelu_backward (the
pair the fused kernel replaces) against matmul_backward_input_gelu.
    python bench/experiments/gelu_epilogues.py A.cubin B.cubin ...     (on an sm_90 card, from the repository root)
A cubin of this tree: python -c "from coppelius.realize.nvrtc import compile_cubin;
    open('X.cubin', 'wb').write(compile_cubin('sm_90')[0])". An argument ptx:sm_86 times this tree's PTX for sm_86
JIT-compiled for the card, with sm_86's geometry (its 128x128 mma.sync tiles at these shapes)."""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "gpu")]
import test_tensor_cores_gpu as tc  # noqa: E402

SHAPES = {"gpt2": (32768, 768, 3072), "small": (16384, 384, 1536)}  # (N, C, 4C): the fc layer


def time_epilogues(gpu, N: int, C: int, OC: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    inp, weight, bias = (gpu.put(tc.h16_timing(rng, *shape)) for shape in ((N, C), (OC, C), (OC,)))
    fch, fch_gelu = gpu.alloc(N * OC * 2), gpu.alloc(N * OC * 2)
    dout, w_proj, dfch = gpu.put(tc.h16_timing(rng, N, C)), gpu.put(tc.h16_timing(rng, C, OC)), gpu.alloc(N * OC * 2)
    fc, proj = {"N": N, "C": C, "OC": OC}, {"N": N, "C": OC, "OC": C}  # the fc layer; the fc projection's
    plain = gpu.prepare("matmul_forward", {"out": fch, "inp": inp, "weight": weight, "bias": bias, **fc})
    fused = gpu.prepare("matmul_forward_gelu", {"slope": fch, "out_gelu": fch_gelu, "inp": inp, "weight": weight,
                                                "bias": bias, **fc})
    gelu = gpu.prepare("gelu_forward", {"out": fch_gelu, "inp": fch, "N": N * OC})
    backward = gpu.prepare("matmul_backward_input", {"dinp": dfch, "dout": dout, "weight": w_proj, **proj})
    gelu_backward = gpu.prepare("gelu_backward", {"dinp": dfch, "slope": fch, "dout": dfch, "N": N * OC})
    backward_gelu = gpu.prepare("matmul_backward_input_gelu", {"dinp": dfch, "dout": dout, "weight": w_proj,
                                                               "slope": fch, **proj})
    times = {"forward": gpu.timer(plain, reps=50), "forward_gelu": gpu.timer(fused, reps=50),
             "gelu": gpu.timer(gelu, reps=50), "backward_input": gpu.timer(backward, reps=50),
             "backward_pair": gpu.timer(lambda: (backward(), gelu_backward()), reps=50),
             "backward_input_gelu": gpu.timer(backward_gelu, reps=50)}
    gpu.free_all()
    return times


def main(cubins: list[str]) -> None:
    gpus = {path: tc.Gpu(tc.compile_ptx(path[4:]), arch=path[4:]) if path.startswith("ptx:")
            else tc.Gpu(Path(path).read_bytes()) for path in cubins}
    for rep in range(2):
        for path, gpu in gpus.items():
            for name, shape in SHAPES.items():
                t = time_epilogues(gpu, *shape)
                print(f"{rep} {Path(path).stem:>12} {name:>5}: " + "  ".join(f"{k} {v:.4f}" for k, v in t.items()),
                      flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
