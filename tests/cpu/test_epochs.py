"""Epochs, for both hosts (the native host ELF and the Python interpreter): a stream shorter than the
run goes round again as llm.c's loader does, the checkpoint and the result record count the passes,
and N + N steps with a resume and a wrap on each side equal 2N steps in one go, bit for bit.

The corpus is 1,400 bytes: a train stream of 1,260 tokens holds 9 contexts of batch 2 x context 64
(129 tokens each: 9 x 128 + 1 = 1,153 fit, 10 do not), so the cursor goes back to 0 after steps 9
and 18; the validation stream (140 tokens) holds one context, scored twice per pass."""
import contextlib
from pathlib import Path

import numpy as np
import pytest

from coppelius.formats import checkpoint
from coppelius.stages import build_chain
from test_native_run import run as run_native
from test_train_cpu import config, run as run_interpreter

RUN = {"native": run_native, "interpreter": run_interpreter}
N = 2 * 64  # tokens per step


@pytest.fixture(scope="module")
def chains(tmp_path_factory):
    root = tmp_path_factory.mktemp("epochs")
    corpus = root / "corpus.txt"
    corpus.write_bytes(bytes(np.random.default_rng(3).integers(32, 127, 1400, dtype=np.uint8)))
    with contextlib.chdir(root):  # the store (results/store) is relative to the working folder
        yield {name: build_chain(config(root, corpus=str(corpus), batch=2, steps=steps, interval=6, eval_contexts=2),
                                 root / name) for name, steps in (("whole", 24), ("half", 12))}


@pytest.mark.parametrize("host", RUN)
def test_resume_across_a_wrap_is_bit_exact(chains, host, tmp_path):
    run = RUN[host]
    one = run(chains["whole"], chains["whole"]["checkpoint"], tmp_path / "whole")
    first = run(chains["half"], chains["half"]["checkpoint"], tmp_path / "a")
    second = run(chains["half"], first["published"][-1], tmp_path / "b")
    epochs = [s["epoch"] for s in one["steps"]]
    assert epochs == [0] * 9 + [1] * 9 + [2] * 6  # steps 10 and 19 read the stream's first context again
    assert [s["epoch"] for s in first["steps"] + second["steps"]] == epochs
    assert [s["loss"] for s in one["steps"]] == [s["loss"] for s in first["steps"] + second["steps"]]
    assert [s["step_word"] for s in one["steps"]] == [s["step_word"] for s in first["steps"] + second["steps"]]
    middle, final = checkpoint.read_header(first["published"][-1]), checkpoint.read_header(one["published"][-1])
    assert (middle["step"], middle["cursor"], middle["epoch"]) == (12, 3 * N, 1)
    assert (final["step"], final["cursor"], final["epoch"]) == (24, 6 * N, 2)
    assert Path(one["published"][-1]).read_bytes() == Path(second["published"][-1]).read_bytes()
    assert (one["epoch"], first["epoch"], second["epoch"]) == (2, 1, 2)
    assert second["checkpoint_in"] | {"path": None} == {"path": None, "step": 12, "cursor": 3 * N, "epoch": 1}
    assert one["tokens"]["count"] == 1260 and [p["t"] for p in one["validation"]["points"]] == [6, 12, 18, 24]


def test_both_hosts_record_the_same_numbers(chains, tmp_path):
    """Losses may differ in their last bits between the C and numpy kernels; the rest is the run's schedule."""
    native = run_native(chains["whole"], chains["whole"]["checkpoint"], tmp_path / "native")
    python = run_interpreter(chains["whole"], chains["whole"]["checkpoint"], tmp_path / "python")
    assert set(native) == set(python) and set(native["validation"]) == set(python["validation"])
    for key in ("epoch", "tokens", "tokens_per_step", "skipped", "tokens_per_second_counts"):
        assert native[key] == python[key], key
    for ours, theirs in zip(native["steps"], python["steps"]):
        assert set(ours) == set(theirs)
        assert (ours["t"], ours["epoch"], ours["step_word"]) == (theirs["t"], theirs["epoch"], theirs["step_word"])
        assert abs(ours["loss"] - theirs["loss"]) < 1e-3
    points = zip(native["validation"]["points"], python["validation"]["points"], strict=True)
    assert all(a["t"] == b["t"] and abs(a["loss"] - b["loss"]) < 1e-3 for a, b in points)


@pytest.mark.parametrize("host", RUN)
def test_predict_goes_round_and_scores_from_the_start_or_the_checkpoints_cursor(chains, host, tmp_path):
    run, paths = RUN[host], chains["half"]
    trained = run(paths, paths["checkpoint"], tmp_path / "train")
    start = run(paths, trained["published"][-1], tmp_path / "start", operation="predict")
    assert start["predict_from"] == {"from": "start", "cursor": 0}
    if host == "native":
        at = run(paths, trained["published"][-1], tmp_path / "at", operation="predict",
                 options=("--predict-from", "checkpoint"))
    else:
        at = run(paths, trained["published"][-1], tmp_path / "at", operation="predict", predict_from="checkpoint")
    assert at["predict_from"] == {"from": "checkpoint", "cursor": 3 * N}
    assert len(at["predict"]) == 2 and at["mean_loss"] != start["mean_loss"]
    predictions = np.fromfile(tmp_path / "train/predictions.bin", "<i4")  # the train run's first forward's
    assert predictions.size == N and 0 <= predictions.min() and predictions.max() < 256

