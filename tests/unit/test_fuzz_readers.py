"""Every reader, fed random and mutated bytes, either parses or raises the project's own error."""
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from coppelius.errors import CoppeliusError
from coppelius.formats import checkpoint, result, tables, tokens
from coppelius.formats.program import check_program, decode, encode

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def mutations(valid: bytes):
    """Random bytes, or a valid encoding with bytes changed, cut or inserted."""
    edits = st.lists(st.tuples(st.integers(0, max(0, len(valid) - 1)), st.integers(0, 255)), max_size=6)
    mutated = st.builds(lambda e: bytes(_apply(valid, e)), edits)
    cut = st.builds(lambda n: valid[:n], st.integers(0, len(valid)))
    inserted = st.builds(lambda at, b: valid[:at] + b + valid[at:], st.integers(0, len(valid)), st.binary(max_size=64))
    return st.one_of(st.binary(max_size=4096), mutated, cut, inserted)


def _apply(data: bytes, edits) -> bytearray:
    out = bytearray(data)
    for at, value in edits:
        if out:
            out[at % len(out)] = value
    return out


def either_parses_or_refuses(fn):
    try:
        fn()
    except CoppeliusError as error:
        assert "\n" not in str(error)


VALID_TOKENS = tokens.encode(np.arange(300) % 256)
VALID_CHECKPOINT = (checkpoint.encode_header(checkpoint.header_for({"vocab": 4}, {"lr": "1/10"}, 3, 7, b"\1" * 48))
                    + b"\1" * 48)
VALID_RESULT = json.dumps({"format": "coppelius-result", "version": 2, "steps": []}).encode()


@FUZZ
@given(data=mutations(VALID_TOKENS))
def test_token_reader(tmp_path, data):
    path = tmp_path / "t.bin"
    path.write_bytes(data)
    either_parses_or_refuses(lambda: tokens.read(path, vocab=256))


@FUZZ
@given(data=mutations(VALID_CHECKPOINT))
def test_checkpoint_reader(tmp_path, data):
    path = tmp_path / "c.ckpt"
    path.write_bytes(data)

    def read():
        header = checkpoint.read_header(path)
        checkpoint.verify_payload(path, header)
        checkpoint.check_matches(path, header, {"vocab": 4}, {"lr": "1/10"})
    either_parses_or_refuses(read)


@FUZZ
@given(data=mutations(VALID_RESULT))
def test_result_reader(tmp_path, data):
    path = tmp_path / "r.json"
    path.write_bytes(data)
    either_parses_or_refuses(lambda: result.read(path))


@FUZZ
@given(kind=st.sampled_from(sorted(tables.KINDS)), data=st.data())
def test_table_reader(kind, data):
    records = np.zeros(3, tables.KINDS[kind][1])
    valid = tables.pack(kind, records, b"blob" if kind == "launches" else b"")
    blob = data.draw(mutations(valid))
    either_parses_or_refuses(lambda: tables.unpack(kind, blob))


PROGRAM = [["fill", {"buffer": "context", "offset": 0, "bytes": 8, "value": 0}], ["submit", {"ring": 0}],
           ["repeat", {"count": 2, "body": 1}], ["read-at-cursor", {"buffer": "context", "tokens": 2, "offset": 0}],
           ["operation", {"predict": 5, "generate": 5}], ["end", {}]]
JSON = st.recursive(st.none() | st.booleans() | st.integers(-5, 10) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=12)


@FUZZ
@given(data=st.data())
def test_host_program_decoder(data):
    text = json.dumps(PROGRAM).encode()
    choice = data.draw(st.sampled_from(["bytes", "structure"]))
    if choice == "bytes":
        blob = data.draw(mutations(text))
        try:
            program = json.loads(blob)
        except (ValueError, UnicodeDecodeError):
            return  # the interpreter turns undecodable JSON into its own error (test_elf covers the section)
    else:
        program = [list(step) for step in PROGRAM]
        at = data.draw(st.integers(0, len(program) - 1))
        program[at] = data.draw(JSON)
    either_parses_or_refuses(lambda: check_program(program, 1, {"context": {}}, "plan"))


@FUZZ
@given(data=st.data())
def test_binary_host_program_reader(data):
    """The program section as the run reads it: decoded and checked, or refused in one line."""
    blob = data.draw(mutations(encode(PROGRAM)))
    buffers = dict.fromkeys(tables.HOST_BUFFERS, {})
    either_parses_or_refuses(lambda: check_program(decode(blob, "program"), 1, buffers, "program"))


def test_valid_inputs_parse(tmp_path):
    (tmp_path / "t.bin").write_bytes(VALID_TOKENS)
    assert len(tokens.read(tmp_path / "t.bin", vocab=256)) == 300
    check_program(PROGRAM, 1, {"context": {}}, "plan")
    assert decode(encode(PROGRAM), "program") == PROGRAM


@pytest.fixture(scope="module")
def cubin():
    from coppelius.realize.nvrtc import compile_cubin
    return compile_cubin("sm_90")[0]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_cubin_reader(cubin, data):
    from coppelius.formats.cubin import read_cubin
    blob = data.draw(mutations(cubin[:20000]) | mutations(cubin))
    either_parses_or_refuses(lambda: read_cubin(blob))


WHOLE_RESULT = {"format": "coppelius-result", "version": 2, "operation": "train", "status": "completed", "skipped": 0,
                "epoch": 0, "published": [], "predict": [], "tokens_per_second": 10.0,
                "steps": [{"t": 1, "loss": 5.0, "tokens_per_second": 10.0}, {"t": 2, "loss": 4.0}],
                "validation": {"path": "val.bin", "contexts": 2, "points": [{"t": 2, "loss": 4.5}], "seconds": 0.1},
                "tokens": {"path": "train.bin", "count": 100}, "tokens_per_step": 10}


@pytest.mark.parametrize("change, named", [
    (lambda r: r.update(version=3), "version is 3, not 2"),
    (lambda r: r.update(validation=[]), "key 'validation' is [], not an object with a list of points"),
    (lambda r: r["validation"].update(points="x"), "key 'validation' is"),
    (lambda r: r["validation"]["points"][0].pop("loss"), "'validation' has no numeric 'loss'"),
    (lambda r: r["steps"][0].update(t="one"), "has no integer step 't'"),
    (lambda r: r["validation"]["points"][0].update(t=None), "has no integer step 't'"),
])
def test_a_changed_field_of_a_result_record_is_refused_by_inspect_in_one_line(tmp_path, change, named):
    """`coppelius inspect` (and report) read what result.read() vouched for: a record whose validation is not an
    object crashed inspect with an AttributeError; a wrong version was reported as a wrong format."""
    from coppelius.inspect import describe
    path = tmp_path / "result.json"
    path.write_text(json.dumps(WHOLE_RESULT))
    assert describe(str(path))[0].endswith("result record (train, completed)")
    record = json.loads(json.dumps(WHOLE_RESULT))
    change(record)
    path.write_text(json.dumps(record))
    with pytest.raises(CoppeliusError) as caught:
        describe(str(path))
    assert named in str(caught.value) and str(path) in str(caught.value) and "\n" not in str(caught.value)
