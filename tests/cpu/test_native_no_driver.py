"""A GPU target's native host ELF on a machine without the NVIDIA driver: it starts, verifies itself
and every input, and only then stops with one line saying that no NVIDIA driver is present (the
h200 build natively on this x86-64 machine, the gb10 build under qemu-user)."""
import contextlib
import ctypes.util
import shutil
import subprocess
from pathlib import Path

import pytest

from coppelius.formats.elf import host_machine, read_host_elf
from coppelius.stages import build_chain
from test_train_cpu import config

QEMU, SYSROOT = shutil.which("qemu-aarch64"), Path("/usr/aarch64-linux-gnu")
pytestmark = [
    pytest.mark.skipif(host_machine() != "x86_64", reason="runs the x86-64 h200 build natively"),
    pytest.mark.skipif(ctypes.util.find_library("cuda") is not None, reason="this machine has the NVIDIA driver"),
]


def launch(elf, checkpoint, tokens, out, prefix=()):
    return subprocess.run([*prefix, str(elf), "--checkpoint", str(checkpoint), "--tokens", str(tokens),
                           "--validation", str(tokens), "--out", str(out)], capture_output=True, text=True, timeout=600)


def chain(tmp_path, target):
    with contextlib.chdir(tmp_path):
        return build_chain(config(tmp_path, target=target, steps=2, interval=1, batch=2), tmp_path / target)


def assert_stops_for_want_of_the_driver(proc, card, out):
    print(proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert "no NVIDIA driver is present on this machine (libcuda.so.1 cannot be loaded" in lines[0]
    assert lines[0].endswith(f"copy the host ELF, the checkpoint and the token files to a machine with the {card} "
                             f"and its driver and run it there with the same arguments")
    assert not (Path(out) / "checkpoints").exists() and not (Path(out) / "result.json").exists()


def test_the_h200_host_elf_checks_its_inputs_then_finds_no_driver(tmp_path):
    paths = chain(tmp_path, "h200")
    elf = read_host_elf(paths["elf"])
    assert (elf.machine, elf.identity["card"], elf.identity["driver_version"]) == ("x86_64", "NVIDIA H200", 13000)
    # the inputs are checked before the device: a wrong token file is refused first
    wrong = launch(paths["elf"], paths["checkpoint"], paths["checkpoint"], tmp_path / "out")
    assert wrong.returncode == 1 and "token" in wrong.stderr and "NVIDIA driver" not in wrong.stderr, wrong.stderr
    proc = launch(paths["elf"], paths["checkpoint"], paths["train"], tmp_path / "out")
    assert_stops_for_want_of_the_driver(proc, "NVIDIA H200", tmp_path / "out")


@pytest.mark.skipif(QEMU is None or not SYSROOT.is_dir(),
                    reason="qemu-aarch64 or the AArch64 libc is absent: apt-get install qemu-user libc6-arm64-cross")
def test_the_gb10_host_elf_under_qemu_checks_its_inputs_then_finds_no_driver(tmp_path):
    paths = chain(tmp_path, "gb10")
    assert read_host_elf(paths["elf"]).machine == "aarch64"
    qemu = (QEMU, "-L", str(SYSROOT))
    tampered = tmp_path / "tampered.elf"
    data = bytearray(Path(paths["elf"]).read_bytes())
    data[-100] ^= 1  # inside an embedded section (the certificate or the note): its digest no longer matches
    tampered.write_bytes(bytes(data))
    tampered.chmod(0o755)
    refused = launch(tampered, paths["checkpoint"], paths["train"], tmp_path / "out", qemu)
    assert refused.returncode == 1 and "NVIDIA driver" not in refused.stderr, refused.stderr
    proc = launch(paths["elf"], paths["checkpoint"], paths["train"], tmp_path / "out", qemu)
    assert_stops_for_want_of_the_driver(proc, "NVIDIA GB10", tmp_path / "out")
