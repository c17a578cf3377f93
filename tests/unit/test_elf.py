"""The host ELF container: round trip, determinism, readelf, and refusal of damaged files."""
import os
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from coppelius.canonical import sha256
from coppelius.errors import CoppeliusError
from coppelius.formats import elf as E

IDENTITY = {"target": "h200", "card": "NVIDIA H200", "plan": "a" * 64, "certificate": "b" * 64,
            "steps": 20}
SECTIONS = {"launches": bytes(range(256)) * 3 + b"tail", "ring": b"\x01\x02\x03",
            "adamw": b"\x00" * 1000, "host_program": b"submit;read;write" * 7}
READELF = shutil.which("readelf") or ("/usr/bin/readelf" if os.path.exists("/usr/bin/readelf") else None)


def _write(tmp_path, machine="x86_64", sections=SECTIONS, name="plan.elf"):
    path = tmp_path / name
    E.write_host_elf(path, machine, IDENTITY, sections)
    return path


def _extents(path):
    """name -> (offset, size) of every section, from readelf-independent pyelftools."""
    from elftools.elf.elffile import ELFFile
    with open(path, "rb") as f:
        return {s.name: (s["sh_offset"], s["sh_size"]) for s in ELFFile(f).iter_sections() if s.name}


@pytest.mark.parametrize("machine", sorted(E.MACHINES))
def test_round_trip(tmp_path, machine):
    path = _write(tmp_path, machine)
    got = E.read_host_elf(path)
    assert got.machine == machine
    assert got.identity == IDENTITY
    assert got.sections == SECTIONS
    assert got.digests == {k: sha256(v) for k, v in SECTIONS.items()}
    lines = E.describe(path)
    assert lines[0].startswith(f"machine: {machine}")
    assert "identity.target: h200" in lines and "identity.steps: 20" in lines
    ring = sha256(SECTIONS["ring"])[:16]
    assert f"section .coppelius.ring: 3 bytes, sha256 {ring}" in lines
    data = path.read_bytes()
    assert data[18] | data[19] << 8 == E.MACHINES[machine]
    for name, (offset, size) in _extents(path).items():
        if name.startswith(".coppelius."):
            assert offset % 256 == 0


def test_empty_and_no_sections(tmp_path):
    for sections in ({}, {"empty": b""}):
        got = E.read_host_elf(_write(tmp_path, "aarch64", sections))
        assert got.sections == sections and got.identity == IDENTITY


def test_byte_identical(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    pa = _write(a)
    pb = _write(b, sections=dict(reversed(list(SECTIONS.items()))))
    assert pa.read_bytes() == pb.read_bytes()
    assert E.build_host_elf("x86_64", IDENTITY, SECTIONS) == pa.read_bytes()


def test_atomic_publication_leaves_no_temporaries(tmp_path):
    path = _write(tmp_path)
    _write(tmp_path)  # replace an existing file
    assert sorted(os.listdir(tmp_path)) == ["plan.elf"]
    with pytest.raises(CoppeliusError):
        E.write_host_elf(tmp_path / "bad.elf", "riscv64", IDENTITY, SECTIONS)
    with pytest.raises(CoppeliusError):
        E.write_host_elf(tmp_path / "bad.elf", "x86_64", {"lr": 0.1}, SECTIONS)
    with pytest.raises(CoppeliusError):
        E.write_host_elf(tmp_path / "bad.elf", "x86_64", IDENTITY, {"a/b": b""})
    assert sorted(os.listdir(tmp_path)) == ["plan.elf"]
    assert E.read_host_elf(path).sections == SECTIONS


def test_host_machine(monkeypatch):
    for raw, name in [("x86_64", "x86_64"), ("AMD64", "x86_64"), ("aarch64", "aarch64"), ("arm64", "aarch64")]:
        monkeypatch.setattr(E.platform, "machine", lambda raw=raw: raw)
        assert E.host_machine() == name
    monkeypatch.setattr(E.platform, "machine", lambda: "riscv64")
    with pytest.raises(CoppeliusError, match="riscv64"):
        E.host_machine()


@pytest.mark.skipif(READELF is None, reason="readelf (binutils) is not installed")
@pytest.mark.parametrize("machine, shown", [("x86_64", "Advanced Micro Devices X86-64"), ("aarch64", "AArch64")])
def test_readelf_lists_it_cleanly(tmp_path, machine, shown):
    path = _write(tmp_path, machine)
    run = subprocess.run([READELF, "-W", "-h", "-S", "-n", str(path)], capture_output=True, text=True)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "Warning" not in out and "Error" not in out, out
    assert f"Machine:                           {shown}" in out
    for name in [".note.coppelius", ".shstrtab"] + [f".coppelius.{n}" for n in SECTIONS]:
        assert name in out
    assert "Coppelius" in out  # the note's owner


def test_flipped_byte_in_each_section_is_refused(tmp_path):
    path = _write(tmp_path)
    good = path.read_bytes()
    extents = _extents(path)
    assert set(extents) == {".note.coppelius", ".shstrtab"} | {f".coppelius.{n}" for n in SECTIONS}
    for name, (offset, size) in extents.items():
        # every byte of the note and the string table; first, middle and last of a data section
        spots = range(size) if not name.startswith(".coppelius.") else {0, size // 2, size - 1}
        for spot in spots:
            for flip in (0x01, 0x80):
                data = bytearray(good)
                data[offset + spot] ^= flip
                path.write_bytes(data)
                with pytest.raises(CoppeliusError) as caught:
                    E.read_host_elf(path)
                assert name in str(caught.value), (name, spot, str(caught.value))
                assert "\n" not in str(caught.value)


def test_flipped_byte_anywhere_is_refused(tmp_path):
    path = _write(tmp_path, sections={"ring": b"\x01\x02\x03"})
    good = path.read_bytes()
    for at in range(len(good)):
        data = bytearray(good)
        data[at] ^= 0x20
        path.write_bytes(data)
        with pytest.raises(CoppeliusError, match=str(path)):
            E.read_host_elf(path)


def test_truncated_garbage_and_non_elf(tmp_path):
    good = _write(tmp_path).read_bytes()
    bad = tmp_path / "bad.elf"
    lengths = [0, 1, 3, 4, 16, 63, 64, 100, 300, len(good) // 2, len(good) - 64, len(good) - 1]
    for n in lengths:
        bad.write_bytes(good[:n])
        with pytest.raises(CoppeliusError, match="bad.elf"):
            E.read_host_elf(bad)
    for blob in [os.urandom(4096), b"\x7fELF" + os.urandom(4096), good[:64] + os.urandom(4096),
                 good + b"\0", b"#!/bin/sh\necho not an elf\n"]:
        bad.write_bytes(blob)
        with pytest.raises(CoppeliusError, match="bad.elf"):
            E.read_host_elf(bad)
    # a real ELF that is not a host ELF: this Python interpreter
    with pytest.raises(CoppeliusError):
        E.read_host_elf(os.path.realpath(shutil.which("python3") or "/bin/sh"))
    with pytest.raises(CoppeliusError, match="missing.elf"):
        E.read_host_elf(tmp_path / "missing.elf")
    with pytest.raises(CoppeliusError):
        E.read_host_elf(tmp_path)  # a directory


def test_big_endian_and_elf32_and_unknown_machine(tmp_path):
    good = bytearray(_write(tmp_path).read_bytes())
    bad = tmp_path / "bad.elf"
    for at, value, word in [(4, 1, "EI_CLASS"), (5, 2, "EI_DATA"), (18, 40, "e_machine"), (16, 2, "e_type")]:
        data = bytearray(good)
        data[at] = value
        bad.write_bytes(data)
        with pytest.raises(CoppeliusError, match=word):
            E.read_host_elf(bad)


_GOOD = E.build_host_elf("aarch64", IDENTITY, {"launches": b"L" * 40, "ring": b"ring"})


@st.composite
def _mutated(draw):
    data = bytearray(_GOOD)
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["set", "flip", "cut", "insert", "word"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "set" and data:
            data[at] = draw(st.integers(0, 255))
        elif kind == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "cut":
            del data[at:at + draw(st.integers(1, 64))]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "word" and len(data) >= at + 8:  # a header-sized field set to an extreme
            data[at:at + 8] = draw(st.sampled_from([b"\xff" * 8, bytes(8), (1 << 40).to_bytes(8, "little")]))
    return bytes(data)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blob=st.one_of(st.binary(max_size=2048), st.binary(max_size=512).map(lambda b: b"\x7fELF" + b), _mutated()))
def test_read_either_parses_or_refuses(tmp_path, blob):
    path = tmp_path / "fuzz.elf"
    path.write_bytes(blob)
    try:
        got = E.read_host_elf(path)
    except CoppeliusError as e:
        assert "\n" not in str(e) and "fuzz.elf" in str(e)
    else:
        assert blob == _GOOD and got.sections["ring"] == b"ring"
