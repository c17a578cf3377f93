"""crossentropy_forward_backward at gpt2's lm head (N 32768, Vp 50304) with fewer blocks an SM: dynamic shared
memory the kernel does not use, so that the rows in flight (100 KB each) fit in L2 and the backward's second pass
over a row reads it there, not from DRAM. Each launch alone back to back (CUDA events, the tensor-core test
harness's Gpu.timer); the shared bytes per launch, then ms and the bytes' rate (a read, a read, a write).
    python bench/experiments/crossentropy_occupancy.py X.cubin   (sm_90 card, root)"""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "gpu")]
import test_tensor_cores_gpu as tc  # noqa: E402

N, V, Vp = 32768, 50257, 50304


def main(cubin: str) -> None:
    gpu = tc.Gpu(Path(cubin).read_bytes())
    name = "crossentropy_forward_backward"  # not among the harness's tensor-core kernels
    gpu.fn[name] = tc._ck(gpu.d.cuModuleGetFunction(gpu.module, name.encode()))
    rng = np.random.default_rng(0)
    logits, dlogits = gpu.put(tc.h16_timing(rng, N, Vp, scale=2.0)), gpu.alloc(N * Vp * 2)
    losses, targets = gpu.alloc(N * 4), gpu.put(rng.integers(0, V, N).astype(np.int32))
    args = {"losses": losses, "dlogits": dlogits, "logits": logits, "targets": targets, "N": N, "V": V, "Vp": Vp,
            "scale": 1.0 / N}
    plain = tc.geometry
    for rep in range(2):
        for shared in (0, 20 * 1024, 32 * 1024, 44 * 1024, 56 * 1024, 75 * 1024, 112 * 1024):
            tc.geometry = lambda k, s, a: (lambda g: (g[0], g[1], g[2] + shared))(plain(k, s, a))
            ms = gpu.timer(gpu.prepare(name, args), reps=20)
            print(f"{rep} shared {shared // 1024:>3} KiB: {ms:.4f} ms, "
                  f"{3 * N * Vp * 2 / ms / 1e6:.0f} GB/s", flush=True)
    tc.geometry = plain


if __name__ == "__main__":
    main(sys.argv[1])
