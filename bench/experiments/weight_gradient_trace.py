"""Where an sm_90a weight-gradient block's time goes (mm_hopper_split: the ~10 us a block of fixed cost that the
tenth session's fit found, docs/notes/gpu-speed.md "v40"), from %globaltimer stamps (weight_gradient_trace.patch:
every block's thread 0 and consumer 0's thread 0 stamp its phases into the module global split_trace; the patch
applies to the deeper ring's commit, whose message names it; its stamps on 0646516, the ring before, were the same):
    git worktree add /tmp/t <commit> && git -C /tmp/t apply $PWD/bench/experiments/weight_gradient_trace.patch
    (build /tmp/t's cubin with coppelius.realize.nvrtc.compile_cubin('sm_90', Path('/tmp/t/coppelius/kernels/cuda')))
    python bench/experiments/weight_gradient_trace.py trace.cubin       (sm_90 card)
For each shape, one launch after warm-up: the launch's time (CUDA events, back to back), the blocks' span (first
start to last end, from the stamps), how far apart the blocks start, and the medians over blocks (us) of each phase:
barriers and the ones tile; the producer's tensor maps; until consumer 0's first stage is full; the products; the
two consumers meeting; the partials into shared memory; the first cluster barrier (waiting for the cluster's slowest
block); the reduction through distributed shared memory; the second cluster barrier. The SM clock from clock64
beside %globaltimer over each block's span (%globaltimer ticks in steps of ~0.26 us on the H200). Results:
bench/results/weight_gradient_trace-2026-12-04.txt."""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "gpu"), str(ROOT / "bench" / "experiments")]
import test_tensor_cores_gpu as tc  # noqa: E402
import matmul_forward_ab as ab  # noqa: E402
from matmul_tile_trace import stamped_launch  # noqa: E402
from coppelius.formats.geometry import cluster_size, geometry, grid_blocks  # noqa: E402

STAMPS = 14  # weight_gradient_trace.patch: split_trace[512][14]
# (phase, from stamp, to stamp): 0 entry, 1 barriers ready, 2 maps ready (producer), 3 last copy issued, 13 consumer 0
# starts, 12 its first stage full, 4 its products done, 5 consumers met, 6 partials written, 7 after the first
# cluster barrier, 8 reduction done, 9 after the second; 10 and 11 clock64 at 0 and 9
PHASES = [("init", 0, 1), ("maps", 1, 2), ("first stage", 1, 12), ("products", 12, 4), ("consumers meet", 4, 5),
          ("partials", 5, 6), ("cluster barrier 1", 6, 7), ("reduction", 7, 8), ("cluster barrier 2", 8, 9),
          ("block", 0, 9)]


def main(path: str) -> None:
    gpu = tc.Gpu(Path(path).read_bytes())
    ptr, size = tc._ck(gpu.d.cuModuleGetGlobal(gpu.module, b"split_trace"))
    print(f"== {path}: us, medians over blocks")
    for kernel, label, (N, C, OC) in ab.SHAPES:
        if kernel != "matmul_backward_weight":
            continue
        ms, t = stamped_launch(gpu, kernel, label, (N, C, OC), (ptr, size), reps=30)
        shape = {"N": N, "C": C, "OC": OC, "accumulate": 0}
        blocks = grid_blocks(geometry(kernel, shape, gpu.arch)[0])
        t = t.reshape(-1, STAMPS)[:blocks]
        mhz = np.median((t[:, 11] - t[:, 10]) / (t[:, 9] - t[:, 0]) * 1000)
        span = (t[:, 9].max() - t[:, 0].min()) / 1000
        starts = (t[:, 0].max() - t[:, 0].min()) / 1000
        phases = "; ".join(f"{name} {np.median(t[:, b] - t[:, a]) / 1000:.2f}" for name, a, b in PHASES)
        print(f"{label} ({blocks} blocks, clusters of {cluster_size(kernel, shape, gpu.arch)}): "
              f"{ms * 1000:.1f} us a launch, blocks' span {span:.1f}, starts spread {starts:.2f}, SM clock "
              f"{mhz:.0f} MHz\n  {phases}; products' max {np.max(t[:, 4] - t[:, 12]) / 1000:.2f}", flush=True)
        gpu.free_all()


if __name__ == "__main__":
    main(sys.argv[1])
