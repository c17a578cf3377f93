"""gpt2's lm head and loss (N 32768, C 768, Vp 50304, V 50257), the pair a training step launches, two ways: main's
matmul_forward + crossentropy_forward_backward (the loss reads the logits twice) against matmul_forward_stats +
crossentropy_forward_backward_stats (the matmul's epilogue leaves each row's softmax statistics a 256-column tile,
the loss reads the logits once). Each launch alone back to back (CUDA events, the tensor-core test harness's
Gpu.timer), in place as the plan has it (dlogits over logits); then the two pairs' losses and first ROWS rows of
dlogits from the same inputs, compared (the statistics' sums are added in another order: the bits may differ).
    python bench/experiments/lm_head_stats_ab.py [X.cubin]   (sm_90 card, repository root)"""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "gpu"), str(ROOT)]
import test_tensor_cores_gpu as tc  # noqa: E402
from coppelius.formats.geometry import stats_width  # noqa: E402
from coppelius.kernels import reference as ref  # noqa: E402

N, C, V, Vp = 32768, 768, 50257, 50304
ROWS = 256
LOSSES = ("crossentropy_forward_backward", "crossentropy_forward_backward_stats")


def worst_rows(gpu, head_args: dict, stats: int, width: int, targets, results: dict, loss_rel, count: int = 3):
    """The rows whose two losses differ most: each against float64 from its logits, and the statistics' parts that
    the float64 ones of those logits do not match."""
    parts = -(-Vp // width)
    logits = gpu.alloc(N * Vp * 2)
    gpu.launch("matmul_forward", head_args | {"out": logits})
    got = gpu.get(stats, np.float32, N * parts * 2).reshape(N, parts, 2)
    for n in np.argsort(loss_rel)[::-1][:count]:
        row = np.empty(Vp, np.float16)
        tc._ck(gpu.d.cuMemcpyDtoH(row.ctypes.data, logits + int(n) * Vp * 2, Vp * 2))
        x = row[:V].astype(np.float64)
        m = x.max()
        want = ref.softmax_parts(row[None].astype(np.float64), V, width)[0]
        bad = [(j, tuple(got[n, j]), tuple(want[j])) for j in range(parts)
               if got[n, j, 0] != want[j, 0] or abs(got[n, j, 1] - want[j, 1]) > 1e-5 * want[j, 1]]
        loss = m + np.log(np.exp(x - m).sum()) - x[targets[n]]
        print(f"row {n}: losses main {results['main'][0][n]:.6f} stats {results['stats'][0][n]:.6f} float64 "
              f"{loss:.6f}; max {m:.4f}; parts off {len(bad)}: {bad[:3]}", flush=True)


def main(cubin: str | None) -> None:
    gpu = tc.Gpu(Path(cubin).read_bytes() if cubin else None)
    for name in LOSSES:  # not among the harness's tensor-core kernels
        gpu.fn[name] = tc._ck(gpu.d.cuModuleGetFunction(gpu.module, name.encode()))
    sc = {"N": N, "C": C, "OC": Vp}
    width = stats_width(sc, gpu.arch)
    rng = np.random.default_rng(0)
    inp, weight = gpu.put(tc.h16(rng, N, C)), gpu.put(tc.h16(rng, Vp, C, scale=0.1))
    logits, stats = gpu.alloc(N * Vp * 2), gpu.alloc(N * -(-Vp // width) * 8)
    targets_host = rng.integers(0, V, N).astype(np.int32)
    losses, targets = gpu.alloc(N * 4), gpu.put(targets_host)
    head = {"matmul_forward": {"out": logits, "inp": inp, "weight": weight, "bias": None, **sc},
            "matmul_forward_stats": {"out": logits, "stats": stats, "inp": inp, "weight": weight, **sc, "V": V,
                                     "width": width}}
    loss = {"losses": losses, "dlogits": logits, "logits": logits, "targets": targets, "N": N, "V": V, "Vp": Vp,
            "scale": 1.0 / N}
    pairs = {"main": ("matmul_forward", LOSSES[0], loss), "stats": ("matmul_forward_stats", LOSSES[1],
                                                                     loss | {"stats": stats, "width": width})}
    results = {}
    for name, (mm, ce, ce_args) in pairs.items():
        gpu.launch(mm, head[mm])
        gpu.launch(ce, ce_args)
        gpu.sync()
        results[name] = (gpu.get(losses, np.float32, N), gpu.get(logits, np.float16, ROWS * Vp).astype(np.float64))
    loss_rel = np.abs(results["stats"][0] - results["main"][0]) / np.abs(results["main"][0])
    worst_rows(gpu, head["matmul_forward"], stats, width, targets_host, results, loss_rel)
    print(f"losses: max rel {loss_rel.max():.2e}, mean {results['main'][0].mean():.6f} / "
          f"{results['stats'][0].mean():.6f}; dlogits (first {ROWS} rows): max abs "
          f"{np.abs(results['stats'][1] - results['main'][1]).max():.2e} (max |dlogit| "
          f"{np.abs(results['main'][1]).max():.2e})", flush=True)
    for rep in range(2):
        line = []
        for name, (mm, ce, ce_args) in pairs.items():
            t_mm = gpu.timer(gpu.prepare(mm, head[mm]), reps=10)
            gpu.launch(mm, head[mm])  # the statistics of these logits, before the loss overwrites them
            t_ce = gpu.timer(gpu.prepare(ce, ce_args), reps=10)
            line.append(f"{name}: {mm} {t_mm:.4f} + {ce} {t_ce:.4f} = {t_mm + t_ce:.4f} ms")
        print(f"{rep} " + "; ".join(line), flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
