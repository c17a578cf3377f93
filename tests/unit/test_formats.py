"""docs/formats.md is the contract the C host runtime is written from: these tests hold it to the
code (every record's size and field offsets, the op codes, the kernel catalog), and the host
program's encoding and walker to their definitions."""
import re
import struct

import numpy as np
import pytest
import yaml

from coppelius.config import ROOT, resolve
from coppelius.errors import CoppeliusError
from coppelius.formats import checkpoint, program as host_program, tables
from coppelius.formats.kernels import CATALOG, KERNEL_IDS, catalog_table
from coppelius.plan.build import build_plan

DOC = (ROOT / "docs" / "formats.md").read_text()
SECTIONS = {"launches": "Launches", "relocations": "Relocations", "commands": "Commands", "ring": "Ring",
            "step_words": "Step words", "program": "Host program", "planes": "Planes", "buffers": "Host buffers",
            "run": "Run"}
TYPES = {"u32": "<u4", "u64": "<u8", "f64": "<f8", "u32[3]": ("<u4", 3)}


def doc_fields(title: str) -> list[tuple[int, str, str]]:
    """(offset, type, field) rows of the record table under the section `title`."""
    section = DOC.split(f"\n## {title} (")[1].split("\n## ")[0]
    rows = re.findall(r"^\| (\d+) \| (u32\[3\]|u32|u64|f64) \| (\w+)", section, re.M)
    return [(int(o), t, f) for o, t, f in rows]


@pytest.mark.parametrize("kind", sorted(SECTIONS))
def test_every_record_is_laid_out_as_documented(kind):
    magic, dtype = tables.KINDS[kind]
    assert f"`{magic.decode('ascii').replace(chr(0), chr(92) + '0')}`" in DOC
    rows = doc_fields(SECTIONS[kind])
    assert [f for _, _, f in rows] == list(dtype.names), kind
    for offset, kind_, field in rows:
        assert dtype.fields[field][1] == offset, (kind, field)
        want = TYPES[kind_]
        assert dtype.fields[field][0] == (np.dtype(want) if isinstance(want, str) else np.dtype(want)), (kind, field)
    assert f"Record, {dtype.itemsize} bytes" in DOC.split(f"\n## {SECTIONS[kind]} (")[1] or \
        f"One record, {dtype.itemsize} bytes" in DOC.split(f"\n## {SECTIONS[kind]} (")[1]
    assert dtype.itemsize % 4 == 0 and all(dtype.fields[f][1] % 8 == 0 for f in dtype.names
                                           if dtype.fields[f][0].itemsize == 8)


def test_op_codes_buffers_and_kinds_are_documented():
    for op, code in host_program.CODES.items():
        assert f"| {code} | `{op}` |" in DOC, op
    for index, name in enumerate(tables.HOST_BUFFERS):
        assert f"| {index} | {name} |" in DOC, name
    assert "0 launch, 1 memset, 2 h2d (host to device), 3 d2h, 4 d2d" in DOC
    assert tables.OPS == {"launch": 0, "memset": 1, "h2d": 2, "d2h": 3, "d2d": 4}
    assert {n: c for n, (c, _) in tables.DTYPES.items()} == {"u8": 0, "f16": 1, "f32": 2, "i32": 3}
    assert "dtype: 0 u8, 1 f16, 2 f32, 3 i32" in DOC and "lifetime: 0 persistent, 1 step, 2 transfer" in DOC


def test_the_kernel_catalog_in_the_document_is_the_code():
    assert catalog_table() in DOC
    ids = [k.id for k in CATALOG]
    assert sorted(ids) == list(range(len(ids)))  # ids are written by hand: unique, none skipped
    assert KERNEL_IDS["adamw"] == 0 and KERNEL_IDS["residual_forward"] == 17  # never renumbered


def plan():
    defaults = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    return build_plan(resolve(defaults | {"steps": 6, "interval": 3, "eval_contexts": 2, "batch": 2}))


def test_the_program_encodes_and_decodes_to_itself():
    steps = plan()["program"]
    data = host_program.encode(steps)
    records, _ = tables.unpack("program", data)
    assert len(records) == len(steps) and host_program.decode(data, "t") == steps
    write = next(r for r in records if r["op"] == host_program.CODES["write"] and r["file"] == 1)
    assert int(write["offset"]) == host_program.APPEND  # the predictions are appended


def test_nested_repeats_are_counted_by_flatten():
    inner = [["cursor-advance", {"tokens": 1}], ["adamw-scalars", {"slot": 0}]]
    flat = host_program.flatten([host_program.repeat(3, [host_program.repeat(2, inner), ["end", {}]])])
    assert flat[0] == ["repeat", {"count": 3, "body": 4}] and flat[1] == ["repeat", {"count": 2, "body": 2}]
    walked = [op for _, op, _ in host_program.walk(flat, "train")]
    assert walked == ["cursor-advance", "adamw-scalars"] * 2  # `end` inside the outer body stops the run


def test_the_walker_runs_the_plan_as_the_schedule_says():
    p = plan()
    train = [op for _, op, _ in host_program.walk(p["program"], "train")]
    predict = [op for _, op, _ in host_program.walk(p["program"], "predict")]
    assert train.count("adamw-scalars") == 6 and train.count("checkpoint-publish") == 2
    assert predict.count("record-stat") == 2 and "adamw-scalars" not in predict


def test_an_unknown_op_code_is_refused_in_one_line():
    records, _ = tables.unpack("program", host_program.encode(plan()["program"]))
    records = records.copy()
    records["op"][3] = 99
    with pytest.raises(CoppeliusError, match=r"^x: host program step 3 has op code 99, not one of 1\.\.23"):
        host_program.decode(tables.pack("program", records), "x")


def test_the_checkpoint_header_counts_epochs_and_refuses_older_versions(tmp_path):
    payload = bytes(range(48))
    header = checkpoint.encode_header(checkpoint.header_for({"vocab": 4}, {"lr": "1/10"}, 7, 640, payload, epoch=3))
    assert struct.unpack_from("<QQQ", header, 16) == (7, 640, len(payload))
    assert struct.unpack_from("<Q", header, 104) == (3,)  # the epoch, where version 2 had zeros
    path = tmp_path / "a.ckpt"
    path.write_bytes(header + payload)
    assert {k: checkpoint.read_header(path)[k] for k in ("step", "cursor", "epoch")} == {"step": 7, "cursor": 640,
                                                                                          "epoch": 3}
    older = bytearray(header)
    older[8:12] = (2).to_bytes(4, "little")  # version 2: the same layout, no epoch at 104
    path.write_bytes(bytes(older) + payload)
    with pytest.raises(CoppeliusError, match=r"^\S+a.ckpt: checkpoint version is 2, not 3; start from a checkpoint of "
                                             r"this Coppelius \(`snakemake` writes init.ckpt\)$"):
        checkpoint.read_header(path)
