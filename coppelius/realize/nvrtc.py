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
import io
import re
import struct
from pathlib import Path

from ..errors import CoppeliusError

SOURCES = Path(__file__).resolve().parent.parent / "kernels" / "cuda"
MAIN = "kernels.cu"
ARCHS = ("sm_86", "sm_90", "sm_121")
# Fixed options. --fmad=true is NVRTC's default, named so that a change of default cannot change
# the cubin silently; adamw forbids contraction itself where it must match the cpu device exactly.
OPTIONS = ("--std=c++17", "-default-device", "--fmad=true", "--no-source-include")
PACKAGES = ("nvidia-cuda-nvrtc", "nvidia-cuda-runtime")

# .nv.info attribute codes (NVIDIA's EIATTR_* numbering) and entry formats.
EIATTR_MAX_THREADS, EIATTR_KPARAM_INFO, EIATTR_CBANK_PARAM_SIZE, EIATTR_REGCOUNT = 0x05, 0x17, 0x19, 0x2F
EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4
# From sm_90 on, a cubin with a .nv.shared.reserved.0 section lays each kernel's shared memory out
# after the 1 KiB the system reserves in every block, and .nv.shared.NAME's size counts it; the
# driver's CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, which is what the 48 KiB limit holds, does not
# (checked against every kernel on the H200, driver 580).
RESERVED_SHARED = 1024


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
    """The nvidia-cuda-runtime wheel's headers (cuda_fp16.h); the NVRTC wheel carries none."""
    import importlib.util
    spec = importlib.util.find_spec("nvidia")
    for location in (spec.submodule_search_locations or []) if spec else []:
        for candidate in sorted(Path(location).glob("cu*/include")):
            if (candidate / "cuda_fp16.h").is_file():
                return candidate
    raise CoppeliusError("NVRTC: cuda_fp16.h not found in the nvidia-cuda-runtime wheel; install the project's "
                         "pinned dependencies (pip install -e .)")


def options(arch: str) -> list[str]:
    """The options of a compilation for arch, as recorded in a stage's key (no machine's paths)."""
    if not re.fullmatch(r"sm_\d+a?", arch):
        raise CoppeliusError(f"config: target arch is {arch!r}; a CUDA target names an arch like sm_90")
    return [f"--gpu-architecture={arch}", *OPTIONS]


def compile_cubin(arch: str, sources: Path = SOURCES, cached: bool = True) -> tuple[bytes, str]:
    """kernels.cu and its .cuh headers under `sources`, compiled for arch: (cubin, NVRTC version).
    A compilation of the same source bytes for the same arch is done once per process."""
    main = (sources / MAIN).read_bytes()
    headers = tuple((h.name, h.read_bytes()) for h in sorted(sources.glob("*.cuh")))
    return (_compile_once if cached else _compile)(arch, main, headers)


def _compile(arch: str, main: bytes, headers: tuple[tuple[str, bytes], ...]) -> tuple[bytes, str]:
    nvrtc = _nvrtc()
    program = _check(nvrtc.nvrtcCreateProgram(main, MAIN.encode(), len(headers), [data for _, data in headers],
                                              [name.encode() for name, _ in headers]), "nvrtcCreateProgram")
    try:
        opts = [o.encode() for o in options(arch)] + [b"-I" + str(include_dir()).encode()]
        status, = nvrtc.nvrtcCompileProgram(program, len(opts), opts)
        if int(status) != 0:
            raise CoppeliusError(f"kernels/cuda: NVRTC could not compile {MAIN} for {arch}: "
                                 f"{_first_error(nvrtc, program)}")
        size = _check(nvrtc.nvrtcGetCUBINSize(program), "nvrtcGetCUBINSize")
        cubin = b" " * size
        _check(nvrtc.nvrtcGetCUBIN(program, cubin), "nvrtcGetCUBIN")
    finally:
        nvrtc.nvrtcDestroyProgram(program)
    return cubin, version()


_compile_once = functools.lru_cache(maxsize=8)(_compile)


def _first_error(nvrtc, program) -> str:
    size = _check(nvrtc.nvrtcGetProgramLogSize(program), "nvrtcGetProgramLogSize")
    log = b" " * size
    _check(nvrtc.nvrtcGetProgramLog(program, log), "nvrtcGetProgramLog")
    lines = [line.strip() for line in log.rstrip(b"\0").decode(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line]
    return (errors or lines or ["no log"])[0]


# ---------------------------------------------------------------- reading a cubin

def _attributes(data: bytes):
    """The (attribute, value) entries of a .nv.info section: value is bytes, an int, or None."""
    at = 0
    while at + 2 <= len(data):
        fmt, attr = data[at], data[at + 1]
        if fmt == EIFMT_SVAL:
            size, = struct.unpack_from("<H", data, at + 2)
            yield attr, data[at + 4:at + 4 + size]
            at += 4 + size
        elif fmt == EIFMT_HVAL:
            yield attr, struct.unpack_from("<H", data, at + 2)[0]
            at += 4
        elif fmt == EIFMT_BVAL:
            yield attr, data[at + 2]
            at += 4
        elif fmt == EIFMT_NVAL:
            yield attr, None
            at += 4
        else:
            raise CoppeliusError(f"cubin: unknown .nv.info entry format {fmt} at byte {at}")


def kernel_info(cubin: bytes) -> dict[str, dict]:
    """Per kernel of a cubin: registers, static shared bytes (the kernel's own, as the driver
    counts them), max threads (0: unspecified) and parameter bytes, from its ELF sections
    (.nv.info: EIATTR_REGCOUNT; .nv.info.NAME: EIATTR_KPARAM_INFO, EIATTR_CBANK_PARAM_SIZE,
    EIATTR_MAX_THREADS; .nv.shared.NAME: its size).

    A catalog kernel's parameters (their offsets and sizes, EIATTR_KPARAM_INFO) must be the
    catalog's ABI (plan/kernels.py: param_layout); its param_bytes is then the layout's size (the
    cubin's EIATTR_CBANK_PARAM_SIZE, which ends at the last parameter, rounded up to 8).
    """
    from elftools.elf.elffile import ELFFile
    from ..plan.kernels import KERNELS, PTR_KINDS, param_layout
    elf = ELFFile(io.BytesIO(cubin))
    symbols = list(elf.get_section_by_name(".symtab").iter_symbols())
    registers = {}
    common = elf.get_section_by_name(".nv.info")
    for attr, value in _attributes(common.data() if common is not None else b""):
        if attr == EIATTR_REGCOUNT:
            index, count = struct.unpack("<II", value)
            registers[symbols[index].name] = count
    reserved = RESERVED_SHARED if elf.get_section_by_name(".nv.shared.reserved.0") is not None else 0
    kernels = {}
    for section in elf.iter_sections():
        if not section.name.startswith(".nv.info."):
            continue
        name = section.name[len(".nv.info."):]
        params, param_size, max_threads = [], None, 0
        for attr, value in _attributes(section.data()):
            if attr == EIATTR_KPARAM_INFO:
                _, ordinal, offset, flags = struct.unpack("<IHHI", value)
                params.append((ordinal, offset, (flags >> 18) & 0x3FFF))
            elif attr == EIATTR_CBANK_PARAM_SIZE:
                param_size = value
            elif attr == EIATTR_MAX_THREADS:
                x, y, z = struct.unpack("<III", value)
                max_threads = x * y * z
        shared = elf.get_section_by_name(f".nv.shared.{name}")
        text = elf.get_section_by_name(f".text.{name}")
        count = registers.get(name, text["sh_info"] >> 24 if text is not None else 0)
        own_shared = max(0, shared["sh_size"] - reserved) if shared is not None else 0
        info = {"registers": count, "shared_bytes": own_shared, "max_threads": max_threads,
                "param_bytes": param_size or 0}
        if name in KERNELS:
            layout, size = param_layout(name)
            want = [(i, offset, 8 if kind in PTR_KINDS else 4) for i, (_, kind, offset) in enumerate(layout)]
            if sorted(params) != want or -(-(param_size or 0) // 8) * 8 != size:
                raise CoppeliusError(
                    f"kernels/cuda: kernel {name} takes parameters {sorted(params)} ({param_size} bytes), the "
                    f"catalog's ABI is {want} ({size} bytes); make its signature the catalog's (plan/kernels.py)")
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
