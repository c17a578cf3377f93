"""The zig build of the C host runtime: deterministic bytes, both machines, a real executable."""
import shutil
import subprocess
from pathlib import Path

import pytest

from coppelius.errors import CoppeliusError
from coppelius.host.build import HOST_DIR, TRIPLES, compile_program, zig_version

DRIVER_SOURCE = Path(__file__).with_name("host_kernel_driver.c")
FILE = shutil.which("file")
DESCRIBED = {"x86_64": "x86-64", "aarch64": "ARM aarch64"}


def _copy_sources(directory: Path) -> list[Path]:
    """The runtime's sources and the kernel driver, copied into `directory` (another clone's path)."""
    directory.mkdir(parents=True)
    for source in list(HOST_DIR.glob("*.[ch]")) + [DRIVER_SOURCE]:
        shutil.copy(source, directory / source.name)
    return [p for p in sorted(directory.glob("*.c")) if p.name != "main.c"]


def test_the_pinned_zig_is_the_one_that_runs():
    assert zig_version() == "0.17.1"


@pytest.mark.parametrize("machine", sorted(TRIPLES))
def test_two_directories_give_the_same_bytes(tmp_path, machine):
    outputs = []
    for name in ("first", "second/deeper"):
        sources = _copy_sources(tmp_path / name / "src")
        out = tmp_path / name / "program"
        compile_program(machine, sources, out, include_dirs=[sources[0].parent])
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    assert str(tmp_path).encode() not in outputs[0]  # no path of the build leaks into the bytes
    assert outputs[0][:4] == b"\x7fELF" and outputs[0][16] in (2, 3)  # ET_EXEC or ET_DYN


@pytest.mark.skipif(FILE is None, reason="file(1) is not installed")
@pytest.mark.parametrize("machine", sorted(TRIPLES))
def test_file_says_executable_for_the_machine(tmp_path, machine):
    sources = _copy_sources(tmp_path / "src")
    compile_program(machine, sources, tmp_path / "program", include_dirs=[tmp_path / "src"])
    said = subprocess.run([FILE, str(tmp_path / "program")], capture_output=True, text=True, check=True).stdout
    assert "ELF 64-bit LSB" in said and "executable" in said and DESCRIBED[machine] in said, said


def test_a_compiler_error_is_one_line(tmp_path):
    bad = tmp_path / "bad.c"
    bad.write_text("int main(void) { return undeclared; }\n")
    with pytest.raises(CoppeliusError) as caught:
        compile_program("x86_64", [bad], tmp_path / "bad")
    assert "bad.c" in str(caught.value) and "undeclared" in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(CoppeliusError, match="riscv64"):
        compile_program("riscv64", [bad], tmp_path / "bad")


def test_two_host_elfs_compile_the_runtime_with_the_same_command(tmp_path, monkeypatch):
    """Zig's cache keys an object by its source and its command line: the runtime's C files must be compiled with
    flags that name nothing of one link (its tables' temporary folder), or every host ELF recompiles them all
    (~10 s on 2 cores; a chain whose plan alone changed now rebuilds in ~0.3 s). The real compiler runs; its command
    lines are recorded on the way."""
    from coppelius.host import build
    commands = []
    run = subprocess.run

    def recording(command, **kwargs):
        commands.append(command)
        return run(command, **kwargs)
    monkeypatch.setattr(build.subprocess, "run", recording)
    identity = {"target": "cpu", "card": "numpy reference", "arch": "cpu", "plan_sha256": "0" * 64}
    for i, blob in enumerate((b"first tables", b"second tables, longer")):
        build.link_host_executable(tmp_path / f"host{i}.elf", "x86_64", identity, {"tables": blob})
    runtime = [c for c in commands if str(HOST_DIR / "main.c") in c]
    # the link's own files (the tables' object, the executable) may name its folder; no compiler flag may
    named = [[a for a in c if "coppelius-link-" in a] for c in runtime]
    assert len(runtime) == 2 and all([Path(a).name for a in n] == ["sections.o", "host.elf"] for n in named), named
    assert [a for a in runtime[0] if a not in named[0]] == [a for a in runtime[1] if a not in named[1]]
    assert (tmp_path / "host0.elf").read_bytes() != (tmp_path / "host1.elf").read_bytes()
