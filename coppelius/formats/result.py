"""The result record of a run: JSON (sorted keys, indent 1), published atomically at every checkpoint
publication with status "interrupted" (what a run killed after it did, up to that publication), and at
the end with status "completed" (or "stopped: ..." when the run stops itself).

{"format": "coppelius-result", "version": 2, "operation", "target", "plan_sha256", "host_elf_sha256",
 "tokens_per_step", "tokens": {"path", "count"}, "checkpoint_in": {"path", "step", "cursor", "epoch"},
 "epoch": completed passes over the train stream (the last published checkpoint's),
 "initial_loss", "final_loss",
 "steps": [{"t", "loss", "skipped", "time", "tokens_per_second", "epoch", "step_word"}],
 "validation": {"path", "contexts", "points": [{"t", "loss"}], "seconds"}            (train; path null and
                                                no points: the run was given no --validation)
 "predict_from": {"from": "start" | "checkpoint", "cursor"}, "predict": [{"context", "loss"}], "mean_loss"  (predict)
 "skipped", "published": [paths], "status", "timestamps", "tokens_per_second", "tokens_per_second_counts"}

A step's `time` is seconds since the run started, its `tokens_per_second` its submission's tokens over the
time since the submission before (the first: since the start; a submission holds steps_per_launch steps, which
share it); `step_word` is the binary32 AdamW step size
the step's words held. A validation point's loss (and `mean_loss`) is the mean, summed in order, of
its contexts' mean losses.
"""
import json
from pathlib import Path

from ..errors import CoppeliusError
from . import faults
from .publish import Publication

FORMAT, VERSION = "coppelius-result", 2
REQUIRED = {"operation": str, "status": str, "steps": list, "predict": list, "skipped": int, "published": list,
            "epoch": int}
# What the run's tokens_per_second counts (the C host writes the same words).
RATE_COUNTS = "train tokens over the run's wall time, its validation passes and checkpoint publications included"


def in_order_mean(losses: list[float]) -> float:
    """The mean of doubles summed one after the other, as the C host sums them (not sum()'s compensation)."""
    total = 0.0
    for loss in losses:
        total += loss
    return total / len(losses)


def write(path: str | Path, record: dict) -> None:
    with Publication(path) as out:
        out.file.write(json.dumps(record, indent=1, sort_keys=True).encode() + b"\n")
        out.file.flush()
        faults.point("result-written")


def read(path: str | Path) -> dict:
    return check(path, parse(path))


def parse(path: str | Path):
    """The JSON of a file meant to be a result record (check() says whether it is one)."""
    try:
        return json.loads(Path(path).read_text())
    except OSError as e:
        raise CoppeliusError(f"{path}: cannot read the result record ({e.strerror}); run training first")
    except (ValueError, UnicodeDecodeError) as e:
        raise CoppeliusError(f"{path}: not JSON ({e}); the result record is corrupt: run again")


def check(path: str | Path, record) -> dict:
    """record (parse's), refused in one line unless it is a whole result record of this version."""
    path = Path(path)
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        value = record.get("format") if isinstance(record, dict) else type(record).__name__
        raise CoppeliusError(f"{path}: format is {value!r}, not {FORMAT!r} version {VERSION}; "
                             f"give a Coppelius result record")
    if record.get("version") != VERSION:
        raise CoppeliusError(f"{path}: version is {record.get('version')!r}, not {VERSION}; "
                             f"give a result record of this Coppelius (run again to write one)")
    for key, kind in REQUIRED.items():
        if not isinstance(record.get(key), kind):
            raise CoppeliusError(f"{path}: key {key!r} is {record.get(key)!r}, not a {kind.__name__}; "
                                 f"the result record is incomplete: run again to write a whole one")
    validation = record.get("validation", {"points": []})
    points = validation.get("points") if isinstance(validation, dict) else None
    if not isinstance(points, list):
        raise CoppeliusError(f"{path}: key 'validation' is {validation!r:.60}, not an object with a list of points; "
                             f"the result record is incomplete: run again to write a whole one")
    entries = record["steps"] + record["predict"] + points
    if not all(isinstance(e, dict) and isinstance(e.get("loss"), (int, float)) for e in entries):
        raise CoppeliusError(f"{path}: an entry of 'steps', 'predict' or 'validation' has no numeric 'loss'; "
                             f"the result record is incomplete: run again to write a whole one")
    if not all(type(e.get("t")) is int for e in record["steps"] + points):
        raise CoppeliusError(f"{path}: an entry of 'steps' or 'validation' has no integer step 't'; "
                             f"the result record is incomplete: run again to write a whole one")
    return record
