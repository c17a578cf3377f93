"""Several steps a launch (config steps_per_launch): each update submission holds K whole steps, one after the
other, each from its own context, with its own step word and its own losses record. The run is the same run: on the
cpu target the native host ELF and the Python reference host each give, at K = 2 and 4, the bytes they give at K = 1
(every checkpoint, the losses, step words, epochs, the scored losses and the predictions), and a K = 2 run resumed
from its own checkpoint repeats the K = 1 run whole."""
import contextlib
from pathlib import Path

import pytest

from coppelius.stages import build_chain
from test_native_run import run as run_native
from test_train_cpu import config, run as run_python

SAME = ("t", "loss", "skipped", "epoch", "step_word")


@pytest.fixture(scope="module")
def chains(tmp_path_factory):
    root = tmp_path_factory.mktemp("per-launch")
    with contextlib.chdir(root):  # the store (results/store) is relative to the working folder
        yield {name: build_chain(config(root, steps=steps, interval=interval, batch=2, steps_per_launch=k), root / name)
               for name, steps, interval, k in (("k1", 8, 4, 1), ("k2", 8, 4, 2), ("k4", 8, 4, 4),
                                                ("k2-half", 4, 2, 2))}


def same_run(ours: dict, theirs: dict) -> None:
    assert [{k: s[k] for k in SAME} for s in ours["steps"]] == [{k: s[k] for k in SAME} for s in theirs["steps"]]
    assert (ours["initial_loss"], ours["final_loss"]) == (theirs["initial_loss"], theirs["final_loss"])
    assert ours["validation"]["points"] == theirs["validation"]["points"]
    assert [Path(p).read_bytes() for p in ours["published"]] == [Path(p).read_bytes() for p in theirs["published"]]


@pytest.mark.parametrize("per_launch", ["k2", "k4"])
@pytest.mark.parametrize("host", [run_native, run_python], ids=["native", "python"])
def test_several_steps_a_launch_are_the_same_run(chains, tmp_path, host, per_launch):
    one = host(chains["k1"], chains["k1"]["checkpoint"], tmp_path / "k1")
    several = host(chains[per_launch], chains[per_launch]["checkpoint"], tmp_path / per_launch)
    same_run(several, one)
    assert (tmp_path / per_launch / "predictions.bin").read_bytes() == (tmp_path / "k1" / "predictions.bin").read_bytes()
    # a submission's steps are recorded together: they share its rate, its tokens over the time since the one before
    k, rates = int(per_launch[1:]), [s["tokens_per_second"] for s in several["steps"]]
    assert min(rates) > 0 and all(len(set(rates[i:i + k])) == 1 for i in range(0, len(rates), k)), rates
    print(f"{host.__module__}: {len(one['steps'])} steps at 1 and {per_launch[1:]} a launch: the same bytes; final "
          f"loss {one['final_loss']:.5f}")


def test_a_resumed_run_of_two_steps_a_launch_repeats_the_whole_run(chains, tmp_path):
    whole = run_native(chains["k1"], chains["k1"]["checkpoint"], tmp_path / "whole")
    first = run_native(chains["k2-half"], chains["k2-half"]["checkpoint"], tmp_path / "first")
    second = run_native(chains["k2-half"], first["published"][-1], tmp_path / "second")
    assert [s["loss"] for s in first["steps"] + second["steps"]] == [s["loss"] for s in whole["steps"]]
    assert Path(second["published"][-1]).read_bytes() == Path(whole["published"][-1]).read_bytes()
