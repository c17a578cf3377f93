"""The host runtime's readers in C (coppelius/host: sha256, token stream, publication, its own
sections), each run as a real program on files written here (tests/unit/host_readers_driver.c).
Refusals must be the one line the Python readers give; no input may crash them."""
import hashlib
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from coppelius.canonical import encode
from coppelius.errors import CoppeliusError
from coppelius.formats import elf as E, tokens as token_file
from coppelius.formats.elf import host_machine
from coppelius.host.build import HOST_DIR, compile_program

SOURCES = ("checkpoint.c", "failure.c", "publish.c", "self.c", "sha256.c", "tokens.c")
IDENTITY = {"target": "cpu", "card": "numpy reference", "plan_sha256": "a" * 64}
SECTIONS = {"launches": bytes(range(256)) * 3 + b"tail", "ring": b"\x01\x02\x03", "empty": b""}


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    out = tmp_path_factory.mktemp("readers") / "driver"
    compile_program(host_machine(),
                    [HOST_DIR / s for s in SOURCES] + [Path(__file__).with_name("host_readers_driver.c")],
                    out, include_dirs=[HOST_DIR])
    return str(out)


def _run(driver, *args) -> subprocess.CompletedProcess:
    run = subprocess.run([driver, *map(str, args)], capture_output=True, text=True, timeout=60)
    assert run.returncode in (0, 1), (run.returncode, run.stderr)  # never a signal, never a usage error
    if run.returncode == 1:
        assert run.stderr.count("\n") == 1 and not run.stdout, run.stderr
    return run


def _python_refusal(call) -> str:
    with pytest.raises(CoppeliusError) as caught:
        call()
    return str(caught.value)


@pytest.mark.parametrize("size", [0, 1, 55, 56, 63, 64, 65, 119, 120, 1000, 1 << 20])
def test_sha256_matches_hashlib(driver, tmp_path, size):
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    path = tmp_path / "data"
    path.write_bytes(data)
    assert _run(driver, "sha256", path).stdout.strip() == hashlib.sha256(data).hexdigest()


def test_a_good_token_file_is_read(driver, tmp_path):
    path = tmp_path / "train.bin"
    token_file.write(path, np.arange(1000) % 256)
    assert _run(driver, "tokens", path, 256, 0, 1000).stdout == "count 1000\n"
    assert _run(driver, "tokens", path, 256, 900, 100).returncode == 0


def _bad_token_files(tmp_path):
    good = token_file.encode(np.arange(100) % 50)
    header = np.frombuffer(good[:1024], "<i4").copy()
    cases = {"missing": None, "short": good[:100], "truncated": good[:-2], "longer": good + b"\0\0"}
    for field, value in (("magic", 20240521), ("version", 2), ("count", 101), ("count", -1)):
        h = header.copy()
        h[{"magic": 0, "version": 1, "count": 2}[field]] = value
        cases[f"{field}{value}"] = h.tobytes() + good[1024:]
    for name, data in cases.items():
        path = tmp_path / f"{name}.bin"
        if data is not None:
            path.write_bytes(data)
        yield path


def test_bad_token_files_are_refused_in_the_python_reader_s_words(driver, tmp_path):
    for path in _bad_token_files(tmp_path):
        run = _run(driver, "tokens", path, 256, 0, 1)
        assert run.returncode == 1
        assert run.stderr.strip() == _python_refusal(lambda: token_file.read(path)), path.name
    path = tmp_path / "vocab.bin"
    ids = np.arange(100) % 50
    ids[77] = 300
    token_file.write(path, ids)
    run = _run(driver, "tokens", path, 256, 10, 90)
    expected = _python_refusal(lambda: token_file.check_vocab(path, np.asarray(ids)[10:], 256, 10))
    assert run.stderr.strip() == expected
    assert _run(driver, "tokens", path, 256, 0, 77).returncode == 0  # the bad id is outside the range checked
    assert "token count is 100" in _run(driver, "tokens", path, 256, 50, 51).stderr


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(header=st.lists(st.integers(-2 ** 31, 2 ** 31 - 1), min_size=3, max_size=3),
       body=st.binary(max_size=300), magic=st.booleans())
def test_fuzzed_token_files_never_crash_the_reader(driver, tmp_path, header, body, magic):
    if magic:
        header[:2] = [token_file.MAGIC, token_file.VERSION]
    path = tmp_path / "fuzz.bin"
    path.write_bytes(np.array(header + [0] * 253, "<i4").tobytes() + body)
    run = _run(driver, "tokens", path, 256, 0, 0)
    try:
        count = token_file.read_header(path)
    except CoppeliusError as e:
        assert run.returncode == 1 and run.stderr.strip() == str(e)
    else:
        assert run.stdout == f"count {count}\n"


def test_publication_is_atomic(driver, tmp_path):
    path = tmp_path / "out" / "record.json"
    path.parent.mkdir()
    assert _run(driver, "publish", path, "first").returncode == 0
    assert _run(driver, "publish", path, "second").returncode == 0  # replaces
    assert path.read_text() == "second" and (path.stat().st_mode & 0o777) == 0o644
    assert _run(driver, "abandon", path, "third").returncode == 0
    assert path.read_text() == "second" and sorted(os.listdir(path.parent)) == ["record.json"]
    run = _run(driver, "publish", tmp_path / "missing" / "record.json", "x")
    assert run.returncode == 1 and "missing" in run.stderr and "No such file or directory" in run.stderr


def test_a_host_elf_is_verified_section_by_section(driver, tmp_path):
    path = tmp_path / "host.elf"
    E.write_host_elf(path, "x86_64", IDENTITY, SECTIONS)
    lines = _run(driver, "self", path).stdout.splitlines()
    assert lines == [f"{name} {len(data)} {hashlib.sha256(data).hexdigest()}" for name,
                     data in sorted(SECTIONS.items())]


def test_every_damaged_byte_of_the_note_and_sections_is_refused(driver, tmp_path):
    path = tmp_path / "host.elf"
    E.write_host_elf(path, "aarch64", IDENTITY, SECTIONS)
    good = path.read_bytes()
    elf = E.read_host_elf(path)
    from elftools.elf.elffile import ELFFile
    with open(path, "rb") as f:
        extents = {s.name: (s["sh_offset"], s["sh_size"]) for s in ELFFile(f).iter_sections() if s.name}
    for name, (offset, size) in extents.items():
        if name not in (".note.coppelius", ".coppelius.launches", ".coppelius.ring"):
            continue
        for spot in range(0, size, max(1, size // 40)):
            data = bytearray(good)
            data[offset + spot] ^= 0x04
            path.write_bytes(data)
            run = _run(driver, "self", path)
            assert run.returncode == 1 and str(path) in run.stderr, (name, spot)
    assert elf.sections == SECTIONS


_GOOD = E.build_host_elf("x86_64", IDENTITY, {"launches": b"L" * 40, "ring": b"ring"})


@st.composite
def _mutated(draw):
    data = bytearray(_GOOD)
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(data) - 1))
        kind = draw(st.sampled_from(["set", "cut", "insert", "word"]))
        if kind == "set":
            data[at] = draw(st.integers(0, 255))
        elif kind == "cut":
            del data[at:at + draw(st.integers(1, 64))]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif len(data) >= at + 8:
            data[at:at + 8] = draw(st.sampled_from([b"\xff" * 8, bytes(8), (1 << 40).to_bytes(8, "little")]))
    return bytes(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blob=st.one_of(st.binary(max_size=1024), _mutated()))
def test_fuzzed_host_elfs_never_crash_the_reader(driver, tmp_path, blob):
    path = tmp_path / "fuzz.elf"
    path.write_bytes(blob)
    run = _run(driver, "self", path)
    if run.returncode == 0:  # accepted: then every section it read is one the note vouches for
        assert run.stdout.splitlines() == [f"{n} {len(d)} {hashlib.sha256(d).hexdigest()}"
                                           for n, d in (("launches", b"L" * 40), ("ring", b"ring"))]



MODEL = {"context": 64, "heads": 4, "layers": 2, "vocab": 256, "width": 64}
LEARNER = {"beta1": "9/10", "beta2": "19/20", "eps": "1/100000000", "loss_scale": 1024, "lr": "3/1000"}


def _checkpoint_v3(step: int, cursor: int, payload: bytes, model=MODEL, learner=LEARNER, epoch: int = 0) -> bytes:
    """A version-3 checkpoint as docs/formats.md lays it out (the epoch at offset 104), written here."""
    body = encode({"format": "coppelius-checkpoint", "learner": learner, "model": model, "parts": ["params", "m", "v"]})
    fixed = struct.pack("<8sIIQQQ32s32sQ", b"COPPCKPT", 3, len(body), step, cursor, len(payload),
                        hashlib.sha256(payload).digest(), bytes(32), epoch)
    header = bytearray((fixed + body).ljust(4096, b"\0"))
    header[72:104] = hashlib.sha256(header).digest()
    return bytes(header) + payload


def test_a_checkpoint_is_read_checked_and_written_as_python_writes_it(driver, tmp_path):
    payload = np.random.default_rng(5).standard_normal(3000).astype("<f4").tobytes()
    path = tmp_path / "step-000012.ckpt"
    path.write_bytes(_checkpoint_v3(12, 12288, payload, epoch=5))
    model, learner = encode(MODEL).decode(), encode(LEARNER).decode()
    assert _run(driver, "checkpoint", path, model,
                learner).stdout == f"step 12 cursor 12288 epoch 5 payload_bytes {len(payload)}\n"
    (tmp_path / "payload").write_bytes(payload)
    written = tmp_path / "out" / "again.ckpt"
    written.parent.mkdir()
    assert _run(driver, "checkpoint-write", written, 12, 12288, 5, tmp_path / "payload", model, learner).returncode == 0
    assert written.read_bytes() == path.read_bytes()


def test_bad_checkpoints_are_refused_in_one_line(driver, tmp_path):
    payload = bytes(range(256)) * 4
    good = _checkpoint_v3(3, 99, payload)
    model, learner = encode(MODEL).decode(), encode(LEARNER).decode()
    cases = {"truncated": (good[:-1], "truncated"), "header": (good[:2000], "truncated"),
             "magic": (b"COPPCKPX" + good[8:], "magic"), "version": (good[:8] + b"\1" + good[9:], "version is 1"),
             "step": (good[:16] + b"\4" + good[17:], "header sha256"), "pad": (good[:4000] + b"\1" + good[4001:],
                     "header sha256"),
             "payload": (good[:5000] + b"\0" + good[5001:], "payload sha256")}
    for name, (data, named) in cases.items():
        path = tmp_path / f"{name}.ckpt"
        path.write_bytes(data)
        run = _run(driver, "checkpoint", path, model, learner)
        assert run.returncode == 1 and named in run.stderr and str(path) in run.stderr, (name, run.stderr)
    other = tmp_path / "other.ckpt"
    other.write_bytes(_checkpoint_v3(3, 99, payload, model={**MODEL, "width": 32}))
    run = _run(driver, "checkpoint", other, model, learner)
    assert run.returncode == 1 and "header model is" in run.stderr and '"width":32' in run.stderr
    other.write_bytes(_checkpoint_v3(3, 99, payload, learner={**LEARNER, "lr": "1/1000"}))
    assert "header learner is" in _run(driver, "checkpoint", other, model, learner).stderr
    assert "No such file" in _run(driver, "checkpoint", tmp_path / "missing.ckpt", model, learner).stderr
