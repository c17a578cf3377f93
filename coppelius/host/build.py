"""Compile the C host runtime (this folder's .c files) for a host machine with `zig cc`.

The compiler is the clang inside the pinned `ziglang` wheel (`python -m ziglang cc`): the same
compiler and the same glibc 2.28 stubs on every build machine, so a build is hermetic and
cross-compiles x86-64 and AArch64 from either. The output is deterministic: no debug info
(`-g0`), no symbols (`-s`), no build id, every source path mapped to `coppelius/host` (so
`__FILE__` and anything else that names a path is the same in every clone), no timestamps
(zig's linker writes none). Two builds of the same sources from two directories give the same
bytes (tests/unit/test_host_build.py).

Floating point: `-ffp-contract=off`, so `a * b + c` is two roundings on every machine and a
fused multiply-add happens only where the C code calls fmaf(); the kernels' results are then
defined by their C source alone. The x86-64 build targets x86-64-v3 (AVX2, FMA: every x86-64
server since 2013) and checks the CPU when it starts (main.c, cpu_has_x86_64_v3); AArch64 always has both.
"""
import importlib.metadata
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ..errors import CoppeliusError

HOST_DIR = Path(__file__).resolve().parent
TRIPLES = {"x86_64": "x86_64-linux-gnu.2.28", "aarch64": "aarch64-linux-gnu.2.28"}
CPUS = {"x86_64": "x86_64_v3", "aarch64": "generic"}
FLAGS = ("-std=c11", "-O2", "-g0", "-s", "-ffp-contract=off", "-fno-math-errno", "-fno-ident",
         "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter", "-D_GNU_SOURCE")
LIBRARIES = ("-lm", "-lpthread", "-ldl")
MAPPED_ROOT = "coppelius/host"


def zig_command() -> list[str]:
    """The pinned wheel's compiler driver, run by this Python (no PATH lookup)."""
    return [sys.executable, "-m", "ziglang", "cc"]


def zig_version() -> str:
    """The pinned ziglang wheel's version, for the elf stage's key (another compiler may give other bytes).

    Read from the wheel's metadata, not by running zig: a machine that only replays stored actions (the
    lent GPU machine, which cannot carry the 100 MB wheel) needs the metadata folder alone."""
    try:
        return importlib.metadata.version("ziglang")
    except importlib.metadata.PackageNotFoundError:
        raise CoppeliusError("ziglang: the pinned wheel is not installed; install it with `pip install -e .`")


def runtime_sources(directory: Path = HOST_DIR) -> list[Path]:
    """The C runtime's translation units, in a fixed order (main.c is the program's entry)."""
    return sorted(directory.glob("*.c"))


def compile_program(machine: str, sources, out, *, include_dirs=(), defines=(), extra=(), objects=()) -> None:
    """Compile and link `sources` (C files and assembler files) and `objects` (compiled ones) into the executable
    `out` for `machine`.

    Every directory that holds a source or header is mapped to `coppelius/host/...`, so the bytes do
    not depend on where the sources are. Refuses in one line when the compiler fails.
    """
    _zig(machine, sources, [*map(str, objects), "-o", str(out), *LIBRARIES], include_dirs, defines, extra)


def compile_object(machine: str, source, out, *, include_dirs=()) -> None:
    """Compile one source into the object file `out` (compile_program's flags, no link)."""
    _zig(machine, [source], ["-c", "-o", str(out)], include_dirs, (), ())


def _zig(machine: str, sources, tail: list[str], include_dirs, defines, extra) -> None:
    if machine not in TRIPLES:
        raise CoppeliusError(f"host build: machine is {machine!r}; use one of {sorted(TRIPLES)}")
    sources = [Path(s).resolve() for s in sources]
    directories = sorted({s.parent for s in sources} | {Path(d).resolve() for d in include_dirs},
                         key=lambda d: -len(str(d)))  # the longest prefix first: clang applies the first match
    maps = [f"-ffile-prefix-map={d}={MAPPED_ROOT}" + ("" if i == 0 else f"/{i}") for i, d in enumerate(directories)]
    command = [*zig_command(), "-target", TRIPLES[machine], f"-mcpu={CPUS[machine]}", *FLAGS, *maps,
               *(f"-I{d}" for d in include_dirs), *(f"-D{d}" for d in defines), *extra, *map(str, sources), *tail]
    with tempfile.TemporaryDirectory(prefix="coppelius-zig-") as work:
        # the compiler runs in an empty directory: nothing of the caller's working directory can leak in
        run = subprocess.run(command, cwd=work, capture_output=True, text=True, env=_environment())
    if run.returncode != 0:
        first = next((line for line in run.stderr.splitlines() if "error" in line), run.stderr.strip()[:200])
        raise CoppeliusError(f"{sources[0].name}: zig cc for {TRIPLES[machine]} failed ({first.strip()[:240]}); "
                             f"fix the C source or reinstall the ziglang wheel")


def _environment() -> dict:
    """The compiler's environment: the caller's, less what could change the output (flags, epoch)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CFLAGS", "CPPFLAGS", "LDFLAGS", "SOURCE_DATE_EPOCH",
                                                          "ZIG_LIB_DIR")}
    if "HOME" not in env and "ZIG_GLOBAL_CACHE_DIR" not in env:
        env["ZIG_GLOBAL_CACHE_DIR"] = str(Path(tempfile.gettempdir()) / "coppelius-zig-cache")
    return env


def link_host_executable(path, machine: str, identity: dict, sections: dict) -> None:
    """Publish at `path` the native host ELF: the C runtime for `machine`, with the identity note
    and every section (name -> bytes) embedded as .note.coppelius and .coppelius.NAME, the same
    bytes and digests as the ET_REL container of coppelius/formats/elf.py.

    The sections are assembled from a generated file of `.incbin` directives (no objcopy). They are
    not loaded (no "a" flag): the runtime reads them from its own file, /proc/self/exe.
    """
    from elftools.elf.elffile import ELFFile
    from ..formats.elf import DATA_ALIGN, FILE_SECTION, NOTE_SECTION, SECTION_PREFIX, file_digest, \
        file_digest_extent, identity_note
    from ..formats.publish import Publication
    note, blobs = identity_note(identity, sections)
    with tempfile.TemporaryDirectory(prefix="coppelius-link-") as work:
        work = Path(work)
        lines = ["// generated by coppelius/host/build.py: the host ELF's tables, embedded"]
        (work / "note.bin").write_bytes(note)
        lines += [f'.section {NOTE_SECTION},"",@note', ".balign 4", '.incbin "note.bin"']
        for i, (name, blob) in enumerate(blobs.items()):
            (work / f"section{i}.bin").write_bytes(blob)
            lines += [f'.section {SECTION_PREFIX}{name},"",@progbits', f".balign {DATA_ALIGN}",
                      f'.incbin "section{i}.bin"']
        lines += [f'.section {FILE_SECTION},"",@progbits', ".balign 8", ".zero 32"]  # filled in after the link
        assembler = work / "sections.S"
        assembler.write_text("\n".join(lines) + "\n")
        # .incbin names are relative to the assembler file's folder, given as an include path. It is compiled on
        # its own, so that the runtime's C files are compiled with flags that never name this temporary folder:
        # zig's cache then finds their objects from the build before (a chain whose plan alone changed rebuilt
        # in ~10 s on 2 cores, now ~0.3 s)
        compile_object(machine, assembler, work / "sections.o", include_dirs=[work])
        out = work / "host.elf"
        compile_program(machine, runtime_sources(), out, include_dirs=[HOST_DIR], objects=[work / "sections.o"])
        data = bytearray(out.read_bytes())
        offset, size = file_digest_extent(ELFFile(io.BytesIO(data)))
        assert size == 32 and data[offset:offset + 32] == bytes(32), "the linker moved or filled the digest slot"
        data[offset:offset + 32] = file_digest(data, offset)
        with Publication(path) as published:
            published.file.write(bytes(data))
        os.chmod(path, 0o755)
