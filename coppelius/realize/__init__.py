"""Stage 4, realize: plan + target -> program image, launch table, command stream, ring, and the
host program, planes, host buffers and run record the host runtime reads (docs/formats.md)."""
from pathlib import Path

from .. import canonical
from ..formats.kernels import param_layout
from .encode import encode_program

ARTIFACTS = ("image", "kernel_info", "launches", "relocations", "commands", "ring", "program", "planes", "buffers",
             "run")
PACKAGE = Path(__file__).resolve().parent.parent
IMAGE_SOURCES = ("kernels/reference.py", "runtime/cpu.py")  # the cpu image names them by digest


def cpu_image(plan: dict) -> bytes:
    """For the cpu target the image is the reference kernel manifest: which function runs each kernel."""
    sources = {rel: canonical.sha256((PACKAGE / rel).read_bytes()) for rel in IMAGE_SOURCES}
    return canonical.encode({"format": "coppelius-image", "version": 1, "kind": "numpy-reference", "arch": "numpy",
                             "kernels": {name: f"coppelius.runtime.cpu.{name}" for name in sorted(plan["kernels"])},
                             "sources": sources}) + b"\n"


def realize(plan: dict, target: dict, cubin: bytes | None = None) -> dict[str, bytes]:
    """The realization; for a GPU target the cubin compiled for its arch (compiled here if not given)."""
    if target["arch"] == "numpy":
        return {"image": cpu_image(plan), "kernel_info": cpu_kernel_info(plan), **encode_program(plan)}
    from .nvrtc import compile_cubin, gpu_kernel_info, version
    if cubin is None:
        cubin, _ = compile_cubin(target["arch"])
    return {"image": cubin, "kernel_info": gpu_kernel_info(plan, cubin, target["arch"], version()),
            **encode_program(plan)}


def cpu_kernel_info(plan: dict) -> bytes:
    """What admission holds each kernel to. On cpu there are no registers or shared memory."""
    return canonical.encode({"format": "coppelius-kernel-info", "version": 1, "arch": "numpy", "kernels": {
        name: {"registers": 0, "shared_bytes": 0, "max_threads": 0, "param_bytes": param_layout(name)[1]}
        for name in sorted(plan["kernels"])}}) + b"\n"
