"""main's kernels with the programmatic-dependent-launch prologue (griddepcontrol.wait, then launch_dependents, at the top
of every extern "C" kernel, sm_90+), compiled for sm_90 -> argv[1]."""
import re, shutil, sys
from pathlib import Path
from coppelius.realize import nvrtc
src, dst = Path("coppelius/kernels/cuda"), Path("/tmp/pdlsrc")
shutil.rmtree(dst, ignore_errors=True)
shutil.copytree(src, dst)
PROLOGUE = ('\n#if __CUDA_ARCH__ >= 900\n    asm volatile("griddepcontrol.wait;" ::: "memory");\n'
            '    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");\n#endif\n')
patched = 0
for f in dst.glob("*.cuh"):
    text, out, at = f.read_text(), [], 0
    for m in re.finditer(r'extern "C" __global__', text):
        body = text.index("{", m.end())
        out.append(text[at:body + 1] + PROLOGUE)
        at = body + 1
        patched += 1
    out.append(text[at:])
    f.write_text("".join(out))
print("kernels patched:", patched)
Path(sys.argv[1]).write_bytes(nvrtc.compile_cubin("sm_90", sources=dst, cached=False)[0])
