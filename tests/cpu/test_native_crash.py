"""Crash safety of the native host ELF: real runs killed by SIGKILL at the instants of the Python
suite (the same fault-point names, COPPELIUS_KILL_AT=POINT:N). After each, the newest published
checkpoint verifies, and resuming from it to the end gives a final checkpoint byte-identical to an
uninterrupted native run's, with the same per-step losses."""
import contextlib
import os
from pathlib import Path

import pytest

from coppelius.formats import checkpoint
from coppelius.stages import build_chain
from test_crash import INTERVAL, KILL_POINTS, STEPS
from test_native_run import execute, native, run
from test_train_cpu import config


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    root = tmp_path_factory.mktemp("native-crash")
    with contextlib.chdir(root):  # the store (results/store) is relative to the working folder
        full = build_chain(config(root, steps=STEPS, interval=INTERVAL, batch=2, keep=2, staging_bytes=262144),
                           root / "full")
        yield root, full, run(full, full["checkpoint"], root / "reference")


def remainder(root: Path, steps: int) -> dict:
    with contextlib.chdir(root):
        return build_chain(config(root, steps=steps, interval=INTERVAL, batch=2, keep=2, staging_bytes=262144),
                           root / f"rest-{steps}")


@pytest.mark.parametrize("kill_at", KILL_POINTS)
def test_killed_native_run_resumes_to_the_same_bytes(builds, kill_at, tmp_path):
    root, full, reference = builds
    out = tmp_path / "run"
    killed = execute(native(full), full["checkpoint"], full["train"], out,
                     env={**os.environ, "COPPELIUS_KILL_AT": kill_at})
    assert killed.returncode == -9, f"{kill_at} was never reached: {killed.stderr[-2000:]}"
    directory = next((out / "checkpoints").glob("*"), None) if (out / "checkpoints").exists() else None
    newest = full["checkpoint"]
    if directory is not None and (directory / "latest").exists():
        newest = str(directory / (directory / "latest").read_text().strip())
    header, _ = checkpoint.read(newest)  # verifies the payload digest
    done = header["step"]
    print(f"killed at {kill_at}: newest published is step {done}")
    final = Path(reference["published"][-1]).read_bytes()
    if done == STEPS:
        assert Path(newest).read_bytes() == final
        return
    resumed = run(remainder(root, STEPS - done), newest, tmp_path / "resumed")
    assert [s["loss"] for s in resumed["steps"]] == [s["loss"] for s in reference["steps"][done:]]
    assert Path(resumed["published"][-1]).read_bytes() == final
