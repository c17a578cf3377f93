"""The native host ELF on the card (built for the target whose card is present: h200, h100): it trains from a
clean environment (nothing but the driver), repeats the Python reference host's run bit for bit (same graphs, same
kernels, same step words), resumes bit-exactly, predicts, and refuses another target's card in one line."""
import subprocess
from pathlib import Path

import numpy as np
import pytest

from coppelius.config import target_profile
from coppelius.formats import result
from reference_host.interpreter import Program, Run
from cuda_harness import CudaDevice, check_card
from coppelius.stages import build_chain
from test_training_gpu import config, in_tmp, train as python_host  # noqa: F401 (in_tmp: a fixture)

pytestmark = pytest.mark.gpu
pytest.importorskip("ziglang", reason="the elf stage needs the pinned ziglang wheel (pip install -e .)")


def native(elf, checkpoint, tokens, out, operation="train", validation=None):
    """The host ELF itself, in an empty environment: no PATH, no Python, no CUDA variables. A train run
    validates on `validation`, or on the stream it trains on (the tests compare runs, not models)."""
    validation = ["--validation", str(validation or tokens)] if operation == "train" else []
    return subprocess.run([str(Path(elf).resolve()), "--checkpoint", str(checkpoint), "--tokens", str(tokens),
                           "--out", str(out), "--operation", operation, *validation], env={}, capture_output=True,
                          text=True, timeout=600)


def trained(elf, checkpoint, tokens, out, operation="train", validation=None) -> dict:
    proc = native(elf, checkpoint, tokens, out, operation, validation)
    assert proc.returncode == 0, proc.stderr
    return result.read(Path(out) / "result.json")


def test_native_gpu_run_repeats_the_python_host_bit_for_bit(in_tmp, gpu_target):
    paths = build_chain(config(in_tmp, target=gpu_target, steps=20, interval=10, batch=8, lr="1e-3"),
                        in_tmp / gpu_target)
    ours = trained(paths["elf"], paths["checkpoint"], paths["train"], in_tmp / "native", validation=paths["val"])
    theirs = python_host(paths, paths["checkpoint"], in_tmp / "python")
    a, b = (np.array([s["loss"] for s in r["steps"]]) for r in (ours, theirs))
    print(f"native vs python host: max |dloss| {np.abs(a - b).max():.3e}; loss {a[0]:.4f} -> {a[-1]:.4f}; "
          f"tokens/s native {ours['tokens_per_second']:.0f}, python {theirs['tokens_per_second']:.0f}")
    assert list(a) == list(b) and ours["final_loss"] == theirs["final_loss"] and a[-1] < a[0]
    for mine, other in zip(ours["published"], theirs["published"]):
        assert Path(mine).read_bytes() == Path(other).read_bytes(), Path(mine).name


def test_native_gpu_resume_is_bit_identical_and_predicts(in_tmp, gpu_target):
    whole = build_chain(config(in_tmp, target=gpu_target, steps=8, interval=4, batch=4), in_tmp / "whole")
    half = build_chain(config(in_tmp, target=gpu_target, steps=4, interval=2, batch=4), in_tmp / "half")
    one = trained(whole["elf"], whole["checkpoint"], whole["train"], in_tmp / "one")
    first = trained(half["elf"], half["checkpoint"], half["train"], in_tmp / "a")
    second = trained(half["elf"], first["published"][-1], half["train"], in_tmp / "b")
    assert [s["loss"] for s in one["steps"]] == [s["loss"] for s in first["steps"] + second["steps"]]
    assert Path(one["published"][-1]).read_bytes() == Path(second["published"][-1]).read_bytes()
    predicted = trained(whole["elf"], one["published"][-1], whole["val"], in_tmp / "predict", "predict")
    assert len(predicted["predict"]) == 2 and (in_tmp / "predict/predictions.bin").stat().st_size > 0


def test_several_steps_a_launch_give_the_same_bytes(in_tmp, gpu_target):
    """steps_per_launch 2 and 3: each update graph holds whole steps one after the other, each with its own context,
    step word and losses record; the native and Python hosts give the run of one step a launch, byte for byte."""
    runs = {}
    for per_launch in (1, 2, 3):
        paths = build_chain(config(in_tmp, target=gpu_target, steps=12, interval=6, batch=4, lr="1e-3",
                                   steps_per_launch=per_launch), in_tmp / f"k{per_launch}")
        native_run = trained(paths["elf"], paths["checkpoint"], paths["train"], in_tmp / f"native-{per_launch}",
                             validation=paths["val"])
        python_run = python_host(paths, paths["checkpoint"], in_tmp / f"python-{per_launch}")
        runs[per_launch] = native_run
        for record in (native_run, python_run):
            assert [s["loss"] for s in record["steps"]] == [s["loss"] for s in runs[1]["steps"]], per_launch
            assert [s["step_word"] for s in record["steps"]] == [s["step_word"] for s in runs[1]["steps"]]
            assert record["final_loss"] == runs[1]["final_loss"] and record["validation"]["points"] == runs[1]["validation"]["points"]
            assert [Path(c).read_bytes() for c in record["published"]] == \
                [Path(c).read_bytes() for c in runs[1]["published"]], per_launch
    print(f"steps 1..12 at 1, 2 and 3 steps a launch: the same losses and checkpoints; final loss "
          f"{runs[1]['final_loss']:.4f}")


def test_small_model_learns_with_the_native_host(in_tmp, gpu_target):
    paths = build_chain(config(in_tmp, target=gpu_target, model="small", steps=40, interval=20, batch=16, lr="1e-3"),
                        in_tmp / "small")
    record = trained(paths["elf"], paths["checkpoint"], paths["train"], in_tmp / "run")
    losses = [s["loss"] for s in record["steps"]]
    print(f"small (native): loss {losses[0]:.3f} -> {losses[-1]:.3f}, {record['tokens_per_second']:.0f} tokens/s")
    assert np.mean(losses[-5:]) < 0.8 * losses[0] and record["skipped"] == 0


def test_another_targets_card_is_refused_in_one_line(in_tmp, gpu_target):
    """The rtx3090's host ELF is an x86-64 program too: on a Hopper card its card check stops it before any
    allocation."""
    paths = build_chain(config(in_tmp, target="rtx3090", steps=2, interval=1, batch=2), in_tmp / "rtx3090")
    proc = native(paths["elf"], paths["checkpoint"], paths["train"], in_tmp / "out")
    lines = proc.stderr.strip().splitlines()
    print(lines)
    assert proc.returncode == 1 and len(lines) == 1
    ours = target_profile(gpu_target)
    assert lines[0].startswith(f"card check: this card is {ours['card']} ({ours['arch']}, ")
    assert "the host ELF was built and admitted for NVIDIA GeForce RTX 3090 (sm_86, " in lines[0]
    assert not (in_tmp / "out/checkpoints").exists()


def test_native_gpu_sample_repeats_the_python_host(in_tmp, gpu_target):
    """Generate on the card: the native host's sample equals the Python host's on the same kernels."""
    from reference_host.generate import parse_options
    paths = build_chain(config(in_tmp, target=gpu_target, steps=20, interval=20, batch=4, lr="1e-3"),
                        in_tmp / gpu_target)
    trained_run = trained(paths["elf"], paths["checkpoint"], paths["train"], in_tmp / "train")
    final = trained_run["published"][-1]
    options = {"prompt": "def ", "prompt_tokens": None, "new_tokens": "40", "temperature": "0.8", "top_k": "20",
               "seed": "7"}
    command = [str(Path(paths["elf"]).resolve()), "--operation", "generate", "--checkpoint", final, "--out",
               str(in_tmp / "native.txt")]
    for name, value in options.items():
        if value is not None:
            command += ["--" + name.replace("_", "-"), value]
    proc = subprocess.run(command, env={}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    program = Program(paths["elf"])
    device = CudaDevice()
    check_card(program.identity, device.describe())
    try:
        Run(program, device, final, None, in_tmp / "python.txt", "generate",
            generate=parse_options(**options)).execute()
    finally:
        device.close()
    ours, theirs = (in_tmp / "native.txt").read_bytes(), (in_tmp / "python.txt").read_bytes()
    print(f"sample on the card: {ours!r}")
    assert ours == theirs and len(ours) >= 40
