"""The cpu host ELF built for AArch64 trains under qemu-user exactly as the x86-64 build does: the
same per-step losses and every published checkpoint byte-identical (so the AdamW step words, which
every weight, m and v depend on, were equal at every step), and the same predictions."""
import contextlib
import shutil
import subprocess
from pathlib import Path

import pytest

from coppelius.formats import result
from coppelius.formats.elf import host_machine, read_host_elf
from coppelius.host.build import link_host_executable
from coppelius.stages import build_chain
from test_native_run import execute
from test_train_cpu import config

QEMU, SYSROOT = shutil.which("qemu-aarch64"), Path("/usr/aarch64-linux-gnu")
pytestmark = [
    pytest.mark.skipif(host_machine() != "x86_64", reason="compares an AArch64 build with this x86-64 machine's"),
    pytest.mark.skipif(QEMU is None or not SYSROOT.is_dir(),
                       reason="qemu-aarch64 or the AArch64 libc is absent: apt-get install qemu-user "
                              "libc6-arm64-cross"),
]


def under_qemu(elf, ckpt, tokens, out, operation, validation) -> dict:
    validation = ["--validation", str(validation)] if operation == "train" else []
    proc = subprocess.run([QEMU, "-L", str(SYSROOT), str(elf), "--checkpoint", str(ckpt), "--tokens", str(tokens),
                           "--out", str(out), "--operation", operation, *validation], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    return result.read(Path(out) / "result.json")


def test_an_aarch64_cpu_host_elf_trains_bit_identically_under_qemu(tmp_path):
    with contextlib.chdir(tmp_path):
        paths = build_chain(config(tmp_path, steps=6, interval=3, batch=2), tmp_path / "chain")
    elf = read_host_elf(paths["elf"])
    assert elf.machine == "x86_64"
    arm = tmp_path / "aarch64.elf"
    link_host_executable(arm, "aarch64", elf.identity, elf.sections)
    assert read_host_elf(arm).machine == "aarch64"
    for operation, tokens, out in (("train", paths["train"], "train"), ("predict", paths["val"], "predict")):
        proc = execute(paths["elf"], paths["checkpoint"], tokens, tmp_path / "x86_64" / out, operation,
                       validation=paths["val"])
        assert proc.returncode == 0, proc.stderr
        under_qemu(arm, paths["checkpoint"], tokens, tmp_path / "aarch64" / out, operation, paths["val"])
    x86, aarch64 = (result.read(tmp_path / machine / "train/result.json") for machine in ("x86_64", "aarch64"))
    assert [s["loss"] for s in aarch64["steps"]] == [s["loss"] for s in x86["steps"]]
    assert [s["step_word"] for s in aarch64["steps"]] == [s["step_word"] for s in x86["steps"]]  # the AdamW words
    assert aarch64["validation"]["points"] == x86["validation"]["points"]
    assert [Path(p).name for p in aarch64["published"]] == ["step-000003.ckpt", "step-000006.ckpt"]
    for theirs, ours in zip(aarch64["published"], x86["published"]):
        assert Path(theirs).read_bytes() == Path(ours).read_bytes(), Path(ours).name
    predictions = [(tmp_path / machine / "predict/predictions.bin").read_bytes() for machine in ("x86_64", "aarch64")]
    assert predictions[0] == predictions[1]
