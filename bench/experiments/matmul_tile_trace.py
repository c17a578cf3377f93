"""Where a persistent sm_90a matmul tile's time goes, from clock64 stamps (matmul_tile_trace.patch, applied to
1bb5e89's kernels: every block's producer and consumers stamp each tile's phases into the module global hop_trace):
    git worktree add /tmp/t 1bb5e89 && git -C /tmp/t apply $PWD/bench/experiments/matmul_tile_trace.patch
    (build /tmp/t's cubin with coppelius.realize.nvrtc.compile_cubin('sm_90', Path('/tmp/t/coppelius/kernels/cuda')))
    python bench/experiments/matmul_tile_trace.py [--plain] trace.cubin [another.cubin ...]     (sm_90 card)
--plain: only the plain (MM_PLAIN) launches. The stamps of 2026-12-04 were taken with the same patch on c53bb7a
(before the bias bits of 4d5313e). Two more builds, each the stamps and one change, applying to c53bb7a and 1bb5e89:
matmul_stagger.patch (c53bb7a): consumer 1 starts two k-tiles after consumer 0 (its per-consumer bias copies take
1 KiB more shared memory: run it with geometry.HOPPER_SHARED raised to match); matmul_solo.patch (1bb5e89; run on
0646516, bench/results/matmul_solo-2026-12-04.txt): consumer 1 leaves at once, so consumer 0's k-tile is one
warpgroup's rate alone (run it with --plain: the gelu finishers would wait for consumer 1). matmul_noload.patch
(98b8315; run on 5d64f9c, bench/results/matmul_noload-2026-12-04.txt): the solo patch and HOP_NOLOAD, the producer
re-announcing the ring's stages without copying after its first fill, so that a k-tile is the tensor pipe's time
alone; build the four cubins of HOP_SOLO x HOP_NOLOAD in {0, 1} (sed the two constexpr lines) and run them with
--plain: whether the loads (L2 to shared) or one warpgroup's issue hold the pair at ~90% and the solo at ~60%.
For each shape, one launch after warm-up: per consumer and tile, the medians over blocks (us at the SM clock, its
rate from the producer's %globaltimer stamps beside its clock64 ones) of the wait for the tile's bias (both consumers
meet: consumers_sync), its products (hop_consume: every k-tile's wgmmas issued and waited on), its epilogue (staging,
then the tensor stores' issue or the finishers' hand-off), and from the epilogue's end to the next tile's start; the
producer's time issuing each tile's k-tiles (its waits on the ring's empty stages inside). A stamp's cost (a clock
read and a global store by one thread) is in the times. The ping-pong path (Nn where hop_pingpong_pays) has no
stamps. Results of 2026-12-04: bench/results/matmul_tile_trace-2026-12-04.txt."""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "gpu"), str(ROOT / "bench" / "experiments")]
import test_tensor_cores_gpu as tc  # noqa: E402
import matmul_forward_ab as ab  # noqa: E402

LABELS = ["small qkv", "small fc gelu", "small qkv dinp (K 1152)", "gpt2 qkv", "gpt2 fc gelu", "gpt2 fc proj (K 3072)"]
TILES = 16  # matmul_tile_trace.patch: HOP_TRACE_TILES


def stamped_launch(gpu, kernel: str, label: str, shape: tuple[int, int, int], stamps, reps: int = 20):
    """(ms a launch back to back, the stamps of one more launch as float64): the launch at shape (N, C, OC) on
    random operands, its module global of int64 stamps (stamps: its address and bytes) zeroed before the last."""
    (N, C, OC), (ptr, size) = shape, stamps
    rng = np.random.default_rng(0)
    operands = {"x": tc.h16_timing(rng, N, C), "w": tc.h16_timing(rng, OC, C), "bias": tc.h16_timing(rng, OC),
                "g": tc.h16_timing(rng, N, OC)}
    args, _ = ab.arguments(gpu, kernel, label, operands, N, C, OC)
    go = gpu.prepare(kernel, args)
    ms = gpu.timer(go, reps=reps)
    tc._ck(gpu.d.cuMemsetD8(int(ptr), 0, size))
    go()
    gpu.sync()
    return ms, gpu.get(int(ptr), np.int64, size // 8).astype(np.float64)


def main(path: str, plain: bool = False) -> None:
    print(f"== {path}")
    gpu = tc.Gpu(Path(path).read_bytes())
    ptr, size = tc._ck(gpu.d.cuModuleGetGlobal(gpu.module, b"hop_trace"))
    for kernel, label, (N, C, OC) in ab.SHAPES:
        if label not in LABELS or (plain and kernel != "matmul_forward"):
            continue
        ms, raw = stamped_launch(gpu, kernel, label, (N, C, OC), (ptr, size))
        raw = raw.reshape(256, 3, TILES, 4)
        blocks = int((raw[:, 0, 0, 1] > 0).sum())  # the blocks with a tile (each one's producer stamps it)
        last = [max(s for s in range(TILES) if raw[b, 0, s, 1] > 0) for b in range(blocks)]
        mhz = np.median([(raw[b, 0, s, 1] - raw[b, 0, 0, 0]) / (raw[b, 0, s, 3] - raw[b, 0, 0, 2]) * 1000
                         for b, s in zip(range(blocks), last) if raw[b, 0, s, 3] > raw[b, 0, 0, 2]] or [np.nan])
        t = raw / mhz  # us (the producer's stamps 2, 3 are ns, not used below)
        if not np.isfinite(mhz) or not (t[:, 1:, 0, 3] > 0).any():
            print(f"{label} ({kernel}): {ms * 1000:.1f} us a launch; no stamps (the ping-pong path)", flush=True)
            gpu.free_all()
            continue
        M, Nn, K = (N, OC, C) if kernel.startswith("matmul_forward") else (N, C, OC)
        tiles = -(-M // 128) * -(-Nn // 256)
        KT = -(-K // 64)
        print(f"{label} ({kernel}, M {M} Nn {Nn} K {K}: {tiles} tiles, {KT} k-tiles each): {ms * 1000:.1f} us a launch;"
              f" SM clock {mhz:.0f} MHz")
        for role in (1, 2):
            rows = []
            for s in range(min(TILES, -(-tiles // blocks))):
                have = [b for b in range(blocks) if t[b, role, s, 3] > 0]
                if not have:
                    continue
                x = t[have, role, s]
                nxt = [t[b, role, s + 1, 0] - t[b, role, s, 3] for b in have
                       if s + 1 < TILES and t[b, role, s + 1, 0] > 0]
                products = np.median(x[:, 2] - x[:, 1])
                rows.append(f"  tile {s}: bias {np.median(x[:, 1] - x[:, 0]):5.2f} products {products:5.2f}"
                            f" ({products / KT:.3f} a k-tile) epilogue {np.median(x[:, 3] - x[:, 2]):5.2f}"
                            + (f" to next {np.median(nxt):5.2f}" if nxt else ""))
            print(f" consumer {role - 1}:")
            print("\n".join(rows))
        lead = [t[b, 2, s, 2] - t[b, 1, s, 2] for b in range(blocks) for s in range(TILES)
                if t[b, 1, s, 2] > 0 and t[b, 2, s, 2] > 0] or [np.nan]
        span = [t[b, 1:, :, 3].max() - t[b, 0, 0, 0] for b in range(blocks) if t[b, 0, 0, 0] > 0]
        prod = [t[b, 0, s, 1] - t[b, 0, s, 0] for b in range(blocks) for s in range(1, TILES) if t[b, 0, s, 1] > 0]
        print(f" consumer 1's products end minus consumer 0's, every tile: median {np.median(lead):.2f} us;"
              f" producer a tile (from the 2nd): median {np.median(prod):.2f} us;"
              f" block span median {np.median(span):.1f}, max {np.max(span):.1f} us", flush=True)
        gpu.free_all()


if __name__ == "__main__":
    plain = "--plain" in sys.argv[1:]
    for cubin in [a for a in sys.argv[1:] if a != "--plain"]:
        main(cubin, plain)
