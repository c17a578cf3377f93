"""The native host ELF: the C runtime linked by zig cc around the identity note and the sections.

It must be a real executable for its machine (file, readelf), read by pyelftools and by
`coppelius inspect` like the ET_REL container, byte-identical across builds, and verify itself:
every section against the note's digest, refusing a damaged one in one line.
"""
import os
import shutil
import subprocess
import sys

import pytest

from coppelius.errors import CoppeliusError
from coppelius.formats import elf as E
from coppelius.host.build import link_host_executable
from coppelius.host.launch import _execute as _run_host

IDENTITY = {"target": "cpu", "card": "numpy reference", "arch": "numpy", "plan_sha256": "a" * 64}
SECTIONS = {"launches": bytes(range(256)) * 3 + b"tail", "ring": b"\x01\x02\x03", "plan": b'{"plan": 1}' * 100}
READELF, FILE, QEMU = shutil.which("readelf"), shutil.which("file"), shutil.which("qemu-aarch64")
SYSROOT = "/usr/aarch64-linux-gnu"
DESCRIBED = {"x86_64": ("x86-64", "Advanced Micro Devices X86-64"), "aarch64": ("ARM aarch64", "AArch64")}


@pytest.fixture(scope="module", params=sorted(E.MACHINES))
def linked(request, tmp_path_factory):
    path = tmp_path_factory.mktemp(request.param) / "host.elf"
    link_host_executable(path, request.param, IDENTITY, SECTIONS)
    return request.param, path


def _execute(machine, path, *args):
    if machine == E.host_machine():
        command = [str(path)]
    elif machine == "aarch64" and QEMU:
        command = [QEMU, "-L", SYSROOT, str(path)]
    else:
        pytest.skip(f"cannot run an {machine} program here (no qemu-aarch64: apt-get install qemu-user "
                    f"libc6-arm64-cross)")
    return subprocess.run(command + list(args), capture_output=True, text=True, timeout=60)


def test_it_is_read_like_the_container(linked):
    machine, path = linked
    elf = E.read_host_elf(path)
    assert (elf.machine, elf.identity, elf.sections) == (machine, IDENTITY, SECTIONS)
    assert path.read_bytes()[16] in (2, 3)  # ET_EXEC or ET_DYN
    container = E.describe(path)
    assert container[0] == f"machine: {machine} (e_machine {E.MACHINES[machine]})"


@pytest.mark.skipif(FILE is None or READELF is None, reason="file(1) or readelf (binutils) is not installed")
def test_file_and_readelf_see_an_executable(linked):
    machine, path = linked
    said = subprocess.run([FILE, str(path)], capture_output=True, text=True, check=True).stdout
    assert "ELF 64-bit LSB executable" in said and DESCRIBED[machine][0] in said, said
    run = subprocess.run([READELF, "-W", "-h", "-l", "-S", "-n", str(path)], capture_output=True, text=True)
    out = run.stdout + run.stderr
    assert run.returncode == 0 and "Warning" not in out and "Error" not in out, out
    assert f"Machine:                           {DESCRIBED[machine][1]}" in out and "EXEC" in out
    for name in [".note.coppelius"] + [f".coppelius.{n}" for n in SECTIONS]:
        assert name in out
    assert "LOAD" in out and "INTERP" in out


def test_two_links_give_the_same_bytes(linked, tmp_path):
    machine, path = linked
    again = tmp_path / "deeper" / "host.elf"
    again.parent.mkdir()
    link_host_executable(again, machine, IDENTITY, dict(reversed(list(SECTIONS.items()))))
    assert again.read_bytes() == path.read_bytes()


def test_it_needs_only_the_c_library_and_opens_libcuda_itself(linked):
    """DESIGN.md, train: at run time the host ELF needs libc and, on a GPU target, only the NVIDIA driver, opened with
    dlopen: its dynamic section names glibc's own libraries and nothing else (no libpython, no libcuda, no toolkit,
    no search path), and the driver's name is a string it hands to dlopen."""
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    machine, path = linked
    with open(path, "rb") as f:
        elf = ELFFile(f)
        tags = [tag for section in elf.iter_sections() if isinstance(section, DynamicSection)
                for tag in section.iter_tags()]
        interpreter = next(s for s in elf.iter_segments() if s["p_type"] == "PT_INTERP").get_interp_name()
    needed = sorted(tag.needed for tag in tags if tag.entry.d_tag == "DT_NEEDED")
    assert needed == ["libc.so.6", "libdl.so.2", "libm.so.6", "libpthread.so.0"], needed
    assert not [tag.entry.d_tag for tag in tags if tag.entry.d_tag in ("DT_RPATH", "DT_RUNPATH")]
    assert interpreter == {"x86_64": "/lib64/ld-linux-x86-64.so.2", "aarch64": "/lib/ld-linux-aarch64.so.1"}[machine]
    assert b"libcuda.so.1\0" in path.read_bytes()

def test_it_verifies_itself(linked):
    machine, path = linked
    run = _execute(machine, path, "--verify")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    inspected = E.describe(path)
    assert lines[0] == inspected[0]
    assert lines[2:] == [line for line in inspected if line.startswith("section ")]
    assert lines[1] == ('identity: {"arch":"numpy","card":"numpy reference","plan_sha256":"' + "a" * 64 +
                        '","target":"cpu"}')
    refused = _execute(machine, path, "--checkpoint", "x")
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1 and "--verify" in refused.stderr


def test_a_damaged_section_is_refused_by_it_and_by_python(linked, tmp_path):
    machine, path = linked
    data = bytearray(path.read_bytes())
    from elftools.elf.elffile import ELFFile
    with open(path, "rb") as f:
        extents = {s.name: s["sh_offset"] for s in ELFFile(f).iter_sections() if s.name.startswith(".coppelius.")}
    for name, offset in extents.items():
        damaged = tmp_path / f"damaged-{name}.elf"
        data_copy = bytearray(data)
        data_copy[offset] ^= 0x10
        damaged.write_bytes(data_copy)
        damaged.chmod(0o755)
        run = _execute(machine, damaged, "--verify")
        assert run.returncode == 1 and run.stderr.count("\n") == 1, run.stderr
        assert f"section {name} sha256" in run.stderr and str(damaged.name) in run.stderr
        with pytest.raises(CoppeliusError, match=name):
            E.read_host_elf(damaged)


def test_a_changed_byte_outside_its_sections_is_refused_by_it_and_by_python(linked, tmp_path):
    machine, path = linked
    from elftools.elf.elffile import ELFFile
    with open(path, "rb") as f:  # (its constants: a changed instruction might run before the check can)
        constants = ELFFile(f).get_section_by_name(".rodata")
        where = constants["sh_offset"] + constants["sh_size"] // 2
    data = bytearray(path.read_bytes())
    data[where] ^= 0x01
    damaged = tmp_path / "damaged-code.elf"
    damaged.write_bytes(bytes(data))
    damaged.chmod(0o755)
    run = _execute(machine, damaged, "--verify")
    assert run.returncode == 1 and run.stderr.count("\n") == 1, run.stderr
    assert "whole-file sha256" in run.stderr and "the file is damaged" in run.stderr
    with pytest.raises(CoppeliusError, match="the file is damaged"):
        E.read_host_elf(damaged)
    with pytest.raises(CoppeliusError, match="the file is damaged"):
        E.read_host_elf(_write(tmp_path / "short.elf", path.read_bytes() + b"\0"))  # one byte longer


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


def test_a_program_that_faults_is_refused_in_one_line_by_coppelius_run():
    faulting = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"]
    with pytest.raises(CoppeliusError, match=r"the host ELF died of SIGSEGV; check the file with `coppelius inspect`"):
        _run_host(faulting, dict(os.environ))


@pytest.mark.skipif(shutil.which("qemu-x86_64") is None, reason="qemu-x86_64 (qemu-user) is not installed")
def test_the_x86_64_host_elf_on_a_cpu_without_avx2_says_so_in_one_line(tmp_path):
    """The x86-64 build targets x86-64-v3; on an older CPU (qemu's Nehalem: SSE4.2, no AVX2, FMA or F16C) it stops
    in one line before anything else, rather than dying of SIGILL in a kernel; on a Haswell it runs."""
    path = tmp_path / "host.elf"
    link_host_executable(path, "x86_64", IDENTITY, SECTIONS)
    old = subprocess.run(["qemu-x86_64", "-cpu", "Nehalem", str(path), "--verify"], capture_output=True, text=True,
                         timeout=60)
    assert old.returncode == 1 and old.stdout == "", old
    assert [line for line in old.stderr.splitlines() if not line.startswith("qemu-x86_64: warning")] == [
        f"{path}: this CPU lacks AVX2/FMA (x86-64-v3), which the x86-64 host ELF is built for; run it on a newer "
        f"x86-64 host"]
    new = subprocess.run(["qemu-x86_64", "-cpu", "Haswell", str(path), "--verify"], capture_output=True, text=True,
                         timeout=60)
    assert new.returncode == 0, new.stderr
