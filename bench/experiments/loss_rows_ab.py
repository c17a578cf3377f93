"""The training step's loss (crossentropy_forward_backward, in place as the plan has it) with a block a row against
a warp a row (this tree, loss.cuh: Vp <= WARP_ROW_COLUMNS), A/B between cubins: the first cubin launched with a
block a row (the geometry before the warp rows), the others with this tree's geometry. Each launch alone back to
back (CUDA events, the tensor-core harness's Gpu.timer); then how many losses and dlogits differ from the first
cubin's in their bits.
    python bench/experiments/loss_rows_ab.py before.cubin tree.cubin   (a CUDA card, the repository root)"""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "gpu")]
import test_tensor_cores_gpu as tc  # noqa: E402

SHAPES = [("small b64", 16384, 256, 256), ("tiny b8", 512, 256, 256), ("gpt2 rows (control)", 4096, 50257, 50304)]
tree_geometry = tc.geometry
LOSS = "crossentropy_forward_backward"


def block_a_row(kernel, scalars, arch="any"):
    grid, block, shared = tree_geometry(kernel, scalars, arch)
    return ([max(1, scalars["N"]), 1, 1], block, shared) if kernel.startswith("crossentropy") else (grid, block, shared)


def main(paths: list[str]) -> None:
    gpus = [(Path(p).stem, tc.Gpu(Path(p).read_bytes()), block_a_row if i == 0 else tree_geometry)
            for i, p in enumerate(paths)]
    for _, gpu, _ in gpus:  # the harness loads the tensor-core kernels only
        gpu.fn[LOSS] = tc._ck(gpu.d.cuModuleGetFunction(gpu.module, LOSS.encode()))
    for rep in range(2):
        for label, N, V, Vp in SHAPES:
            rng = np.random.default_rng(0)
            logits = tc.h16(rng, N, Vp, scale=4.0)
            targets = rng.integers(0, V, N, dtype=np.int32)
            row, outs = [], []
            for stem, gpu, geometry in gpus:
                tc.geometry = geometry
                args = {"losses": gpu.alloc(N * 4), "dlogits": gpu.put(logits), "logits": None,
                        "targets": gpu.put(targets), "N": N, "V": V, "Vp": Vp, "scale": np.float32(1.0 / N)}
                args["logits"] = args["dlogits"]  # in place
                go = gpu.prepare(LOSS, args)
                tc.geometry = tree_geometry
                ms = gpu.timer(go, reps=30)  # in place: later launches see dlogits as logits (same work)
                row.append(f"{stem} {ms * 1000:.1f} us")
                if rep == 0:
                    fresh = gpu.put(logits)
                    tc._ck(gpu.d.cuMemcpyDtoD(args["dlogits"], fresh, N * Vp * 2))
                    go()
                    gpu.sync()
                    outs.append(np.concatenate([gpu.get(args["losses"], np.uint32, N).view(np.uint16),
                                                gpu.get(args["dlogits"], np.uint16, N * Vp)]))
                gpu.free_all()
            same = "  cells with other bits than the first: " + ", ".join(
                str(int(np.count_nonzero(o != outs[0]))) for o in outs[1:]) if outs else ""
            print(f"{rep} {label:>20}: " + "  ".join(row) + same, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
