"""NVRTC: the project's CUDA kernels (coppelius/kernels/cuda) compiled to one cubin per arch on a
machine with no GPU, and what each kernel of a cubin needs, read back from the cubin itself.

The cubin depends only on the sources, the NVRTC version and the options below: the program is
named `kernels.cu`, the .cuh files beside it are handed to NVRTC by name rather than found on a
path, no directory of the sources is searched (--no-source-include), and nothing that records a
path (-lineinfo, -G) is asked for; cuda_fp16.h comes from the pinned nvidia-cuda-runtime wheel,
whose location never reaches the cubin. So the same sources give the same bytes from any
checkout on any machine.
"""
import functools
import re
from pathlib import Path

from ..errors import CoppeliusError

SOURCES = Path(__file__).resolve().parent.parent / "kernels" / "cuda"
MAIN = "kernels.cu"
# Fixed options. --fmad=true is NVRTC's default, named so that a change of default cannot change
# the cubin silently; adamw forbids contraction itself where it must match the cpu device exactly.
OPTIONS = ("--std=c++17", "-default-device", "--fmad=true", "--no-source-include")
PACKAGES = ("nvidia-cuda-nvrtc", "nvidia-cuda-runtime")
# The arch NVRTC compiles for, where it is not the target's own: Hopper's warpgroup MMA (wgmma) exists
# only in sm_90a code, which runs on every card of compute capability 9.0, the one sm_90 (the target,
# its admission and its card check stay sm_90; the matmuls take wgmma where __CUDA_ARCH_FEAT_SM90_ALL).
ARCH_FEATURES = {"sm_90": "sm_90a"}



def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:
        raise CoppeliusError(f"NVRTC: cannot import cuda.bindings.nvrtc ({e}); install the project's pinned "
                             f"dependencies (pip install -e .)")
    return nvrtc


def _check(result, what: str):
    """cuda-bindings returns (status, values...); raise unless the status is success."""
    status, *values = result
    if int(status) != 0:
        raise CoppeliusError(f"NVRTC: {what} failed ({status.name if hasattr(status, 'name') else status})")
    return values[0] if len(values) == 1 else values


def version() -> str:
    major, minor = _check(_nvrtc().nvrtcVersion(), "nvrtcVersion")
    return f"{major}.{minor}"


def package_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version as installed
    out = {}
    for name in PACKAGES:
        try:
            out[name] = installed(name)
        except PackageNotFoundError:
            out[name] = "absent"
    return out


def tools(arch: str) -> dict:
    """What a GPU realization's key records of its tools: NVRTC, the headers' wheel, the options."""
    packages = package_versions()
    return {"nvrtc": version(), "nvidia-cuda-nvrtc": packages["nvidia-cuda-nvrtc"],
            "nvidia-cuda-runtime": packages["nvidia-cuda-runtime"], "nvrtc_options": options(arch)}


def include_dir() -> Path:
    """The nvidia-cuda-runtime wheel's headers (cuda_fp16.h; the NVRTC wheel carries none), else
    an installed CUDA toolkit's (CUDA_HOME, /usr/local/cuda) on a machine without the wheel."""
    import importlib.util
    import os
    spec = importlib.util.find_spec("nvidia")
    for location in (spec.submodule_search_locations or []) if spec else []:
        for candidate in sorted(Path(location).glob("cu*/include")):
            if (candidate / "cuda_fp16.h").is_file():
                return candidate
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home and (Path(home) / "include" / "cuda_fp16.h").is_file():
            return Path(home) / "include"
    raise CoppeliusError("NVRTC: cuda_fp16.h not found in the nvidia-cuda-runtime wheel; install the project's "
                         "pinned dependencies (pip install -e .)")


def options(arch: str) -> list[str]:
    """The options of a compilation for arch, as recorded in a stage's key (no machine's paths)."""
    if not re.fullmatch(r"sm_\d+a?", arch):
        raise CoppeliusError(f"config: target arch is {arch!r}; a CUDA target names an arch like sm_90")
    return [f"--gpu-architecture={ARCH_FEATURES.get(arch, arch)}", *OPTIONS]


def _read_sources(sources: Path) -> tuple[bytes, tuple[tuple[str, bytes], ...]]:
    """kernels.cu and its .cuh headers (name, bytes) under `sources`, in name order."""
    return (sources / MAIN).read_bytes(), tuple((h.name, h.read_bytes()) for h in sorted(sources.glob("*.cuh")))


def compile_cubin(arch: str, sources: Path = SOURCES, cached: bool = True) -> tuple[bytes, str]:
    """kernels.cu and its .cuh headers under `sources`, compiled for arch: (cubin, NVRTC version).
    A compilation of the same source bytes for the same arch is done once per process."""
    return (_compile_once if cached else _compile)(arch, *_read_sources(sources))


def _compile(arch: str, main: bytes, headers: tuple[tuple[str, bytes], ...], extra: tuple[str, ...] = (),
             log: list | None = None, ptx: bool = False) -> tuple[bytes, str]:
    nvrtc = _nvrtc()
    program = _check(nvrtc.nvrtcCreateProgram(main, MAIN.encode(), len(headers), [data for _, data in headers],
                                              [name.encode() for name, _ in headers]), "nvrtcCreateProgram")
    try:
        arch_options = [f"--gpu-architecture=compute_{arch[3:]}", *OPTIONS] if ptx else options(arch)
        opts = [o.encode() for o in (*arch_options, *extra)] + [b"-I" + str(include_dir()).encode()]
        status, = nvrtc.nvrtcCompileProgram(program, len(opts), opts)
        if int(status) != 0:
            raise CoppeliusError(f"kernels/cuda: NVRTC could not compile {MAIN} for {arch}: "
                                 f"{_first_error(nvrtc, program)}")
        if log is not None:
            log.append(_log(nvrtc, program))
        get_size, get = (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX) if ptx else (nvrtc.nvrtcGetCUBINSize,
                                                                                 nvrtc.nvrtcGetCUBIN)
        size = _check(get_size(program), get_size.__name__)
        image = b" " * size
        _check(get(program, image), get.__name__)
    finally:
        nvrtc.nvrtcDestroyProgram(program)
    return image, version()


def compile_ptx(arch: str, sources: Path = SOURCES) -> bytes:
    """kernels.cu compiled to PTX for arch's virtual architecture (sm_86 -> compute_86: its __CUDA_ARCH__, none of a
    newer card's features), NUL-terminated. A newer card's driver JIT-compiles it: how the GPU tests run an arch's
    own code paths (rtx3090's mma.sync attention at head size 64) on the H200."""
    if not re.fullmatch(r"sm_\d+", arch):
        raise CoppeliusError(f"NVRTC: PTX is compiled for a plain arch like sm_86, not {arch!r}")
    return _compile(arch, *_read_sources(sources), ptx=True)[0]


def ptxas_report(arch: str, sources: Path = SOURCES) -> str:
    """ptxas's own report of the compilation for arch (-Xptxas -v): each kernel's registers, spills and
    warnings, such as C7514 (wgmma serialized). The cubin it makes is not the realized one."""
    log: list[str] = []
    _compile(arch, *_read_sources(sources), ("-Xptxas", "-v"), log)
    return log[0]


_compile_once = functools.lru_cache(maxsize=8)(_compile)


def _log(nvrtc, program) -> str:
    size = _check(nvrtc.nvrtcGetProgramLogSize(program), "nvrtcGetProgramLogSize")
    log = b" " * size
    _check(nvrtc.nvrtcGetProgramLog(program, log), "nvrtcGetProgramLog")
    return log.replace(b"\0", b"").decode(errors="replace")


def _first_error(nvrtc, program) -> str:
    lines = [line.strip() for line in _log(nvrtc, program).splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line]
    return (errors or lines or ["no log"])[0]


def kernel_info(cubin: bytes) -> dict[str, dict]:
    """Per kernel of a cubin: registers, static shared bytes (as the driver counts them), max
    threads (0: unspecified) and parameter bytes (formats/cubin.py reads them).

    A catalog kernel's parameters (their offsets and sizes, EIATTR_KPARAM_INFO) must be the
    catalog's ABI (formats/kernels.py: param_layout); its param_bytes is then the layout's size (the
    cubin's EIATTR_CBANK_PARAM_SIZE, which ends at the last parameter, rounded up to 8).
    """
    from ..formats.cubin import read_cubin
    from ..formats.kernels import KERNELS, PTR_KINDS, param_layout
    kernels = {}
    for name, facts in read_cubin(cubin)[1].items():
        param_size = facts["param_size"] or 0
        info = {"registers": facts["registers"], "shared_bytes": facts["shared_bytes"],
                "max_threads": facts["max_threads"], "param_bytes": param_size}
        if name in KERNELS:
            layout, size = param_layout(name)
            want = [(i, offset, 8 if kind in PTR_KINDS else 4) for i, (_, kind, offset) in enumerate(layout)]
            if facts["params"] != want or -(-param_size // 8) * 8 != size:
                raise CoppeliusError(
                    f"kernels/cuda: kernel {name} takes parameters {facts['params']} ({param_size} bytes), the "
                    f"catalog's ABI is {want} ({size} bytes); make its signature the catalog's (formats/kernels.py)")
            info["param_bytes"] = size
        kernels[name] = info
    return kernels


def gpu_kernel_info(plan: dict, cubin: bytes, arch: str, nvrtc_version: str) -> bytes:
    """What admission holds each of the plan's kernels to, in cpu_kernel_info's format."""
    from .. import canonical
    found = kernel_info(cubin)
    missing = sorted(set(plan["kernels"]) - set(found))
    if missing:
        raise CoppeliusError(f"kernels/cuda: the {arch} cubin has no kernel {', '.join(missing)}; every kernel the "
                             f"plan launches must be defined extern \"C\" in a .cuh file that kernels.cu includes")
    return canonical.encode({"format": "coppelius-kernel-info", "version": 1, "arch": arch, "nvrtc": nvrtc_version,
                             "kernels": {name: found[name] for name in sorted(plan["kernels"])}}) + b"\n"
