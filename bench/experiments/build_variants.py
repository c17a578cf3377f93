"""Cubins of this tree's kernels (or those under SOURCES, e.g. a patched worktree's coppelius/kernels/cuda) with one
constant changed, for the A/B scripts (sm_90 unless ARCH is set):
    python bench/experiments/build_variants.py OUTDIR FILE NAME VALUE [VALUE ...]
writes OUTDIR/NAME-VALUE.cubin for each VALUE, the line `constexpr int NAME = ...;` of coppelius/kernels/cuda/FILE
rewritten (exactly one such line must exist). With -D for FILE, kernels.cu starts with `#define NAME VALUE` instead
(a macro the kernels read with #ifndef NAME, e.g. a patch's COPTC_ATTN_STORE16)."""
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from coppelius.realize.nvrtc import MAIN, SOURCES, compile_cubin  # noqa: E402


def main(out: str, file: str, name: str, values: list[str]) -> None:
    sources = Path(os.environ.get("SOURCES", SOURCES))
    if file == "-D":  # the macro defined at the top of kernels.cu, before anything reads it
        file, text = MAIN, (sources / MAIN).read_text()
        rewritten = lambda value: f"#define {name} {value}\n" + text  # noqa: E731
    else:
        pattern = re.compile(rf"(constexpr int {re.escape(name)} = )[^;]+;")
        text = (sources / file).read_text()
        if len(pattern.findall(text)) != 1:
            raise SystemExit(f"{file}: expected one `constexpr int {name} = ...;` line")
        rewritten = lambda value: pattern.sub(rf"\g<1>{value};", text)  # noqa: E731
    Path(out).mkdir(parents=True, exist_ok=True)
    for value in values:
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(sources, tmp, dirs_exist_ok=True)
            (Path(tmp) / file).write_text(rewritten(value))
            cubin, _ = compile_cubin(os.environ.get("ARCH", "sm_90"), Path(tmp), cached=False)
        (Path(out) / f"{name}-{value}.cubin").write_bytes(cubin)
        print(f"{name}-{value}.cubin", len(cubin), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
