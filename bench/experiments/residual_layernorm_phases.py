"""Where a block of matmul_forward_residual_layernorm spends its time (forty-ninth session): the kernel of this tree
(residual_layernorm.patch applied) rewritten with clock64 stamps at its phases (consumer c's thread 0 of each block;
the producer's thread 0 at its first and last copy issued) and globaltimer at each warpgroup's start and end,
compiled for sm_90, launched at small's two projections (after warm-up), and the stamps read back from the global
mln_clock: the median over blocks of each phase's microseconds (cycles over the SM clock the two timers give), and
the spread of the blocks' start and end.
    python bench/experiments/residual_layernorm_phases.py   (a CUDA card, repository root, the patch applied)"""
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "gpu"), str(ROOT), str(Path(__file__).resolve().parent)]
import residual_layernorm_ab as ab  # noqa: E402
import test_tensor_cores_gpu as tc  # noqa: E402
from coppelius.realize.nvrtc import compile_cubin  # noqa: E402

# (the line a stamp follows, its name): consumer stamps 1.., in the order a tile passes them
STAMPS = [("    cpl::grid_dependency();\n    int g = 0;\n", "ready"),
          ("        mln_consume(stages, full, empty, c, KT, acc, g);\n", "products"),
          ("        mbar_wait(&full[rows_at], ((g + c) / MLN_STAGES) & 1);\n", "rows in"),
          ("        mln_store_rows(&out_maps[0], my_rows, m0, Nn, c, ctid);\n", "residual out"),
          ("rstd[m0 + row + 8 * e] = rs[e];\n        }\n", "stats"),
          ("        bulk_wait_read();\n        consumer_sync(c);\n#pragma unroll\n", "residual read"),
          ("        mln_store_rows(&out_maps[1], my_rows, m0, Nn, c, ctid);\n", "normalized out"),
          ("        g += 2;\n", "released"),
          ("    bulk_wait();\n", "stores done")]


def instrumented(source: str) -> str:
    head = ("extern \"C\" { __device__ long long mln_clock[256][3][12]; }  // unmangled: cuModuleGetGlobal\n"
            "__device__ __forceinline__ long long mln_gt() {\n"
            "    long long t;\n    asm volatile(\"mov.u64 %0, %globaltimer;\" : \"=l\"(t));\n    return t;\n}\n"
            "#define MLN_STAMP(who, i) \\\n"
            "    if ((threadIdx.x & 127) == 0 && blockIdx.x < 256) mln_clock[blockIdx.x][who][i] = clock64();\n")
    source = source.replace("__device__ HopMap mln_maps[HOP_MAP_SLOTS][2];\n",
                            "__device__ HopMap mln_maps[HOP_MAP_SLOTS][2];\n" + head)
    entry = "    const int tid = threadIdx.x, wg = tid >> 7;\n"
    source = source.replace(entry, entry + "    if ((tid & 127) == 0 && blockIdx.x < 256)\n"
                            "        mln_clock[blockIdx.x][wg][0] = clock64(), mln_clock[blockIdx.x][wg][10] = mln_gt();\n")
    for i, (anchor, _) in enumerate(STAMPS, 1):
        assert source.count(anchor) == 1, anchor
        stamp = f"        if (wg > 0) {{ MLN_STAMP(wg, {i}) }}\n"
        pragma = "#pragma unroll\n"  # a stamp goes before it: the pragma names the loop after it
        source = (source.replace(anchor, anchor[:-len(pragma)] + stamp + pragma) if anchor.endswith(pragma)
                  else source.replace(anchor, anchor + stamp))
    source = source.replace("MLN_STAMP(wg, 9) }\n", "MLN_STAMP(wg, 9) }\n    if ((tid & 127) == 0 && blockIdx.x < 256) "
                            "mln_clock[blockIdx.x][wg][11] = mln_gt();\n")  # every warpgroup's end
    # the producer: its first copy issued, and its last
    first = "                mbar_expect_tx(&full[st], MLN_STAGE * 2);"
    source = source.replace(first, "                if (g == 0) MLN_STAMP(0, 1)\n" + first)
    source = source.replace("        return;\n    }\n\n    asm volatile(\"setmaxnreg.inc",
                            "        MLN_STAMP(0, 2)\n        return;\n    }\n\n    asm volatile(\"setmaxnreg.inc")
    return source


def main() -> None:
    sources = ROOT / "coppelius" / "kernels" / "cuda"
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "cuda"
        shutil.copytree(sources, tree)
        path = tree / "matmul_layernorm.cuh"
        path.write_text(instrumented(path.read_text()))
        cubin = compile_cubin("sm_90", tree, cached=False)[0]
    g = tc.Gpu(cubin)
    status, table, size = g.d.cuModuleGetGlobal(g.module, b"mln_clock")
    assert int(status) == 0, status
    for label, (N, C, OC) in ab.SHAPES.items():
        fused = g.prepare("matmul_forward_residual_layernorm", ab.operands(g, N, C, OC))
        for _ in range(20):
            fused()
        g.sync()
        t = g.get(int(table), np.int64, 256 * 3 * 12).reshape(256, 3, 12)[:(N + 127) // 128]
        # cycles a nanosecond: consumer 0's start-to-end in clock64 over the same span in globaltimer
        ghz = float(np.median((t[:, 1, 9] - t[:, 1, 0]) / (t[:, 1, 11] - t[:, 1, 10])))
        us = lambda cycles: cycles / ghz / 1e3  # noqa: E731
        spread = lambda stamps: (stamps.max() - stamps.min()) / 1e3  # noqa: E731
        print(f"{label}: SM clock {ghz * 1e3:.0f} MHz; the blocks' start spread {spread(t[:, 1, 10]):.1f} us, end "
              f"spread {spread(t[:, 1, 11]):.1f} us, first start to last end {spread(t[:, 1:, 10:12]):.1f} us")
        print(f"  producer: first copy {np.median(us(t[:, 0, 1] - t[:, 0, 0])):.2f} us, last copy "
              f"{np.median(us(t[:, 0, 2] - t[:, 0, 0])):.2f} us after its start")
        for c in (1, 2):
            at = [np.median(us(t[:, c, i] - t[:, c, 0])) for i in range(1, len(STAMPS) + 1)]
            print(f"  consumer {c - 1}: " + ", ".join(f"{name} {v:.2f}" for (_, name), v in zip(STAMPS, at)) +
                  " us after its start (medians over blocks)")
        g.free_all()


if __name__ == "__main__":
    main()
