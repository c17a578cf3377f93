"""The native host ELF's run (coppelius/host/run.c), executed as a subprocess: what the Python
interpreter's run does, the same way. A training run publishes under the interpreter's run
identity, writes a result record that `inspect` and `report` read, resumes N + N bit for bit,
predicts, and never prunes, replaces or loses another run's checkpoints. The Python interpreter on
the same host ELF is the reference its losses are compared with."""
import contextlib
import functools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from coppelius.formats import checkpoint, result
from coppelius.formats.elf import read_host_elf
from coppelius.host.build import link_host_executable
from coppelius.inspect import describe
from coppelius.report import report
from reference_host.interpreter import Program, Run
from coppelius.stages import build_chain
from test_train_cpu import config, run as run_python


@functools.cache
def _native_of(container: str, certificate: bytes | None = None) -> str:
    """The native host ELF of a built chain's host ELF (the same identity and sections, linked with
    the C runtime), beside it; with `certificate`, one embedding that certificate instead."""
    elf = read_host_elf(container)
    sections = dict(elf.sections) | ({"certificate": certificate} if certificate is not None else {})
    name = "native.elf" if certificate is None else f"native-{abs(hash(certificate)):x}.elf"
    path = Path(container).with_name(name)
    link_host_executable(path, elf.machine, elf.identity, sections)
    return str(path)


def native(paths: dict, certificate: bytes | None = None) -> str:
    """The chain's native host ELF (the elf stage links one), or one embedding `certificate`."""
    if certificate is None and Path(paths["elf"]).read_bytes()[16] == 2:  # ET_EXEC: the stage's own
        return paths["elf"]
    return _native_of(str(Path(paths["elf"]).resolve()), certificate)


def execute(elf, ckpt, tokens, out, operation="train", env=None, timeout=300, validation=None,
            options=()) -> subprocess.CompletedProcess:
    """The host ELF run as a program; a train run validates on `validation`, or on `tokens` when not given."""
    validation = ["--validation", str(validation or tokens)] if operation == "train" else []
    return subprocess.run([str(elf), "--checkpoint", str(ckpt), "--tokens", str(tokens), "--out", str(out),
                           "--operation", operation, *validation, *options], capture_output=True, text=True,
                          env=env, timeout=timeout)


def run(paths, checkpoint_path, out, operation="train", tokens=None, options=()) -> dict:
    """A native run that must complete (a train run validating on the chain's val.bin); its result record."""
    proc = execute(native(paths), checkpoint_path, tokens or paths["train"], out, operation, validation=paths["val"],
                   options=options)
    assert proc.returncode == 0, proc.stderr
    return result.read(Path(out) / "result.json")


@pytest.fixture(scope="module")
def chains(tmp_path_factory):
    root = tmp_path_factory.mktemp("native")
    with contextlib.chdir(root):  # the store (results/store) is relative to the working folder
        yield root, {name: build_chain(config(root, **overrides), root / name) for name, overrides in (
            ("whole", dict(steps=12, interval=6, batch=4)), ("half", dict(steps=6, interval=3, batch=4)),
            ("a", dict(steps=8, interval=2, keep=2, batch=2)),
            ("b", dict(steps=8, interval=2, keep=2, batch=2, seed=7)),
            ("p", dict(steps=2, interval=2, batch=2, eval_contexts=3)))}


def test_a_run_publishes_under_the_interpreters_run_identity_with_its_record(chains, tmp_path):
    _, c = chains
    elf, out = native(c["half"]), tmp_path / "train"
    proc = execute(elf, c["half"]["checkpoint"], c["half"]["train"], out)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[-1].startswith("step      6 (6/6) loss ")  # the progress line, not a tty
    record = result.read(out / "result.json")
    identity = Run(Program(elf), None, c["half"]["checkpoint"], c["half"]["train"], str(out), "train",
                   validation_path=c["half"]["val"]).identity
    folder = out / "checkpoints" / identity[:16]
    assert record["published"] == [str(folder / "step-000003.ckpt"), str(folder / "step-000006.ckpt")]
    assert (folder / "latest").read_text() == "step-000006.ckpt\n"
    assert (out / "final.ckpt").read_bytes() == (folder / "step-000006.ckpt").read_bytes()
    assert record["status"] == "completed" and record["skipped"] == 0 and [s["t"] for s in record["steps"]] == [1, 2, 3,
                                                                                                              4, 5, 6]
    assert record["host_elf_sha256"] == Program(elf).sha256 and record["operation"] == "train"
    assert record["checkpoint_in"] == {"path": c["half"]["checkpoint"], "step": 0, "cursor": 0, "epoch": 0}
    assert record["tokens_per_second"] > 0 and {"initial_loss", "final_loss", "timestamps"} <= set(record)
    header, _ = checkpoint.read(folder / "step-000006.ckpt")
    assert (header["step"], header["cursor"]) == (6, 6 * 4 * 64)
    assert describe(str(out / "result.json"))[0] == f"{out / 'result.json'}: result record (train, completed)"


def test_its_losses_follow_the_python_interpreter_on_the_same_host_elf(chains, tmp_path):
    """The C kernels are checked against numpy kernel by kernel (bit-exact for most, one fp16 ulp for
    gelu); over a run the two hosts agree to well under a thousandth of the loss. The weights are not
    bit-identical (docs: the native cpu host is its own reference for resume and crash bytes)."""
    _, c = chains
    ours = run(c["half"], c["half"]["checkpoint"], tmp_path / "native")
    python = run_python(c["half"], c["half"]["checkpoint"], tmp_path / "python")
    assert set(ours) == set(python) and [set(s) for s in ours["steps"]] == [set(s) for s in python["steps"]]
    text = (tmp_path / "native/result.json").read_text()  # written as Python's json.dumps(indent=1, sort_keys=True)
    assert text == json.dumps(json.loads(text), indent=1, sort_keys=True) + "\n"
    differences = [abs(a["loss"] - b["loss"]) for a, b in zip(ours["steps"], python["steps"])]
    print(f"largest loss difference native - python: {max(differences):.3e}")
    assert len(differences) == 6 and max(differences) < 1e-3
    _, a = checkpoint.read(ours["published"][-1])
    _, b = checkpoint.read(python["published"][-1])
    moved = np.abs(a["params"] - b["params"])
    print(f"weights after 6 steps: max difference {moved.max():.3e}, mean {moved.mean():.3e}")
    # an AdamW step moves a weight by at most about lr (3e-3) whatever its gradient, so a gradient near
    # zero whose sign the two hosts round differently moves it the other way: bounded by 2 lr a step
    assert moved.max() < 2 * 6 * 3e-3 and moved.mean() < 1e-4


def test_resume_is_bit_exact(chains, tmp_path):
    """N + N steps with a resume in between = 2N steps in one go: same losses, same checkpoint bytes."""
    _, c = chains
    one = run(c["whole"], c["whole"]["checkpoint"], tmp_path / "run-whole")
    first = run(c["half"], c["half"]["checkpoint"], tmp_path / "run-a")
    second = run(c["half"], first["published"][-1], tmp_path / "run-b")
    assert [s["loss"] for s in one["steps"]] == [s["loss"] for s in first["steps"] + second["steps"]]
    assert [s["t"] for s in second["steps"]] == list(range(7, 13))
    assert Path(one["published"][-1]).read_bytes() == Path(second["published"][-1]).read_bytes()
    assert checkpoint.read_header(second["published"][-1])["step"] == 12


def test_a_run_without_validation_skips_its_passes_and_publishes_the_same_bytes(chains, tmp_path):
    """DESIGN.md's train command has no --validation: the passes are skipped whole, and as a pass changes
    nothing a later step reads, the losses, predictions and every checkpoint are the same bytes."""
    _, c = chains
    scored = run(c["half"], c["half"]["checkpoint"], tmp_path / "scored")
    proc = subprocess.run([native(c["half"]), "--checkpoint", c["half"]["checkpoint"], "--tokens", c["half"]["train"],
                           "--out", str(tmp_path / "plain")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    plain = result.read(tmp_path / "plain/result.json")
    assert ([p["t"] for p in scored["validation"]["points"]] == [3, 6]
            and scored["validation"]["path"] == c["half"]["val"])
    assert (plain["validation"]["path"] is None and plain["validation"]["points"] == []
            and plain["status"] == "completed")
    assert plain["steps"] == [s | {"time": p["time"], "tokens_per_second": p["tokens_per_second"]}
                              for s, p in zip(scored["steps"], plain["steps"])]
    assert (plain["initial_loss"], plain["final_loss"]) == (scored["initial_loss"], scored["final_loss"])
    for name in ("final.ckpt", "predictions.bin"):
        assert (tmp_path / "plain" / name).read_bytes() == (tmp_path / "scored" / name).read_bytes(), name
    assert [Path(p).read_bytes() for p in plain["published"]] == [Path(p).read_bytes() for p in scored["published"]]


def test_the_train_command_is_run_with_operation_train(chains, tmp_path):
    """`coppelius train` (DESIGN.md: every stage has a command) runs the host ELF as `coppelius run` does."""
    _, c = chains
    ran = run(c["half"], c["half"]["checkpoint"], tmp_path / "run")
    proc = subprocess.run([sys.executable, "-m", "coppelius", "train", native(c["half"]), "--checkpoint",
                           c["half"]["checkpoint"], "--tokens", c["half"]["train"], "--validation", c["half"]["val"],
                           "--out", str(tmp_path / "train")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    trained = result.read(tmp_path / "train/result.json")
    assert ([s["loss"] for s in trained["steps"]] == [s["loss"] for s in ran["steps"]]
            and trained["operation"] == "train")
    assert trained["validation"]["points"] == ran["validation"]["points"]
    assert (tmp_path / "train/final.ckpt").read_bytes() == (tmp_path / "run/final.ckpt").read_bytes()


def test_predict_writes_predictions_and_publishes_nothing(chains, tmp_path):
    _, c = chains
    paths = c["p"]
    before = Path(paths["checkpoint"]).read_bytes()
    record = run(paths, paths["checkpoint"], tmp_path / "predict", operation="predict", tokens=paths["val"])
    predictions = np.fromfile(tmp_path / "predict/predictions.bin", "<i4")
    assert predictions.size == 3 * 2 * 64 and predictions.min() >= 0 and predictions.max() < 256
    assert record["published"] == [] and not (tmp_path / "predict/checkpoints").exists()
    assert len(record["predict"]) == 3 and abs(record["mean_loss"] - np.log(256)) < 0.2
    assert record["mean_loss"] == pytest.approx(np.mean([p["loss"] for p in record["predict"]]), abs=0, rel=1e-15)
    assert Path(paths["checkpoint"]).read_bytes() == before
    text = (tmp_path / "predict/result.json").read_text()
    assert text == json.dumps(json.loads(text), indent=1, sort_keys=True) + "\n"
    python = run_python(paths, paths["checkpoint"], tmp_path / "python", operation="predict", tokens=paths["val"])
    assert abs(python["mean_loss"] - record["mean_loss"]) < 1e-3


def test_runs_from_other_starts_never_prune_or_replace_each_others_checkpoints(chains, tmp_path):
    _, c = chains
    a, b = c["a"], c["b"]
    out = tmp_path / "train"
    first = run(a, a["checkpoint"], out)
    second = run(a, first["published"][-1], out)
    kept = {str(p): p.read_bytes() for p in sorted((out / "checkpoints").rglob("*")) if p.is_file()}
    again = run(a, a["checkpoint"], out)  # the same run as the first: the same folder, the same bytes
    assert again["status"] == "completed" and again["published"] == first["published"]
    other_seed = run(b, b["checkpoint"], out)
    assert other_seed["status"] == "completed"
    assert len([p for p in (out / "checkpoints").iterdir() if p.is_dir()]) == 3
    for record, steps in ((first, [6, 8]), (second, [14, 16]), (other_seed, [6, 8])):
        folder = Path(record["published"][-1]).parent
        assert [checkpoint.read_header(f)["step"] for f in sorted(folder.glob("step-*.ckpt"))] == steps
        checkpoint.read(folder / (folder / "latest").read_text().strip())
    for name, data in kept.items():
        assert Path(name).read_bytes() == data


def test_pruning_keeps_a_later_step_it_did_not_write(chains, tmp_path):
    _, c = chains
    out = tmp_path / "train"
    first = run(c["a"], c["a"]["checkpoint"], out)
    folder = Path(first["published"][-1]).parent
    later = folder / "step-000999.ckpt"
    shutil.copyfile(first["published"][-1], later)
    again = run(c["a"], c["a"]["checkpoint"], out)
    assert again["status"] == "completed" and later.exists()
    assert sorted(f.name for f in folder.glob("step-*.ckpt")) == ["step-000006.ckpt", "step-000008.ckpt",
                                                                  "step-000999.ckpt"]
    assert (folder / "latest").read_text().strip() == "step-000008.ckpt"


def test_a_published_checkpoint_is_never_replaced_by_other_bytes(chains, tmp_path):
    _, c = chains
    out = tmp_path / "train"
    first = run(c["a"], c["a"]["checkpoint"], out)
    mine = Path(first["published"][-1])
    data = bytearray(mine.read_bytes())
    data[checkpoint.HEADER_BYTES:checkpoint.HEADER_BYTES + 8] = b"\0" * 8
    changed = checkpoint.encode_header(checkpoint.header_for({"vocab": 1}, {}, 8, 0, bytes(data[4096:])))
    mine.write_bytes(changed + bytes(data[4096:]))  # another checkpoint under this run's name
    before = mine.read_bytes()
    proc = execute(native(c["a"]), c["a"]["checkpoint"], c["a"]["train"], out)
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 1 and "a published checkpoint is never replaced" in last and str(mine) in last
    assert mine.read_bytes() == before and not list(mine.parent.glob("*.tmp"))


def test_its_records_make_a_report(chains, tmp_path):
    _, c = chains
    paths = c["half"]
    run(paths, paths["checkpoint"], tmp_path / "train")
    run(paths, paths["checkpoint"], tmp_path / "evaluate", operation="predict", tokens=paths["val"])
    report(str(tmp_path / "train/result.json"), str(tmp_path / "evaluate/result.json"), paths["plan"],
           str(tmp_path / "report"))
    assert (tmp_path / "report/loss.png").stat().st_size > 0 and (tmp_path / "report/summary.md").read_text()


def test_a_report_refuses_the_plan_of_another_build_than_the_one_that_ran(chains, tmp_path):
    """The summary's model, tokens per step and the arena map come from --plan: a results/cpu/plan.json rebuilt
    by another `--config` (model=small) beside a tiny run's records made a summary of the wrong model, silently."""
    _, c = chains
    paths = c["half"]
    run(paths, paths["checkpoint"], tmp_path / "train")
    run(paths, paths["checkpoint"], tmp_path / "evaluate", operation="predict", tokens=paths["val"])
    trained, other = tmp_path / "train/result.json", c["whole"]["plan"]
    proc = subprocess.run([sys.executable, "-m", "coppelius", "report", "--train", trained, "--evaluate",
                           tmp_path / "evaluate/result.json", "--plan", other, "--out", tmp_path / "report"],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"coppelius report: {other}: the plan's sha256 is ") and (
        f"but the --train record {trained} ran plan {result.read(trained)['plan_sha256'][:16]}...; give the "
        f"plan.json of the build whose host ELF ran it") in proc.stderr
    assert not (tmp_path / "report").exists()
