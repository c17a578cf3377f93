"""The result record of a run: JSON, written atomically at the end of the run.

{"format": "coppelius-result", "version": 1, "operation", "target", "plan_sha256", "host_elf_sha256",
 "checkpoint_in": {"path", "step", "cursor"}, "initial_loss", "final_loss", "steps": [{"t", "loss", "skipped"}],
 "predict": [{"context", "loss"}], "skipped": n, "published": [paths], "status", "timestamps", "tokens_per_second"}
"""
import json
from pathlib import Path

from ..errors import CoppeliusError
from . import faults
from .publish import Publication

FORMAT, VERSION = "coppelius-result", 1
REQUIRED = {"operation": str, "status": str, "steps": list, "predict": list, "skipped": int, "published": list}


def write(path: str | Path, record: dict) -> None:
    with Publication(path) as out:
        out.file.write(json.dumps(record, indent=1, sort_keys=True).encode() + b"\n")
        out.file.flush()
        faults.point("result-written")


def read(path: str | Path) -> dict:
    path = Path(path)
    try:
        record = json.loads(path.read_text())
    except OSError as e:
        raise CoppeliusError(f"{path}: cannot read the result record ({e.strerror}); run training first")
    except (ValueError, UnicodeDecodeError) as e:
        raise CoppeliusError(f"{path}: not JSON ({e}); the result record is corrupt: run again")
    if not isinstance(record, dict) or record.get("format") != FORMAT or record.get("version") != VERSION:
        value = record.get("format") if isinstance(record, dict) else type(record).__name__
        raise CoppeliusError(f"{path}: format is {value!r}, not {FORMAT!r} version {VERSION}; give a Coppelius result record")
    for key, kind in REQUIRED.items():
        if not isinstance(record.get(key), kind):
            raise CoppeliusError(f"{path}: key {key!r} is {record.get(key)!r}, not a {kind.__name__}; "
                                 f"the result record is incomplete: run again to write a whole one")
    entries = record["steps"] + record["predict"]
    if not all(isinstance(e, dict) and isinstance(e.get("loss"), (int, float)) for e in entries):
        raise CoppeliusError(f"{path}: an entry of 'steps' or 'predict' has no numeric 'loss'; "
                             f"the result record is incomplete: run again to write a whole one")
    return record
