"""Crash safety: real runs killed by SIGKILL at 31 instants spread over every phase, for both hosts:
the native host ELF (the cpu target's program) and the Python interpreter (which runs the GPU
targets). After each kill the newest published checkpoint verifies, the result record says
"interrupted" with what the run did until its last publication, and resuming from the checkpoint to
the end with the same host gives a final checkpoint byte-identical to that host's uninterrupted run,
with the same per-step losses. A run of three steps a launch (a whole interval a submission), killed inside a
submission, resumes to the bytes of the one-step-a-launch run."""
import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from coppelius.formats import checkpoint, result
from conftest import REFERENCE_HOST
from test_native_run import execute, native, run as run_native
from test_train_cpu import config, run as run_interpreter
from coppelius.stages import build_chain

STEPS, INTERVAL = 12, 3
KILL_POINTS = [
    "read:1", "read:4", "submit:2", "submit:9",                       # loading the checkpoint
    "launch:3", "launch:40",                                          # initialize / first forward
    # inside submissions: step 2's update, the second validation, the last update, the last validation (53 launches
    # an update, 20 a forward)
    "launch:120", "launch:400", "launch:755", "launch:826",
    "adamw-scalars:1", "adamw-scalars:8", "record-stat:4", "cursor-advance:6", "read-at-cursor:11",
    "validation-begin:2", "cursor-wrap:9",                            # scoring the validation stream
    "checkpoint-begin:1", "write:1", "write:5", "checkpoint-begin:3",  # publication, before the rename
    "checkpoint-publish:2", "checkpoint-publish:4",
    "publish-renamed:1", "publish-renamed:3", "publish-renamed:4",    # renamed, `latest` not yet moved
    "result-written:1", "result-written:3",                           # a publication's record
    "reissue:1", "write-status:1", "result-written:5",                # final forward, the last record
]


def killed_run(host: str, paths: dict, out: Path, kill_at: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COPPELIUS_KILL_AT": kill_at}
    if host == "native":
        return execute(native(paths), paths["checkpoint"], paths["train"], out, env=env, validation=paths["val"])
    return subprocess.run([sys.executable, REFERENCE_HOST, "run", paths["elf"], "--checkpoint",
                           paths["checkpoint"], "--tokens", paths["train"], "--validation", paths["val"], "--out",
                           str(out)],
                          capture_output=True, text=True, env=env, timeout=300)


RUN = {"native": run_native, "interpreter": run_interpreter}


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    root = tmp_path_factory.mktemp("crash")
    with contextlib.chdir(root):  # the store (results/store) is relative to the working folder
        full = build_chain(config(root, steps=STEPS, interval=INTERVAL, batch=2, keep=2, staging_bytes=262144),
                           root / "full")
        references = {host: RUN[host](full, full["checkpoint"], root / f"reference-{host}") for host in RUN}
        yield root, full, references


def check_interrupted_record(out: Path, reference: dict, done: int) -> None:
    """The record a killed run leaves: none before its first publication; else "interrupted", with the steps,
    losses and validation points up to a publication: the newest, or the one before when the kill came
    between a checkpoint's rename and its record."""
    if not (out / "result.json").exists():
        assert done <= INTERVAL
        return
    record = result.read(out / "result.json")
    last = checkpoint.read_header(record["published"][-1])["step"] if Path(record["published"][-1]).exists() else None
    steps = [s["t"] for s in record["steps"]]
    assert record["status"] == "interrupted" and steps == list(range(1, steps[-1] + 1))
    assert steps[-1] in (done, done - INTERVAL) and last in (steps[-1], None)
    assert [s["loss"] for s in record["steps"]] == [s["loss"] for s in reference["steps"][:steps[-1]]]
    assert [p["t"] for p in record["validation"]["points"]] == list(range(INTERVAL, steps[-1] + 1, INTERVAL))


def remainder_elf(root: Path, steps: int, per_launch: int = 1) -> dict:
    with contextlib.chdir(root):  # the store (results/store) is relative to the working folder
        return build_chain(config(root, steps=steps, interval=INTERVAL, batch=2, keep=2, staging_bytes=262144,
                                  steps_per_launch=per_launch), root / f"rest-{steps}-k{per_launch}")


def newest_published(out: Path, start: str) -> tuple[str, int]:
    """A killed run's newest published checkpoint (its `latest`, else the one it started from) and its step; reading
    it verifies the payload digest."""
    directory = next((out / "checkpoints").glob("*"), None) if (out / "checkpoints").exists() else None
    newest = start
    if directory is not None and (directory / "latest").exists():
        newest = str(directory / (directory / "latest").read_text().strip())
    return newest, checkpoint.read(newest)[0]["step"]


@pytest.mark.parametrize("host", RUN)
@pytest.mark.parametrize("kill_at", KILL_POINTS)
def test_killed_run_resumes_to_the_same_bytes(builds, kill_at, host, tmp_path):
    root, full, references = builds
    reference = references[host]
    out = tmp_path / "run"
    killed = killed_run(host, full, out, kill_at)
    assert killed.returncode == -9, f"{kill_at} was never reached: {killed.stderr[-2000:]}"

    newest, done = newest_published(out, full["checkpoint"])
    print(f"{host} killed at {kill_at}: newest published is step {done}")
    check_interrupted_record(out, reference, done)
    final = Path(reference["published"][-1]).read_bytes()
    if done == STEPS:
        assert Path(newest).read_bytes() == final
        return
    rest = remainder_elf(root, STEPS - done)
    resumed = RUN[host](rest, newest, tmp_path / "resumed")
    assert [s["loss"] for s in resumed["steps"]] == [s["loss"] for s in reference["steps"][done:]]
    assert Path(resumed["published"][-1]).read_bytes() == final


# three steps a launch (a whole interval a submission): killed between a submission's step counts, inside its graph,
# between its steps' records, publishing; the run resumes to the bytes of the one-step-a-launch run
KILL_POINTS_THREE_A_LAUNCH = ["adamw-scalars:2", "adamw-scalars:8", "launch:200", "record-stat:4", "checkpoint-begin:2",
                              "publish-renamed:3", "reissue:1"]


@pytest.mark.parametrize("kill_at", KILL_POINTS_THREE_A_LAUNCH)
def test_killed_run_of_three_steps_a_launch_resumes_to_the_same_bytes(builds, kill_at, tmp_path):
    root, _, references = builds
    reference = references["native"]
    full = remainder_elf(root, STEPS, per_launch=3)
    out = tmp_path / "run"
    killed = killed_run("native", full, out, kill_at)
    assert killed.returncode == -9, f"{kill_at} was never reached: {killed.stderr[-2000:]}"
    newest, done = newest_published(out, full["checkpoint"])
    print(f"three a launch, killed at {kill_at}: newest published is step {done}")
    check_interrupted_record(out, reference, done)
    rest = remainder_elf(root, STEPS - done, per_launch=3)
    resumed = run_native(rest, newest, tmp_path / "resumed")
    assert [s["loss"] for s in resumed["steps"]] == [s["loss"] for s in reference["steps"][done:]]
    assert Path(resumed["published"][-1]).read_bytes() == Path(reference["published"][-1]).read_bytes()
