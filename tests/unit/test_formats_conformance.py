"""docs/formats.md's rules that need no built chain, held to Coppelius by readers and writers written from the
document alone (tests/conformance.py: deliberately independent of coppelius/formats and coppelius/host, so that
two implementations of one document must agree): the kernel catalog's layout rule, the table framing, the
step-size rule, sampling, the token stream, and the text of a result record as the C host writes it (compiled
from coppelius/host/result.c with tests/unit/host_json_text_driver.c and run as a program). The built chain's
files and the host ELF's runs are tests/cpu/test_formats_conformance_run.py's."""
import json
import math
import os
import random
import struct
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import conformance as doc
from coppelius.errors import CoppeliusError
from coppelius.formats import result, sampling, step_size, tables, tokens
from coppelius.formats.elf import host_machine
from coppelius.host.build import HOST_DIR, compile_program


def test_every_catalog_block_lays_its_parameters_at_natural_alignment_rounded_to_eight():
    catalog = doc.catalog()
    assert sorted(catalog) == list(range(len(catalog)))
    for kernel in catalog.values():
        offset = 0
        for p in kernel["params"]:
            size = 8 if p["kind"].endswith("*") else 4
            offset = (offset + size - 1) // size * size
            assert p["offset"] == offset, (kernel["name"], p)
            assert (p["access"] in ("r", "w", "rw")) == p["kind"].endswith("*"), (kernel["name"], p)
            offset += size
        assert kernel["block_bytes"] == (offset + 7) // 8 * 8, kernel["name"]
    adamw = next(k for k in catalog.values() if k["name"] == "adamw")
    assert {p["name"]: p["offset"] for p in adamw["params"]}.keys() >= {"step_size", "eps"}
    print(f"{len(catalog)} kernels: every parameter at its natural alignment, every block rounded up to 8")


def test_a_table_written_from_the_document_is_read_and_one_changed_field_is_refused():
    ring = doc.write_table("ring", [(0, 0, 3), (1, 3, 2)], b"blob")
    records, blob = tables.unpack("ring", ring)
    assert records.tolist() == [(0, 0, 3), (1, 3, 2)] and blob == b"blob"
    assert doc.read_table("ring", tables.pack("ring", records, b"blob")) == doc.read_table("ring", ring)
    for layout_name, (_, layout, _) in doc.TABLES.items():
        assert struct.calcsize(layout) == doc.RECORD_BYTES[layout_name] == tables.KINDS[layout_name][1].itemsize
        assert doc.u64_fields_aligned(layout), layout_name
    for name, changed in (("magic", b"COPRINX\0" + ring[8:]), ("version", ring[:8] + b"\2" + ring[9:]),
                          ("count", ring[:12] + b"\3" + ring[13:]), ("blob bytes", ring[:16] + b"\5" + ring[17:])):
        with pytest.raises(CoppeliusError) as refusal:
            tables.unpack("ring", changed)
        assert "\n" not in str(refusal.value)
        with pytest.raises(doc.Refused):
            doc.read_table("ring", changed)
        print(f"{name}: {refusal.value}")


@pytest.mark.parametrize("lr, beta1, beta2", [("3e-3", "9/10", "95/100"), ("6e-4", "9/10", "999/1000"),
                                              ("1/7", "1/3", "2/3")])
def test_the_step_size_rule_gives_the_binary32_of_the_exact_step_size(lr, beta1, beta2):
    lr, beta1, beta2 = Fraction(lr), Fraction(beta1), Fraction(beta2)
    ts = [*range(1, 120), 1000]
    for t in ts:
        ours = doc.step_word(float(lr), float(beta1), float(beta2), t)
        host = int(step_size.f32_word(step_size.step_size_host(float(lr), float(beta1), float(beta2), t)), 16)
        exact = int(step_size.f32_word(step_size.step_size_exact(lr, beta1, beta2, t)), 16)
        assert ours == host == exact, (t, hex(ours), hex(host), hex(exact))
    print(f"lr {lr} beta1 {beta1} beta2 {beta2}: {len(ts)} steps, the document's binary64 rule = formats/step_size "
          "= the exact ratio rounded once")


def test_sampling_by_the_document_draws_what_formats_sampling_draws():
    rng = np.random.default_rng(3)
    ours_gen, theirs_gen = doc.SplitMix64(2**64 - 1), sampling.Generator(2**64 - 1)
    assert [ours_gen.draw() for _ in range(5)] == [theirs_gen.next() for _ in range(5)]
    first = doc.SplitMix64(0).draw()
    assert first == 0xE220A8397B1DCDAF  # splitmix64's first output from state 0, as published
    for x in [0.0, -1e-300, -0.5, -1.0, -10.0, -699.9, -700.0, -700.1, *(-rng.random(200) * 50)]:
        assert doc.exp64(float(x)) == sampling.exp64(float(x)), x
    draws = 0
    for case in range(300):
        vocab, padded = int(rng.integers(1, 300)), 0
        padded = vocab + int(rng.integers(0, 8))
        row = (rng.normal(size=padded) * rng.choice([0.01, 1, 8])).astype(np.float16)
        if case % 3 == 0:
            row[: vocab // 2] = row[0]  # ties
        temperature = float(rng.choice([0.0, 0.5, 1.0, 1.7, 1e-3]))
        top_k = int(rng.integers(1, vocab + 1))
        seed = int(rng.integers(0, 2**63)) * 2 + case % 2
        ours = doc.sample_row(row, vocab, temperature, top_k, doc.SplitMix64(seed))
        theirs = sampling.sample([float(v) for v in row[:vocab]], temperature, top_k, sampling.Generator(seed))
        assert ours == theirs, (case, vocab, temperature, top_k, seed)
        draws += temperature != 0
    print(f"300 rows (ties, top-k, temperatures 0 to 1.7): the same ids; {draws} drawn")


def test_a_token_stream_written_from_the_document_is_read_and_one_changed_field_is_refused(tmp_path):
    ids = np.random.default_rng(0).integers(0, 65536, 1000)
    path = tmp_path / "t.bin"
    path.write_bytes(doc.write_tokens(ids))
    assert tokens.read(path).tolist() == ids.tolist()
    assert doc.read_tokens(tokens.encode(np.asarray(ids, np.uint16))).tolist() == ids.tolist()
    good = path.read_bytes()
    for name, data in (("magic", b"\0" + good[1:]), ("version", good[:4] + b"\7" + good[5:]),
                       ("count", good[:8] + struct.pack("<i", 999) + good[12:])):
        path.write_bytes(data)
        with pytest.raises(CoppeliusError) as refusal:
            tokens.read(path)
        assert "\n" not in str(refusal.value)
        print(f"{name}: {refusal.value}")


@pytest.fixture(scope="module")
def json_text(tmp_path_factory):
    out = tmp_path_factory.mktemp("json-text") / "driver"
    compile_program(host_machine(), [Path(__file__).with_name("host_json_text_driver.c"), HOST_DIR / "faults.c",
                                     HOST_DIR / "publish.c", HOST_DIR / "failure.c"], out, include_dirs=[HOST_DIR])

    def run(kind, items):
        proc = subprocess.run([str(out), kind, *items], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.splitlines()
    return run


def test_the_c_host_writes_floats_as_pythons_json_does(json_text):
    rng = random.Random(5)
    values = [0.0, -0.0, 1.0, 100.0, 200000.0, 1e15, 1e16, 1.5e-5, 1e-4, 9.999e-5, 123456789012345678.0, 0.1,
              5e-324, 1.7976931348623157e308, math.nan, math.inf, -math.inf, 2.0**-1074 * 3, 1234567.0, 1e22]
    values += [float(rng.randint(0, 10**rng.randint(0, 20))) * 10.0**rng.randint(-25, 5) for _ in range(1500)]
    values += [struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(1500)]
    expected = [json.dumps(v) for v in values]
    got = json_text("float", [struct.pack("<d", v)[::-1].hex() for v in values])
    wrong = [(e, g) for e, g in zip(expected, got) if e != g]
    assert not wrong, wrong[:10]
    print(f"{len(values)} floats: the C host's text is json.dumps's (e.g. {got[3]}, {got[5]}, {got[7]})")


def test_the_c_host_writes_strings_as_pythons_json_does_from_the_same_path_bytes(json_text):
    rng = random.Random(6)
    samples = [b"plain/path.bin", "dé \"q\"\\".encode(), b"x\xe9y", b"\n\r\t\b\f\x01\x1f\x7f", "😀€".encode(),
               b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\xf0\x9f\x98", b"\xe2\x82", b"\xff\xfe"]
    samples += [bytes(rng.randint(1, 255) for _ in range(rng.randint(1, 12))) for _ in range(2000)]
    samples += ["".join(chr(rng.choice([rng.randint(1, 0x7ff), rng.randint(0x800, 0xd7ff),
                                        rng.randint(0x10000, 0x10ffff)])) for _ in range(5)).encode()
                for _ in range(500)]
    expected = [json.dumps(os.fsdecode(s)) for s in samples]
    got = json_text("string", [s.hex() for s in samples])
    wrong = [(s, e, g) for s, e, g in zip(samples, expected, got) if e != g]
    assert not wrong, wrong[:10]
    print(f"{len(samples)} byte strings (UTF-8, not UTF-8, controls): the C host's text is json.dumps(os.fsdecode(b))")


def test_a_result_record_written_from_the_document_is_read_and_one_changed_field_is_refused(tmp_path):
    record = {"format": "coppelius-result", "version": 2, "operation": "predict", "target": "cpu",
              "plan_sha256": "0" * 64, "host_elf_sha256": "1" * 64, "tokens_per_step": 8,
              "tokens": {"path": "val.bin", "count": 100}, "checkpoint_in": {"path": "a.ckpt", "step": 3, "cursor": 0,
                                                                            "epoch": 0},
              "epoch": 0, "steps": [], "predict": [{"context": 0, "loss": 2.5}, {"context": 1, "loss": 1.5}],
              "mean_loss": 2.0, "predict_from": {"from": "start", "cursor": 0}, "skipped": 0, "published": [],
              "status": "completed", "timestamps": {"started": 1.0, "finished": 2.0, "seconds": 1.0},
              "tokens_per_second": 16.0}
    path = tmp_path / "result.json"
    path.write_text(json.dumps(record, sort_keys=True, indent=1) + "\n")
    assert result.read(path) == record
    proc = subprocess.run([sys.executable, "-m", "coppelius", "inspect", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    print("coppelius inspect:", proc.stdout.strip().splitlines()[:2])
    for key, value in (("version", 3), ("format", "x"), ("steps", {}), ("skipped", "0"), ("predict", [{"x": 1}])):
        path.write_text(json.dumps(record | {key: value}, sort_keys=True, indent=1) + "\n")
        proc = subprocess.run([sys.executable, "-m", "coppelius", "inspect", str(path)], capture_output=True,
                              text=True)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode != 0 and len(lines) == 1, proc.stderr
        print(f"{key} = {value!r}: {lines[0]}")
