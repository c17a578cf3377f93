"""docs/formats.md against what Coppelius writes and reads, on a built cpu chain and its native host ELF run as a
subprocess. The readers and writers (tests/conformance.py) are written from the document alone, deliberately
independent of coppelius/formats and coppelius/host: the host ELF's sections and identity note, every table, the
checkpoints, token streams, result records and predictions a run writes must parse with them and keep every
invariant the document states; a checkpoint and a token stream they write must be accepted by the host ELF and the
Python readers, and the same file with one field changed refused in one line."""
import contextlib
import hashlib
import json
import subprocess
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import conformance as doc
from conformance import Refused
from coppelius.stages import build_chain
from test_train_cpu import config

BATCH, CONTEXT = 2, 64
N = BATCH * CONTEXT


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    root = tmp_path_factory.mktemp("conformance")
    with contextlib.chdir(root):
        paths = build_chain(config(root, steps=4, interval=2, keep=2, batch=BATCH), root / "c")
    paths = {k: Path(v) for k, v in paths.items()}
    out = root / "train"
    proc = host(paths["elf"], "--checkpoint", paths["checkpoint"], "--tokens", paths["train"], "--validation",
                paths["val"], "--out", out)
    assert proc.returncode == 0, proc.stderr
    return {**paths, "root": root, "out": out, "elf_doc": doc.read_host_elf(paths["elf"])}


def host(elf, *args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(elf), *map(str, args)], capture_output=True, text=True, timeout=300, **kw)


def refused_in_one_line(proc: subprocess.CompletedProcess) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1, (proc.returncode, proc.stderr)
    return lines[0]


def tables(chain) -> dict:
    return {name: doc.read_table(name, chain["elf_doc"]["sections"][name]) for name in doc.TABLES}


def plan_of(chain) -> dict:
    return json.loads(chain["elf_doc"]["sections"]["plan"])


# ---- the host ELF ---------------------------------------------------------------------------------------------
def test_the_host_elf_holds_every_section_256_aligned_with_the_digests_its_note_names(chain):
    elf = chain["elf_doc"]
    assert set(elf["sections"]) == set(doc.SECTIONS), sorted(elf["sections"])
    for name, offset in elf["offsets"].items():
        assert offset % 256 == 0, (name, offset)
    identity_notes = elf["notes"]
    print("notes:", [(n["name"], n["type"], len(n["desc"])) for n in identity_notes])
    note = json.loads(identity_notes[0]["desc"])
    assert doc.canonical(note) == identity_notes[0]["desc"]
    for name, data in elf["sections"].items():
        assert note["sections"][name] == hashlib.sha256(data).hexdigest(), name
    identity = note["identity"]
    print("identity:", identity)
    assert identity["target"] == "cpu"
    assert identity["plan_sha256"] == hashlib.sha256(elf["sections"]["plan"]).hexdigest()
    assert identity["certificate_sha256"] == hashlib.sha256(elf["sections"]["certificate"]).hexdigest()
    realized = {name: hashlib.sha256(elf["sections"][name]).hexdigest() for name in doc.REALIZED}
    assert identity["realization_sha256"] == hashlib.sha256(doc.canonical(realized)).hexdigest()
    assert identity["memory_bytes"] == doc.read_table("run", elf["sections"]["run"])[0][0]["arena_bytes"]
    assert set(identity) == {"target", "card", "arch", "plan_sha256", "realization_sha256", "certificate_sha256",
                             "memory_bytes"}
    assert (note["format"], note["version"]) == ("coppelius-host-elf", 1)
    assert [(n["name"], n["type"]) for n in elf["notes"]] == [(b"Coppelius\0", 1), (b"Coppelius\0", 2)]
    assert elf["notes"][1]["desc"] == hashlib.sha256(elf["notes"][0]["desc"]).digest()
    print(f"{len(elf['sections'])} sections, each at a multiple of 256, digests as the note says")


def test_the_whole_file_digest_covers_the_file_with_its_own_32_bytes_zeroed(chain):
    elf = chain["elf_doc"]
    offset, digest = elf["file_digest"]
    data = bytearray(elf["data"])
    data[offset:offset + 32] = bytes(32)
    assert hashlib.sha256(data).digest() == digest
    print(f".coppelius_sha256 at {offset:#x}: {digest.hex()}")


def test_a_changed_byte_of_the_host_elf_is_refused_in_one_line(chain, tmp_path):
    elf = chain["elf_doc"]
    for where in (elf["offsets"]["ring"] + 30, len(elf["data"]) - 1):
        data = bytearray(elf["data"])
        data[where] ^= 1
        changed = tmp_path / f"changed-{where}.elf"
        changed.write_bytes(data)
        changed.chmod(0o755)
        line = refused_in_one_line(host(changed, "--checkpoint", chain["checkpoint"], "--tokens", chain["train"],
                                        "--out", tmp_path / f"out-{where}"))
        print(f"byte {where:#x} changed: {line}")


def test_plan_and_certificate_are_canonical_json_and_one_newline(chain):
    for name in ("plan", "certificate"):
        data = chain["elf_doc"]["sections"][name]
        assert doc.canonical(json.loads(data)) + b"\n" == data, name
    certificate = json.loads(chain["elf_doc"]["sections"]["certificate"])
    assert certificate["step_horizon"] >= 4
    print("plan and certificate: canonical; step_horizon", certificate["step_horizon"])


# ---- tables ---------------------------------------------------------------------------------------------------
def test_every_table_has_its_framing_record_size_and_aligned_u64_fields(chain):
    for name, (magic, layout, _) in doc.TABLES.items():
        data = chain["elf_doc"]["sections"][name]
        records, blob = doc.read_table(name, data)
        assert doc.RECORD_BYTES[name] == len(records and data[24:24 + doc.RECORD_BYTES[name]]) or not records
        assert doc.u64_fields_aligned(layout), name
        print(f"{name:12s} {magic!r}: {len(records)} records of {doc.RECORD_BYTES[name]} bytes, blob {len(blob)}")
    with pytest.raises(Refused):
        doc.read_table("ring", chain["elf_doc"]["sections"]["ring"] + b"\0")


def test_launches_hold_catalog_blocks_whose_pointers_are_their_relocations_arena_offsets(chain):
    t = tables(chain)
    catalog = doc.catalog()
    launches, blob = t["launches"]
    relocations, _ = t["relocations"]
    planes, _ = t["planes"]
    end, next_reloc = 0, 0
    for i, launch in enumerate(launches):
        kernel = catalog[launch["kernel"]]
        assert launch["param_bytes"] == kernel["block_bytes"], (i, kernel["name"])
        assert launch["param_offset"] % 8 == 0 and launch["param_offset"] == (end + 7) // 8 * 8, i
        end = launch["param_offset"] + launch["param_bytes"]
        assert launch["cluster"] in (0, 1) or launch["grid"][0] % launch["cluster"] == 0
        assert launch["reloc_start"] == next_reloc, i  # the relocations in launch order
        next_reloc += launch["reloc_count"]
        owned = {relocations[r]["param_offset"] - launch["param_offset"]: relocations[r]
                 for r in range(launch["reloc_start"], launch["reloc_start"] + launch["reloc_count"])}
        for p in kernel["params"]:
            if not p["kind"].endswith("*"):
                continue
            (value,) = np.frombuffer(blob, "<u8", 1, launch["param_offset"] + p["offset"])
            if p["offset"] in owned:
                r = owned.pop(p["offset"])
                assert value == planes[r["plane"]]["offset"] + r["plane_offset"], (i, p["name"])
                assert r["plane_offset"] <= planes[r["plane"]]["bytes"]
            else:
                assert value == 0, (i, p["name"])  # null: no relocation
        assert not owned, (i, owned)  # a relocation patches a pointer parameter, nothing else
    assert end <= len(blob) and next_reloc == len(relocations)
    print(f"{len(launches)} launches, {len(relocations)} relocations: blocks 8-aligned end to end, every pointer its "
          "relocation's arena offset or null")


def test_commands_ring_and_unused_fields(chain):
    t = tables(chain)
    commands, _ = t["commands"]
    ring, _ = t["ring"]
    planes, _ = t["planes"]
    buffers, _ = t["buffers"]
    launch_order = [c["a"] for c in commands if c["op"] == 0]
    assert launch_order == list(range(len(t["launches"][0]))), "launches are in command-stream order"
    for i, c in enumerate(commands):
        used = {0: {"a", "flags"}, 1: {"dst", "dst_offset", "bytes", "value"},
                2: {"src", "dst", "src_offset", "dst_offset", "bytes"}, 3: {"src", "dst", "src_offset", "dst_offset",
                                                                          "bytes"},
                4: {"src", "dst", "src_offset", "dst_offset", "bytes"}}[c["op"]]
        for field in set(c) - used - {"op"}:
            assert c[field] == 0, (i, c)
        src = {2: buffers, 3: planes, 4: planes}.get(c["op"])
        dst = {1: planes, 2: planes, 3: buffers, 4: planes}.get(c["op"])
        if src:
            assert c["src_offset"] + c["bytes"] <= src[c["src"]]["bytes"], (i, c)
        if dst:
            assert c["dst_offset"] + c["bytes"] <= dst[c["dst"]]["bytes"], (i, c)
        assert c["value"] <= 255 and c["flags"] in (0, 1)
    offset = 0
    for i, entry in enumerate(ring):
        assert entry["piece"] == i and entry["offset"] == offset, (i, entry)
        offset += entry["length"]
    assert offset == len(commands)
    print(f"{len(commands)} commands in {len(ring)} ring entries laid end to end; unused fields 0")


def test_step_words_are_the_rule_at_step_one_and_eps_times_the_loss_scale(chain):
    t = tables(chain)
    launches, blob = t["launches"]
    words, _ = t["step_words"]
    (run,), _ = t["run"]
    learner = plan_of(chain)["learner"]
    adamw = [i for i, launch in enumerate(launches) if doc.catalog()[launch["kernel"]]["name"] == "adamw"]
    assert [w["launch"] for w in words] == adamw
    eps = doc.f32_bits(float(Fraction(learner["eps"]) * learner["loss_scale"]))
    for w in words:
        base = launches[w["launch"]]["param_offset"]
        assert (w["step_size_offset"], w["eps_offset"]) == (base + 64, base + 68)
        assert w["step_size"] == doc.step_word(run["lr"], run["beta1"], run["beta2"], 1)
        assert w["eps"] == eps
        assert np.frombuffer(blob, "<u4", 2, w["step_size_offset"]).tolist() == [w["step_size"], w["eps"]]
    print(f"{len(words)} AdamW launches: step word {words[0]['step_size']:#010x}, eps {eps:#010x}")


def test_the_run_record_holds_the_plans_numbers_and_the_checkpoints_model_and_learner(chain):
    t = tables(chain)
    (run,), blob = t["run"]
    plan = plan_of(chain)
    ckpt = doc.read_checkpoint(chain["checkpoint"].read_bytes())
    model = blob[:run["model_json_bytes"]]
    learner = blob[run["model_json_bytes"]:]
    assert len(learner) == run["learner_json_bytes"]
    assert model == doc.canonical(ckpt["description"]["model"])
    assert learner == doc.canonical(ckpt["description"]["learner"])
    assert run["payload_bytes"] == ckpt["payload_bytes"] == 12 * sum(x["count"] for x in plan["tensors"])
    assert run["tokens_per_step"] == N and run["context_tokens"] == N + 1
    assert run["vocab"] == ckpt["description"]["model"]["vocab"]
    for name in ("lr", "beta1", "beta2"):
        assert run[name] == float(Fraction(plan["learner"][name])), name
    assert (run["steps"], run["interval"], run["keep"]) == (4, 2, 2)
    planes, _ = t["planes"]
    buffers, _ = t["buffers"]
    for p in planes:
        assert p["offset"] + p["bytes"] <= run["arena_bytes"] and p["dtype"] <= 3 and p["lifetime"] <= 2
    model = ckpt["description"]["model"]
    sizes = [None, 4 * (N + 1), 4 * (N + 1), 4 * N + 4, 4 * N + 4, 4 * N, 4 * N,
             2 * model["context"] * model["vocab_padded"]]
    assert len(buffers) == 8
    for i, (b, size) in enumerate(zip(buffers, sizes)):
        assert b["offset"] % 256 == 0 and b["offset"] + b["bytes"] <= run["host_bytes"], i
        assert size is None or b["bytes"] == size, (i, b, size)
    print("run record:", {k: v for k, v in run.items()})


def test_the_host_program_walks_as_the_document_says_with_unused_fields_zero(chain):
    t = tables(chain)
    program, blob = t["program"]
    (run,), _ = t["run"]
    buffers, _ = t["buffers"]
    ring, _ = t["ring"]
    assert blob == b""
    for i, r in enumerate(program):
        op = doc.OPS[r["op"]]
        for field in set(r) - doc.OP_FIELDS.get(op, set()) - {"op"}:
            assert r[field] == 0, (i, op, field, r)
        if op in ("submit", "reissue"):
            assert r["ring"] < len(ring)
        if op in ("read", "write") and r["file"] == 0:
            assert r["offset"] + r["bytes"] <= run["payload_bytes"] and r["bytes"] <= buffers[r["buffer"]]["bytes"]
        if op == "record-stat":  # a step reads its losses and the flag after them, the others the losses
            n = run["tokens_per_step"]
            assert r["value"] <= 4 and 4 * n + 4 * (r["value"] == 1) <= buffers[r["buffer"]]["bytes"]
        if op == "repeat":
            assert i + r["body"] < len(program)
    for operation, n, validate in (("train", 0, True), ("train", 0, False), ("predict", 0, True),
                                   ("generate", 3, True)):
        trace = [doc.OPS[program[i]["op"]] for i in doc.walk(program, operation, n, validate)]
        issued = set()
        for i in doc.walk(program, operation, n, validate):
            r = program[i]
            if doc.OPS[r["op"]] == "submit":
                issued.add(r["ring"])
            if doc.OPS[r["op"]] == "reissue":
                assert r["ring"] in issued, (operation, i)
        print(f"{operation} (N={n}, validate={validate}): {len(trace)} steps, "
              f"{trace.count('adamw-scalars')} adamw-scalars, {trace.count('checkpoint-publish')} publications, "
              f"{trace.count('sample-token')} sample-token")
        if operation == "train":
            assert trace.count("adamw-scalars") == 4 and trace.count("checkpoint-publish") == 2
            assert ("validation-begin" in trace) == validate
        if operation == "generate":
            assert trace.count("sample-token") == 3 and "adamw-scalars" not in trace


# ---- what a run writes ----------------------------------------------------------------------------------------
def test_published_checkpoints_parse_and_hold_the_runs_step_cursor_and_epoch(chain):
    published = sorted((chain["out"] / "checkpoints").glob("*/step-*.ckpt"))
    assert [p.name for p in published] == ["step-000002.ckpt", "step-000004.ckpt"]
    for path in [chain["checkpoint"], *published, chain["out"] / "final.ckpt"]:
        c = doc.read_checkpoint(path.read_bytes())
        d = c["description"]
        assert set(d) == {"format", "learner", "model", "parts"}, sorted(d)
        assert len(c["payload"]) == c["payload_bytes"]
        print(f"{path.name}: step {c['step']} cursor {c['cursor']} epoch {c['epoch']} "
              f"payload {c['payload_bytes']}; {d['format']} parts {d['parts']}")
    last = doc.read_checkpoint(published[-1].read_bytes())
    assert last["step"] == 4 and last["cursor"] == 4 * N
    latest = (published[-1].parent / "latest").read_bytes()
    assert latest == b"step-000004.ckpt\n"
    print("latest:", latest)


def test_the_result_record_is_sorted_indent_one_json_with_the_documented_keys(chain):
    text = (chain["out"] / "result.json").read_text()
    record = json.loads(text)
    assert text == json.dumps(record, sort_keys=True, indent=1) + "\n"
    assert (record["format"], record["version"], record["operation"], record["status"]) == (
        "coppelius-result", 2, "train", "completed")
    keys = {"operation", "target", "plan_sha256", "host_elf_sha256", "tokens_per_step", "tokens", "checkpoint_in",
            "epoch", "steps", "initial_loss", "final_loss", "validation", "skipped", "published", "status",
            "timestamps", "tokens_per_second", "tokens_per_second_counts", "format", "version"}
    print("keys beyond the document's for a train run:", sorted(set(record) - keys))
    assert keys <= set(record)
    assert record["host_elf_sha256"] == hashlib.sha256(chain["elf"].read_bytes()).hexdigest()
    assert record["plan_sha256"] == hashlib.sha256(chain["elf_doc"]["sections"]["plan"]).hexdigest()
    assert record["tokens"]["count"] == len(doc.read_tokens(chain["train"].read_bytes()))
    assert record["tokens_per_step"] == N
    (run,), _ = tables(chain)["run"]
    for s in record["steps"]:
        assert set(s) == {"t", "loss", "skipped", "time", "tokens_per_second", "epoch", "step_word"}
        assert s["step_word"] == f"{doc.step_word(run['lr'], run['beta1'], run['beta2'], s['t']):#010x}", s
    assert [p["t"] for p in record["validation"]["points"]] == [2, 4]
    assert set(record["timestamps"]) == {"started", "finished", "seconds"}
    print("result.json: sorted keys, indent 1;", len(record["steps"]), "steps, step words by the rule")


def test_predictions_are_the_first_forwards_n_int32_argmaxes(chain):
    predictions = np.fromfile(chain["out"] / "predictions.bin", "<i4")
    assert predictions.size == N and 0 <= predictions.min() and predictions.max() < 256
    print("predictions.bin:", predictions.size, "int32, in [0, 256)")


# ---- what Coppelius reads -------------------------------------------------------------------------------------
def test_a_checkpoint_written_from_the_document_trains_and_one_changed_field_is_refused(chain, tmp_path):
    init = doc.read_checkpoint(chain["checkpoint"].read_bytes())
    ours = doc.write_checkpoint(init["description"], init["payload"], step=5, cursor=3 * N, epoch=1)
    path = tmp_path / "ours.ckpt"
    path.write_bytes(ours)
    from coppelius.formats import checkpoint
    header = checkpoint.read_header(path)
    print("the Python reader:", {k: header[k] for k in ("step", "cursor")})
    proc = host(chain["elf"], "--checkpoint", path, "--tokens", chain["train"], "--out", tmp_path / "run")
    assert proc.returncode == 0, proc.stderr
    record = json.loads((tmp_path / "run" / "result.json").read_text())
    assert record["checkpoint_in"] | {"path": None} == {"path": None, "step": 5, "cursor": 3 * N, "epoch": 1}
    (run,), _ = tables(chain)["run"]
    assert [s["t"] for s in record["steps"]] == [6, 7, 8, 9]
    assert [s["step_word"] for s in record["steps"]] == [
        f"{doc.step_word(run['lr'], run['beta1'], run['beta2'], t):#010x}" for t in (6, 7, 8, 9)]
    print("our checkpoint at step 5, cursor 3N, epoch 1 trained to t = 9")

    def changed(name, data, python_refuses=True):
        p = tmp_path / f"{name}.ckpt"
        p.write_bytes(data)
        line = refused_in_one_line(host(chain["elf"], "--checkpoint", p, "--tokens", chain["train"],
                                        "--out", tmp_path / f"out-{name}"))
        if python_refuses:  # what every reader checks: magic, version, header digest, size, payload digest
            with pytest.raises(Exception) as python:
                checkpoint.read(p)
            line += f" | Python: {python.value}"
        else:  # the description: the run holds it to the plan's
            checkpoint.read(p)
        print(f"{name}: host: {line}")
        return line

    b = bytearray(ours)
    b[16] ^= 1
    changed("step-not-redigested", bytes(b))
    b = bytearray(ours)
    b[8] = 2
    changed("version-2", doc.redigest_header(bytes(b)))
    b = bytearray(ours)
    b[-1] ^= 0x40
    changed("payload-byte", bytes(b))
    b = bytearray(ours)
    b[0] = ord("X")
    changed("magic", doc.redigest_header(bytes(b)))
    changed("truncated", ours[:-4])
    changed("longer", ours + bytes(4))
    description = json.loads(json.dumps(init["description"]))
    description["model"]["width"] = 32
    assert "model.width is 32" in changed("model", doc.write_checkpoint(description, init["payload"]), False)
    d = init["description"]
    for name, other in (("format", d | {"format": "x"}), ("extra-key", d | {"x": 1}), ("parts", d | {"parts": ["m"]})):
        assert "byte for byte" in changed(name, doc.write_checkpoint(other, init["payload"]), False)
    spaced = json.dumps(init["description"], sort_keys=True).encode()  # JSON, not canonical JSON
    b = bytearray(doc.write_checkpoint(init["description"], init["payload"]))
    b[112:4096] = spaced.ljust(4096 - 112, b"\0")
    b[12:16] = len(spaced).to_bytes(4, "little")
    assert "byte for byte" in changed("not-canonical", doc.redigest_header(bytes(b)), False)


def test_the_header_padding_is_written_zero_and_covered_only_by_the_header_digest(chain, tmp_path):
    init = chain["checkpoint"].read_bytes()
    n = int.from_bytes(init[12:16], "little")
    assert not any(init[112 + n:4096])
    b = bytearray(init)
    b[4095] = 1
    path = tmp_path / "padded.ckpt"
    path.write_bytes(doc.redigest_header(bytes(b)))
    proc = host(chain["elf"], "--checkpoint", path, "--tokens", chain["train"], "--out", tmp_path / "run")
    assert proc.returncode == 0, proc.stderr
    b[4095] = 2  # not redigested
    path.write_bytes(bytes(b))
    print("a padding byte changed:", refused_in_one_line(
        host(chain["elf"], "--checkpoint", path, "--tokens", chain["train"], "--out", tmp_path / "run2")))


def test_a_token_stream_written_from_the_document_is_read_and_one_changed_field_is_refused(chain, tmp_path):
    ids = np.random.default_rng(1).integers(0, 256, 4 * N + 1)
    path = tmp_path / "ours.bin"
    path.write_bytes(doc.write_tokens(ids))
    from coppelius.formats import tokens
    print("the Python reader:", len(tokens.read(path)), "ids")
    proc = host(chain["elf"], "--checkpoint", chain["checkpoint"], "--tokens", path, "--out", tmp_path / "run")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "run" / "result.json").read_text())["tokens"]["count"] == len(ids)

    def changed(name, data):
        p = tmp_path / f"{name}.bin"
        p.write_bytes(data)
        line = refused_in_one_line(host(chain["elf"], "--checkpoint", chain["checkpoint"], "--tokens", p,
                                        "--out", tmp_path / f"out-{name}"))
        print(f"{name}: {line}")

    good = doc.write_tokens(ids)
    changed("magic", b"\1" + good[1:])
    changed("version", good[:4] + b"\2" + good[5:])
    changed("count", good[:8] + (len(ids) + 1).to_bytes(4, "little") + good[12:])
    changed("id-above-vocab", doc.write_tokens(np.r_[ids[:-1], 300]))
    changed("short", doc.write_tokens(ids[:N]))


def test_a_record_naming_paths_that_are_not_ascii_or_not_utf8_is_pythons_json_text(chain, tmp_path):
    import os
    from coppelius.formats import result
    for name in ("d\u00e9 \"q\" \U0001f600".encode(), b"x\xe9y\tz"):
        folder = os.fsencode(tmp_path) + b"/" + name
        os.makedirs(folder)
        tokens = folder + b"/v.bin"
        with open(tokens, "wb") as f:
            f.write(chain["val"].read_bytes())
        out = tmp_path / f"out-{len(name)}"
        proc = subprocess.run([str(chain["elf"]), "--operation", "predict", "--checkpoint", str(chain["checkpoint"]),
                               "--tokens", tokens, "--out", str(out)], capture_output=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        text = (out / "result.json").read_bytes()
        record = json.loads(text)
        assert text == (json.dumps(record, sort_keys=True, indent=1) + "\n").encode()
        assert record["tokens"]["path"] == os.fsdecode(tokens)
        assert result.read(out / "result.json")["operation"] == "predict"
        print(f"tokens at {tokens!r}: the record says {json.dumps(record['tokens']['path'])}")
