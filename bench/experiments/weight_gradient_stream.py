"""sm_90a weight gradients, A/B between cubins: one tile a cluster of S blocks (main's kernel and geometry: its rule,
geometry.wide_split_count) against a build with one of the patches beside this file applied, each tried on 2026-12-02
and not kept (docs/notes/gpu-speed.md, seventeenth and eighteenth sessions): weight_gradient_stream.patch (a
stream-K over one wave of blocks; applies to commit 4ee4dca's coppelius/), weight_gradient_bias_columns.patch (dbias
by clusters of their own on the SMs the tiles leave idle; applies to e3e51fe). Build the patched cubin from a worktree
(`git worktree add /tmp/p <commit> && git -C /tmp/p apply $PWD/bench/experiments/<patch>`) and run from there, so
that mode `tree` takes its geometry (named `stream` in the seventeenth session's log). Each launch alone back to
back (CUDA events, the tensor-core test harness's Gpu.timer) at gpt2's and small's shapes, the cubins alternating so
that clock drift shows; then each build's dweight and dbias against float64 at one shape (max difference printed)
and its two launches' bits compared.
    python bench/experiments/weight_gradient_stream.py main.cubin:clusters patched.cubin:tree   (sm_90 card, root)"""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "gpu")]
import test_tensor_cores_gpu as tc  # noqa: E402
from coppelius.formats import geometry as geo  # noqa: E402

# (N, C, OC) of each weight gradient: dweight [OC][C] = dout [N][OC]^T inp [N][C]
SHAPES = {"gpt2 qkv": (32768, 768, 2304), "gpt2 attn proj": (32768, 768, 768), "gpt2 fc": (32768, 768, 3072),
          "gpt2 fc proj": (32768, 3072, 768), "gpt2 lm head": (32768, 768, 50304),
          "small qkv": (16384, 384, 1152), "small attn proj": (16384, 384, 384), "small fc": (16384, 384, 1536),
          "small fc proj": (16384, 1536, 384)}


def prepare(gpu, mode: str, args: dict, splits: int | None = None):
    """mode clusters: a tile a cluster of S (main's rule, or `splits`), grid tiles x S (main's geometry: the tiles of
    dbias's rows sum it); tree:
    the tree's geometry (the applied patch's); bias<E>: E clusters of S before the tiles
    summing dbias (hop_bias_columns); aligned: a stream-K of tiles x s blocks, the most up to 132 (every block's run
    one of s equal splits of a tile); a mode + "-nobias": no dbias (a null pointer; its sums skipped)."""
    if mode.endswith("-nobias"):
        mode, args = mode[:-len("-nobias")], {**args, "dbias": None}
    if mode == "tree":
        return gpu.prepare("matmul_backward_weight", args)
    tiles = geo.weight_gradient_tiles(args, "sm_90")[1]
    S = splits or geo.wide_split_count(tiles, args["N"])  # main's rule (the patch keeps it)
    saved, waves = (tc.geometry, tc.cluster_size), geo.WIDE_TILES
    if mode.startswith("bias"):
        grid = (tiles + int(mode[4:])) * S
    else:
        grid = tiles * S if mode == "clusters" else tiles * max(1, waves // tiles) if tiles <= waves else waves
    tc.geometry = lambda k, s, a: ([grid, 1, 1], *geo.MATMUL_TILES["wide"])
    tc.cluster_size = lambda k, s, a: 1 if mode == "aligned" else S
    try:
        return gpu.prepare("matmul_backward_weight", args)
    finally:
        tc.geometry, tc.cluster_size = saved


def operands(rng, N, C, OC):
    return tc.h16_timing(rng, N, OC), tc.h16_timing(rng, N, C)


def arguments(gpu, dout, inp):
    (N, OC), C = dout.shape, inp.shape[1]
    return {"dweight": gpu.alloc(OC * C * 2), "dbias": gpu.alloc(OC * 2), "dout": gpu.put(dout), "inp": gpu.put(inp),
            "N": N, "C": C, "OC": OC, "accumulate": 0}


def main(specs: list[str]) -> None:
    loaded = {}
    builds = [(f"{Path(p).stem}:{mode}", mode, loaded.setdefault(p, tc.Gpu(Path(p).read_bytes())))
              for p, mode in (s.split(":") for s in specs)]
    for rep in range(2):
        for name, (N, C, OC) in SHAPES.items():
            row, (dout, inp) = [], operands(np.random.default_rng(0), N, C, OC)
            for stem, mode, gpu in builds:
                args = arguments(gpu, dout, inp)
                ms = gpu.timer(prepare(gpu, mode, args), reps=30)
                row.append(f"{stem} {ms:.4f} ({2 * N * C * OC / ms / 1e9:.0f} TF/s)")
                gpu.free_all()
            print(f"{rep} {name:>15}: " + "  ".join(row), flush=True)
    N, C, OC = 8192, 768, 2304  # a check: float64 reference, two launches' bits
    dout, inp = operands(np.random.default_rng(1), N, C, OC)
    for stem, mode, gpu in builds:
        args = arguments(gpu, dout, inp)
        go, got = prepare(gpu, mode, args), []
        for _ in range(2):
            gpu.poison(args["dweight"], OC * C * 2)
            go()
            gpu.sync()
            got.append((gpu.get(args["dweight"], np.float16, OC * C), gpu.get(args["dbias"], np.float16, OC)))
        want = dout.astype(np.float64).T @ inp.astype(np.float64)
        dw = np.abs(got[0][0].reshape(OC, C) - want).max()
        db = np.nan if mode.endswith("-nobias") else np.abs(got[0][1] - dout.astype(np.float64).sum(axis=0)).max()
        same = all(np.array_equal(a, b) for a, b in zip(got[0], got[1]))
        print(f"check {stem}: dweight max diff {dw:.4g} (max |want| {np.abs(want).max():.3g}), dbias {db:.4g}, "
              f"two launches bit-identical: {same}", flush=True)
        gpu.free_all()


if __name__ == "__main__":
    main(sys.argv[1:])
