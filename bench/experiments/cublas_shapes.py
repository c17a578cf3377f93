"""cuBLAS (through PyTorch) at small's and gpt2-124m's matmul shapes, each launch alone back to back (CUDA events,
fp16, the median of 5 runs of 30), with the kernel cuBLAS picks (torch.profiler): what the vendor reaches where
ours sit at 50-60% of the fp16 ceiling (forty-fifth session). Our kernels at the same shapes:
bench/experiments/matmul_forward_ab.py.
    python bench/experiments/cublas_shapes.py [LABEL]    (a CUDA card with PyTorch; LABEL: only the shapes whose
label holds it)"""
import statistics
import sys

import torch

# (label, kind, (N, C, OC)): forward y = x W^T + b (x N x C, W OC x C); dinp = g W (g N x OC); dweight = g^T x
SHAPES = [(f"{model} {name}", kind, shape) for model, n, c in (("small", 16384, 384), ("gpt2", 32768, 768))
          for name, kind, shape in (("qkv", "forward", (n, c, 3 * c)), ("attn proj", "forward", (n, c, c)),
                                    ("fc", "forward", (n, c, 4 * c)), ("fc proj", "forward", (n, 4 * c, c)),
                                    ("qkv dinp", "dinp", (n, c, 3 * c)), ("attn proj dinp", "dinp", (n, c, c)),
                                    ("fc dinp", "dinp", (n, c, 4 * c)), ("fc proj dinp", "dinp", (n, 4 * c, c)),
                                    ("qkv dw", "dweight", (n, c, 3 * c)), ("attn proj dw", "dweight", (n, c, c)),
                                    ("fc dw", "dweight", (n, c, 4 * c)), ("fc proj dw", "dweight", (n, 4 * c, c)))]


def launcher(kind: str, N: int, C: int, OC: int):
    h = dict(device="cuda", dtype=torch.float16)
    x, w, b, g = torch.randn(N, C, **h), torch.randn(OC, C, **h), torch.randn(OC, **h), torch.randn(N, OC, **h)
    if kind == "forward":
        return lambda: torch.addmm(b, x, w.t())
    if kind == "dinp":
        return lambda: g @ w
    return lambda: g.t() @ x


def time_ms(go, reps: int = 30) -> float:
    runs = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            go()
        end.record()
        torch.cuda.synchronize()
        runs.append(start.elapsed_time(end) / reps)
    return statistics.median(runs)


def kernel_names(go) -> str:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        go()
        torch.cuda.synchronize()
    return "; ".join(sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA}))


def main(only: str = "") -> None:
    print(torch.cuda.get_device_name(), torch.__version__, torch.version.cuda)
    for label, kind, (N, C, OC) in (shape for shape in SHAPES if only in shape[0]):
        go = launcher(kind, N, C, OC)
        go()
        ms = time_ms(go)
        print(f"{label:>20}: {1000 * ms:7.1f} us {2 * N * C * OC / ms / 1e9:4.0f} TF/s  {kernel_names(go)[:150]}",
              flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:2])
