"""Whole programs on the cpu target: the plan's gradient against the float64 reference, resume
bit-exactness, predict-only runs, and the host ELF's machine."""
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from coppelius.config import ROOT, resolve
from coppelius.formats import checkpoint, tables
from coppelius.formats.elf import read_host_elf
from coppelius.kernels import gpt2
from coppelius.realize import realize
from coppelius.realize.tables import realized_tables
from coppelius.runtime.cpu import CpuDevice
from reference_host.interpreter import Program, Run
from coppelius.stages import build_chain

DEFAULTS = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def corpus(tmp_path) -> str:
    """A small deterministic corpus: enough tokens for the runs here, quick to prepare."""
    path = tmp_path / "corpus.txt"
    if not path.exists():
        sources = sorted((ROOT / "coppelius").rglob("*.py"))
        path.write_bytes(b"".join(p.read_bytes() for p in sources) * 2)
    return str(path)


def config(tmp_path, **overrides):
    return resolve(DEFAULTS | {"corpus": corpus(tmp_path), "eval_contexts": 2} | overrides)


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(paths, checkpoint_path, out, operation="train", tokens=None, predict_from="start"):
    """An interpreter run (a train run validating on the chain's val.bin); its result record."""
    program = Program(paths["elf"])
    validation = paths["val"] if operation == "train" else None
    return Run(program, CpuDevice(), checkpoint_path, tokens or paths["train"], out, operation,
               validation_path=validation, predict_from=predict_from).execute()


def loaded_device(cfg, directory: Path) -> tuple[dict, CpuDevice, dict, dict]:
    """A cpu chain's plan on the numpy device, its init checkpoint loaded: (plan, device, ring, parameters)."""
    plan = json.loads(Path(build_chain(cfg, directory)["plan"]).read_text())
    realization = realize(plan, cfg.target)
    realized = realized_tables(realization)
    device = CpuDevice()
    device.allocate(plan["arena"]["bytes"], plan["host"]["bytes"])
    device.load_program(realization["image"], realization["launches"], realization["relocations"],
                        realization["commands"], realization["ring"], realized["step_words"],
                        [p["offset"] for p in plan["arena"]["planes"]],
                        [plan["host"]["buffers"][name]["offset"] for name in tables.HOST_BUFFERS])
    ring = {name: i for i, name in enumerate(plan["ring"])}
    buffers = plan["host"]["buffers"]
    _, parts = checkpoint.read(directory / "init.ckpt")
    payload = np.concatenate([parts["params"], parts["m"], parts["v"]]).view(np.uint8)
    device.issue(ring["initialize"])
    for k, (offset, size) in enumerate(plan["contracts"]["checkpoint"]["chunks"]):
        device.host[buffers["staging"]["offset"]:][:size] = payload[offset:offset + size]
        device.issue(ring[f"load_stage_{k}"])
        device.issue(ring[f"load_scatter_{k}"])
    device.issue(ring["cast_weights"])  # the fp16 weights of the loaded parameters, as every run's load ends
    return plan, device, ring, parts


def test_plan_gradient_matches_float64_reference(in_tmp):
    """The update piece's fp16 gradients, unscaled, against the float64 model's: the plan's wiring."""
    cfg = config(in_tmp, batch=2, context=32, steps=1, interval=1)
    plan, device, ring, parts = loaded_device(cfg, in_tmp / "results/cpu")
    buffers = plan["host"]["buffers"]
    B, T = 2, 32
    context = np.random.default_rng(5).integers(0, 256, B * T + 1).astype("<i4")
    device.host[buffers["context"]["offset"]:][:4 * (B * T + 1)] = context.view(np.uint8)
    device.issue(ring["update"])

    params = {}
    for t in plan["tensors"]:
        start = t["payload_offset"]
        params[t["name"]] = parts["params"][start:start + t["count"]].astype(np.float64).reshape(t["shape"])
    loss, grads = gpt2.forward_backward(params, context[:-1].reshape(B, T), context[1:].reshape(B, T), 256, 4)
    losses = device.host[buffers["step_losses"]["offset"]:][:4 * B * T].view("<f4")
    print(f"loss: plan {losses.mean():.6f} reference {loss:.6f}")
    assert abs(losses.mean() - loss) < 2e-3

    grads_plane = next(p for p in plan["arena"]["planes"] if p["name"] == "grads")
    fp16 = device.arena[grads_plane["offset"]:grads_plane["offset"] + grads_plane["bytes"]].view("<f2")
    scale = plan["learner"]["loss_scale"]
    for t in plan["tensors"]:
        name = t["name"]
        ours = fp16[t["offset"]:t["offset"] + t["count"]].astype(np.float64) / scale
        ref = grads[name].ravel()
        error = np.linalg.norm(ours - ref) / max(np.linalg.norm(ref), 1e-30)
        print(f"{name:>9}: max diff {np.abs(ours - ref).max():.3e}, relative {error:.3e}")
        assert error < 5e-3, name


def test_the_sample_forward_computes_the_batch_forwards_logits_of_one_context(in_tmp):
    """generate's sample_forward (batch 1) gives the logits the batch's forward gives its first context (row 0 the
    window, every other row zeros): the rows of a forward do not meet. To fp16's noise, not to the bit, on this numpy
    device: its matmul (BLAS) sums a row in an order that depends on the row count (the C device's does not), and a
    last-bit difference in one layer's activations moves the next's (measured: 388 of 8192 logits differ, by at
    most 2.4e-4 where the largest is ~0.6); the bound is 4e-3 of the largest logit."""
    cfg = config(in_tmp, batch=4, context=32, steps=1, interval=1)
    plan, device, ring, _ = loaded_device(cfg, in_tmp / "results/cpu")
    B, T, Vp = 4, 32, plan["model"]["vocab_padded"]
    context_at = plan["host"]["buffers"]["context"]["offset"]
    logits = next(p for p in plan["arena"]["planes"] if p["name"] == "logits")
    window = np.zeros(B * T + 1, "<i4")
    window[:20] = np.random.default_rng(3).integers(0, 256, 20)
    rows = {}
    for piece in ("forward", "sample_forward"):
        device.host[context_at:][:4 * (B * T + 1)] = window.view(np.uint8)
        device.arena[logits["offset"]:logits["offset"] + logits["bytes"]] = 0
        device.issue(ring[piece])
        rows[piece] = device.arena[logits["offset"]:][:2 * T * Vp].view("<f2").astype(np.float32).reshape(T, Vp)
    batch, one = rows["forward"], rows["sample_forward"]
    largest = np.abs(batch).max()
    print(f"{T} rows of {Vp} logits: {np.count_nonzero(batch != one)} differ, the largest by "
          f"{np.abs(batch - one).max():.3g}; the largest logit {largest:.3g}")
    assert np.count_nonzero(batch) > T * Vp // 2 and np.abs(batch - one).max() <= 4e-3 * largest


def test_resume_is_bit_exact(in_tmp):
    """N + N steps with a resume in between = 2N steps in one go: same losses, same checkpoint bytes."""
    whole = build_chain(config(in_tmp, steps=12, interval=6, batch=4), in_tmp / "whole")
    half = build_chain(config(in_tmp, steps=6, interval=3, batch=4), in_tmp / "half")
    one = run(whole, whole["checkpoint"], in_tmp / "run-whole")
    first = run(half, half["checkpoint"], in_tmp / "run-a")
    second = run(half, first["published"][-1], in_tmp / "run-b")
    losses = [s["loss"] for s in one["steps"]]
    assert losses == [s["loss"] for s in first["steps"] + second["steps"]]
    assert [s["t"] for s in second["steps"]] == list(range(7, 13))
    final_whole, final_resumed = Path(one["published"][-1]), Path(second["published"][-1])
    print(f"final checkpoints: {final_whole.name} and {final_resumed.name}, {final_whole.stat().st_size} bytes")
    assert final_whole.read_bytes() == final_resumed.read_bytes()
    assert checkpoint.read_header(final_resumed)["step"] == 12


def test_predict_writes_predictions_and_publishes_nothing(in_tmp):
    paths = build_chain(config(in_tmp, steps=2, interval=2, batch=2, eval_contexts=3), in_tmp / "p")
    before = Path(paths["checkpoint"]).read_bytes()
    record = run(paths, paths["checkpoint"], in_tmp / "predict", operation="predict", tokens=paths["val"])
    predictions = np.fromfile(in_tmp / "predict/predictions.bin", "<i4")
    assert predictions.size == 3 * 2 * 64 and predictions.min() >= 0 and predictions.max() < 256
    assert record["published"] == [] and not (in_tmp / "predict/checkpoints").exists()
    assert len(record["predict"]) == 3 and abs(record["mean_loss"] - np.log(256)) < 0.2
    assert Path(paths["checkpoint"]).read_bytes() == before


def test_training_learns_and_keeps_the_last_checkpoints(in_tmp):
    paths = build_chain(config(in_tmp, steps=60, interval=10, keep=2, batch=8), in_tmp / "t")
    record = run(paths, paths["checkpoint"], in_tmp / "train")
    first, last = record["steps"][0]["loss"], np.mean([s["loss"] for s in record["steps"][-5:]])
    print(f"loss {first:.3f} -> {last:.3f}")
    assert last < 0.75 * first and record["skipped"] == 0 and record["status"] == "completed"
    kept = sorted(p.name for p in Path(record["published"][-1]).parent.glob("step-*.ckpt"))
    assert kept == ["step-000050.ckpt", "step-000060.ckpt"] and len(record["published"]) == 6


def test_cpu_host_elf_is_for_this_machine(in_tmp):
    import platform
    paths = build_chain(config(in_tmp, steps=2, interval=2, batch=2), in_tmp / "e")
    elf = read_host_elf(paths["elf"])
    machines = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}
    expected = machines[platform.machine().lower()]
    assert elf.machine == expected and elf.identity["target"] == "cpu"


def test_inspect_describes_every_file_kind(in_tmp):
    from coppelius.inspect import describe
    from coppelius.errors import CoppeliusError
    paths = build_chain(config(in_tmp, steps=2, interval=2, batch=2), in_tmp / "i")
    record = run(paths, paths["checkpoint"], in_tmp / "run")
    elf = "\n".join(describe(paths["elf"]))
    assert "host ELF" in elf and "plan_sha256" in elf and ".coppelius.launches" in elf
    ckpt = "\n".join(describe(record["published"][-1]))
    assert "step 2, cursor 256" in ckpt and "payload verified" in ckpt
    assert "llm.c token stream" in "\n".join(describe(paths["train"]))
    assert "steps 1..2" in "\n".join(describe(in_tmp / "run" / "result.json"))
    (in_tmp / "other").write_bytes(b"hello")
    with pytest.raises(CoppeliusError, match="not a host ELF, checkpoint, token stream or result record"):
        describe(in_tmp / "other")
