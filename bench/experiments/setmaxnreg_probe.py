"""Does ptxas honour setmaxnreg in mm_hopper? No card needed: the matmul kernels alone compiled by NVRTC with
-Xptxas -v, the producer warpgroup's `setmaxnreg.dec 120` and the consumers' `setmaxnreg.inc 192` added, once as the
tree has mm_load_elementwise (__noinline__: every matmul kernel then holds CALLs) and once with it inlined. Prints
each kernel's C7507 notes ("'setmaxnreg' ignored to maintain minimum register requirements"), registers and spills.
Forty-first session (2026-12-05): 5 notes with the call, none inlined (then matmul_backward_input_gelu spills 56
bytes at 120 registers in its producer warpgroup, where its finishers run); the fifteenth session's C7507 was the
call, so a fourth warpgroup is possible once the kernels hold no call.
    python bench/experiments/setmaxnreg_probe.py [DEC INC]"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from coppelius.realize import nvrtc  # noqa: E402

SOURCES = ROOT / "coppelius" / "kernels" / "cuda"
PRODUCER = "// the producer: stage g of the block's sequence is k-tile g % KT of slot g / KT\n"  # mm_hopper's, then
CONSUMERS = "    const bool pair_ok = mm_pairs_ok<EPI>(out, aux, Nn);\n"  # its consumers' first line
LOADER = "__device__ __noinline__ void mm_load_elementwise"


def headers(dec: int, inc: int, inline: bool) -> tuple:
    out = []
    for path in sorted(SOURCES.glob("*.cuh")):
        text = path.read_text()
        if path.name == "matmul_hopper.cuh":
            assert PRODUCER in text and CONSUMERS in text, "mm_hopper's roles moved: update the probe"
            dec_asm = f'        asm volatile("setmaxnreg.dec.sync.aligned.u32 {dec};\\n");\n'
            inc_asm = f'    asm volatile("setmaxnreg.inc.sync.aligned.u32 {inc};\\n");\n'
            text = text.replace(PRODUCER, PRODUCER + dec_asm).replace(CONSUMERS, inc_asm + CONSUMERS)
        if inline and path.name == "matmul.cuh":
            assert LOADER in text
            text = text.replace(LOADER, LOADER.replace("__noinline__", "__forceinline__"))
        out.append((path.name, text.encode()))
    return tuple(out)


def main(dec: int = 120, inc: int = 192) -> None:
    for inline in (False, True):
        log: list[str] = []
        nvrtc._compile("sm_90", b'#include "common.cuh"\n#include "matmul.cuh"\n', headers(dec, inc, inline),
                       ("-Xptxas", "-v"), log)
        lines = [line.replace("ptxas info    : ", "").replace("ptxas         .     ", "").strip()
                 for line in log[0].splitlines()]
        notes = sum("C7507" in line for line in lines)
        print(f"== mm_load_elementwise {'inlined' if inline else '__noinline__'}: {notes} C7507 notes")
        for i, line in enumerate(lines):
            if line.startswith("Compiling entry"):
                stats = [x for x in lines[i + 1:i + 4] if "spill" in x or x.startswith("Used")]
                print(f"  {line.split(chr(39))[1]}: {'; '.join(stats)}")


if __name__ == "__main__":
    main(*map(int, sys.argv[1:3]))
