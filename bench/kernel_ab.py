"""The tensor-core kernels beside PyTorch's, at the models' shapes, in one process on one card.

For each matmul of gpt2-124m, small and tiny (their N, C, OC at full batch): forward (with bias), input gradient
and weight gradient (with dbias); for their attention: forward and backward. Coppelius's kernels run from this
tree's cubin (NVRTC for the card) and from any `--cubin NAME=PATH` given: cubins built beforehand for this tree's
launch geometry (formats/geometry.py), which is how kernel variants are A/B'd in one device call (a cubin whose
kernels want more shared memory than this tree's geometry gives them runs past it: CUDA_ERROR_ILLEGAL_ADDRESS).
They are launched with the plan's geometry by the GPU tests' driver-API harness (tests/gpu/test_tensor_cores_gpu.py).
The peer is PyTorch on the same card: torch.addmm / matmul on fp16 (cuBLAS) and scaled_dot_product_attention with
is_causal (its flash kernel; backward = forward and backward together minus forward). Every time is the mean of 20 calls
between CUDA events after 3 warm-up calls. Prints a table (ms, TFLOP/s, PyTorch's time over this tree's: above 1
is faster than the peer) and writes bench/results/kernels-DATE.json.
  python bench/kernel_ab.py [--cubin NAME=PATH ...] [--out DIR]
"""
import argparse
import datetime
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "gpu"))
TREE = "this tree"


def _torch_ms(fn, reps: int = 20, warmup: int = 3) -> float:
    import torch
    for _ in range(warmup):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / reps


def peer_matmul(N: int, C: int, OC: int) -> dict:
    import torch
    half = dict(device="cuda", dtype=torch.float16)
    inp, weight = torch.randn(N, C, **half), torch.randn(OC, C, **half) * 0.05
    bias, dout = torch.randn(OC, **half), torch.randn(N, OC, **half) * 0.05
    return {"fwd": _torch_ms(lambda: torch.addmm(bias, inp, weight.t())),
            "bwd_in": _torch_ms(lambda: dout @ weight),
            "bwd_w": _torch_ms(lambda: dout.t() @ inp)}


def peer_attention(B: int, T: int, C: int, NH: int) -> dict:
    import torch
    import torch.nn.functional as F
    q, k, v = (torch.randn(B, NH, T, C // NH, device="cuda", dtype=torch.float16, requires_grad=True)
               for _ in range(3))
    dout = torch.randn(B, NH, T, C // NH, device="cuda", dtype=torch.float16)
    forward = _torch_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    both = _torch_ms(lambda: torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                                 (q, k, v), dout))
    return {"fwd": forward, "bwd": both - forward}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cubin", action="append", default=[], metavar="NAME=PATH",
                        help="another cubin of the tensor-core kernels, built for this tree's launch geometry")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    args = parser.parse_args()
    try:
        import torch
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        import test_tensor_cores_gpu as harness
    except Exception as e:  # noqa: BLE001 (any reason the card or a package is missing)
        print(f"bench/kernel_ab.py: needs a CUDA device with PyTorch and cuda-bindings ({e}); "
              f"run it on the GPU machine")
        return 2
    variants = {}
    for item in args.cubin:
        name, _, path = item.partition("=")
        if not name or not Path(path).is_file():
            print(f"bench/kernel_ab.py: --cubin {item!r}: give NAME=PATH of an existing cubin file")
            return 2
        variants[name] = Path(path).read_bytes()
    gpus = {TREE: harness.Gpu(), **{name: harness.Gpu(cubin) for name, cubin in variants.items()}}
    device = gpus[TREE].name
    rng = np.random.default_rng(1)
    rows = []
    for label, shape in harness.MODEL_MATMULS.items():
        times = {name: harness.time_matmul(g, rng, *shape) for name, g in gpus.items()}
        times["pytorch"] = peer_matmul(*shape)
        flop = harness.matmul_flops(*shape)
        rows += [{"shape": label, "dims": shape, "op": op, "flop": flop, "ms": {n: t[op] for n, t in times.items()}}
                 for op in ("fwd", "bwd_in", "bwd_w")]
    for label, shape in harness.MODEL_ATTENTION.items():
        times = {name: harness.time_attention(g, rng, *shape) for name, g in gpus.items()}
        times["pytorch"] = peer_attention(*shape)
        flop = harness.attention_flops(*shape)
        rows += [{"shape": label, "dims": shape, "op": op, "flop": flop * (2.5 if op == "bwd" else 1.0),
                  "ms": {n: t[op] for n, t in times.items()}} for op in ("fwd", "bwd")]
    names = [*gpus, "pytorch"]
    print(f"{device}: ms (TFLOP/s); last column PyTorch's time over this tree's")
    print(f"{'shape':<18}{'op':<8}" + "".join(f"{n:>22}" for n in names) + f"{'peer/tree':>11}")
    for r in rows:
        cells = "".join(f"{r['ms'][n]:>11.4f} ({r['flop'] / r['ms'][n] / 1e9:6.1f})" for n in names)
        print(f"{r['shape']:<18}{r['op']:<8}{cells}{r['ms']['pytorch'] / r['ms'][TREE]:>11.2f}")
    date = datetime.date.today().isoformat()
    out = Path(args.out) / f"kernels-{date}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"device": device, "date": date, "torch": torch.__version__, "variants": names,
                               "rows": rows}, indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
