"""The layernorm kernels, A/B between source trees: residual_layernorm_forward, layernorm_forward and
layernorm_backward (and its partials' sum) at gpt2's, small's and tiny's shapes, each launch alone back to back
(CUDA events, the tensor-core test harness's Gpu.timer), the variants alternating so that clock drift shows; every
variant's outputs compared bit for bit with the first's. A variant is NAME=DIR: layernorm.cuh and the headers
beside it in DIR, compiled alone by NVRTC for the card, launched with this tree's geometry but the variant's own
ln::STAGES (on sm_90 layernorm_backward's staged shared bytes, which a kernel without a staged path ignores) and
ln::MAX_BLOCKS (its grid and partials' rows).
    python bench/experiments/layernorm_ab.py base=OLD_DIR new=coppelius/kernels/cuda
(on an sm_90 card, from the repository root; COPPELIUS_TC_CUBIN=this tree's cubin saves the harness a compile)"""
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "gpu"), str(ROOT)]
import test_tensor_cores_gpu as tc  # noqa: E402
from coppelius.formats import geometry  # noqa: E402
from coppelius.formats.geometry import layernorm_backward_blocks  # noqa: E402
from coppelius.realize import nvrtc  # noqa: E402

SHAPES = {"gpt2": (32768, 768), "small": (16384, 384), "tiny": (512, 64)}  # (N = B T, C)
KERNELS = ("residual_layernorm_forward", "layernorm_forward", "layernorm_backward", "layernorm_backward_weight")


def build(gpu, path: str) -> tuple[dict, dict]:
    """A variant's functions, DIR's layernorm.cuh compiled for the card, and the geometry constants its launches follow:
    its backward's staged batches (ln::STAGES: the shared bytes) and most blocks (ln::MAX_BLOCKS: the grid)."""
    headers = tuple((h.name, h.read_bytes()) for h in sorted(Path(path).glob("*.cuh")))
    cubin, _ = nvrtc._compile(gpu.arch, b'#include "layernorm.cuh"\n', headers)
    module = tc._ck(gpu.d.cuModuleLoadData(cubin))
    text = (Path(path) / "layernorm.cuh").read_text()
    constants = {f"LAYERNORM_{name}": int(re.search(rf"constexpr int {name} = (\d+);", text).group(1))
                 for name in ("STAGES", "MAX_BLOCKS")}
    return {k: tc._ck(gpu.d.cuModuleGetFunction(module, k.encode())) for k in KERNELS}, constants


def run_shape(gpu, variants: dict, N: int, C: int, rep: int, name: str, want: dict) -> None:
    rng = np.random.default_rng(0)
    h = lambda *s: gpu.put(tc.h16(rng, *s))  # noqa: E731
    inp1, inp2, weight, bias, dout, dinp0 = h(N, C), h(N, C), h(C), h(C), h(N, C), h(N, C)
    residual, out, dinp = gpu.alloc(N * C * 2), gpu.alloc(N * C * 2), gpu.alloc(N * C * 2)
    mean, rstd = gpu.alloc(N * 4), gpu.alloc(N * 4)
    partials, dweight, dbias = gpu.alloc(N * 2 * C * 4), gpu.alloc(C * 2), gpu.alloc(C * 2)  # (up to a block a row)
    args = {"residual_layernorm_forward": {"residual": residual, "out": out, "mean": mean, "rstd": rstd,
                                           "inp1": inp1, "inp2": inp2, "weight": weight, "bias": bias, "N": N, "C": C},
            "layernorm_forward": {"out": out, "mean": mean, "rstd": rstd, "inp": inp1, "weight": weight,
                                  "bias": bias, "N": N, "C": C},
            "layernorm_backward": {"dinp": dinp, "partials": partials, "dout": dout, "inp": inp1, "weight": weight,
                                   "mean": mean, "rstd": rstd, "N": N, "C": C},
            "layernorm_backward_weight": {"dweight": dweight, "dbias": dbias, "partials": partials, "N": N, "C": C}}
    for vname, (functions, constants) in variants.items():
        gpu.fn.update(functions)
        for constant, value in constants.items():
            setattr(geometry, constant, value)
        bytes_moved = {"residual_layernorm_forward": 8 * N * C, "layernorm_forward": 4 * N * C,
                       "layernorm_backward": 8 * N * C,
                       "layernorm_backward_weight": layernorm_backward_blocks(N) * 8 * C}
        go = {k: gpu.prepare(k, a) for k, a in args.items()}
        # outputs: the residual forward's, the plain forward's, the backward's from dinp0 (its mean and rstd)
        go["residual_layernorm_forward"]()
        got = {"residual": gpu.get(residual, np.uint16, N * C), "ln2": gpu.get(out, np.uint16, N * C)}
        go["layernorm_forward"]()
        got |= {"ln1": gpu.get(out, np.uint16, N * C), "mean": gpu.get(mean, np.uint32, N),
                "rstd": gpu.get(rstd, np.uint32, N)}
        tc._ck(gpu.d.cuMemcpyDtoD(dinp, dinp0, N * C * 2))
        go["layernorm_backward"]()
        go["layernorm_backward_weight"]()
        got |= {"dinp": gpu.get(dinp, np.uint16, N * C), "dweight": gpu.get(dweight, np.uint16, C),
                "dbias": gpu.get(dbias, np.uint16, C)}
        if name not in want:
            want[name] = got
        differ = [k for k in got if not np.array_equal(got[k], want[name][k])]
        times = {k: gpu.timer(go[k], reps=50) for k in bytes_moved}
        print(f"{rep} {vname:>8} {name:>5}: " + "  ".join(
            f"{k} {t * 1e3:7.2f} us ({bytes_moved[k] / t / 1e6:5.0f} GB/s)" for k, t in times.items())
            + ("  bits: same as the first" if not differ else f"  BITS DIFFER: {differ}"), flush=True)
    gpu.free_all()


def main(specs: list[str]) -> None:
    gpu = tc.Gpu()
    variants = {name: build(gpu, path) for name, _, path in (spec.partition("=") for spec in specs)}
    want = {}
    for rep in range(2):
        for name, shape in SHAPES.items():
            run_shape(gpu, variants, *shape, rep, name, want)


if __name__ == "__main__":
    main(sys.argv[1:])
