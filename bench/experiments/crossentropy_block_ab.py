"""crossentropy_forward_backward at gpt2's lm head (N 32768, Vp 50304), A/B between source trees and block sizes: a
variant is NAME=DIR[:MACRO=V,...], loss.cuh and the headers beside it in DIR compiled alone by NVRTC for the card
with those macros (CE_THREADS: the block's threads, also the launch's; CE_MIN_BLOCKS, CE_UNROLL where the source
reads them). Each launch alone back to back (CUDA events, the tensor-core test harness's Gpu.timer), the variants
alternating, in place as in the plan; each variant's losses (of one launch apart) and its first ROWS rows of
dlogits against the first's (the sums' order follows the block size, so the bits may differ: the largest differences
are printed).
The macros are bench/experiments/crossentropy_block.patch's (applies to e5255d5): loss.cuh's backward templated on
its block size; copy the kernels to OLD_DIR first, then apply it. Run on the H200, 2026-12-03: every larger block
slower (512 threads 2.37-2.53 ms, 1024 threads 3.28-3.46, against 2.22; bench/results/lm_head_stats-2026-12-03.txt),
so the hypothesis below does not hold; not kept.
    cp -r coppelius/kernels/cuda /tmp/base && git apply bench/experiments/crossentropy_block.patch
    python bench/experiments/crossentropy_block_ab.py base=/tmp/base \
        t512m3=coppelius/kernels/cuda:CE_THREADS=512,CE_MIN_BLOCKS=3 \
        t1024=coppelius/kernels/cuda:CE_THREADS=1024 t1024u8=coppelius/kernels/cuda:CE_THREADS=1024,CE_UNROLL=8
(on an sm_90 card, from the repository root; COPPELIUS_TC_CUBIN=this tree's cubin saves the harness a compile).
Why: 256-thread blocks hold 4-5 rows an SM, 528-660 rows (53-66 MB) in flight, more than L2, so the second pass
rereads much of a row from DRAM; a 1024-thread block an SM keeps the same bytes in flight over 132 rows (13 MB).
ptxas at sm_90a (registers a thread): the patch's 256 threads 56 (main 44: the explicit minimum of 1 block lets it
take more), CE_MIN_BLOCKS=5 48, 512 threads with 3 blocks 40, 1024 threads 56 (UNROLL 8: 64), 1024 with 2 blocks 32
and 110 bytes spilled."""
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "gpu"), str(ROOT)]
import test_tensor_cores_gpu as tc  # noqa: E402
from coppelius.realize import nvrtc  # noqa: E402

N, V, Vp = 32768, 50257, 50304
KERNEL = "crossentropy_forward_backward"
ROWS = 1024  # rows of dlogits compared


def build(gpu, spec: str) -> tuple:
    """A variant's function and block threads."""
    path, _, macros = spec.partition(":")
    defs = dict(m.split("=") for m in macros.split(",") if m)
    headers = tuple((h.name, h.read_bytes()) for h in sorted(Path(path).glob("*.cuh")))
    cubin, _ = nvrtc._compile(gpu.arch, b'#include "loss.cuh"\n', headers, tuple(f"-D{k}={v}" for k, v in defs.items()))
    module = tc._ck(gpu.d.cuModuleLoadData(cubin))
    source = (Path(path) / "loss.cuh").read_text()
    found = re.search(r"constexpr int BACKWARD_THREADS = (\d+);", source)
    threads = int(defs.get("CE_THREADS", found.group(1) if found else 256))
    return tc._ck(gpu.d.cuModuleGetFunction(module, KERNEL.encode())), threads


def main(specs: list[str]) -> None:
    gpu = tc.Gpu()
    variants = {name: build(gpu, rest) for name, _, rest in (s.partition("=") for s in specs)}
    rng = np.random.default_rng(0)
    logits_host = tc.h16_timing(rng, N, Vp, scale=2.0)
    logits, dlogits = gpu.put(logits_host), gpu.alloc(N * Vp * 2)
    losses, targets = gpu.alloc(N * 4), gpu.put(rng.integers(0, V, N).astype(np.int32))
    args = {"losses": losses, "dlogits": dlogits, "logits": logits, "targets": targets, "N": N, "V": V, "Vp": Vp,
            "scale": 1.0 / N}
    plain, first = tc.geometry, None
    for rep in range(2):
        for name, (function, threads) in variants.items():
            gpu.fn[KERNEL] = function
            tc.geometry = lambda k, s, a: (lambda g: (g[0], [threads, 1, 1], g[2]))(plain(k, s, a))
            gpu.write(logits, logits_host)  # the timed launches below wrote their gradients over it
            go = gpu.prepare(KERNEL, args)
            go()  # dlogits apart from logits: the outputs of one launch
            got = (gpu.get(losses, np.float32, N), gpu.get(dlogits, np.float16, ROWS * Vp).astype(np.float32))
            first = first or got
            loss_rel = float(np.max(np.abs(got[0] - first[0]) / np.abs(first[0])))
            dlogit_abs = float(np.max(np.abs(got[1] - first[1])))
            ms = gpu.timer(gpu.prepare(KERNEL, args | {"dlogits": logits}), reps=20)  # in place, as the plan has it
            print(f"{rep} {name:>10} ({threads:4} threads): {ms:.4f} ms, {2 * N * Vp * 2 / ms / 1e6:.0f} GB/s (a read,"
                  f" a write); against the first: losses rel {loss_rel:.2e}, dlogits abs {dlogit_abs:.2e}", flush=True)
    tc.geometry = plain


if __name__ == "__main__":
    main(sys.argv[1:])
