"""Fault injection for the crash tests: die by SIGKILL at a named instant of a real run.

COPPELIUS_KILL_AT="POINT:N" kills the process the Nth time execution reaches POINT. Points are
the host program's step names (before the step runs: "submit", "write", "checkpoint-publish",
...), "launch" (before each kernel launch of the cpu device, so inside a submission),
"publish-renamed" (a checkpoint renamed into place, its `latest` pointer not yet replaced) and
"result-written" (the result record's temporary written, not yet renamed). Unset, it costs one
dictionary lookup per point.
"""
import os
import signal

_target = os.environ.get("COPPELIUS_KILL_AT")
_point, _, _count = (_target or "").partition(":")
_seen: dict[str, int] = {}


def point(name: str) -> None:
    if _target is None or name != _point:
        return
    _seen[name] = _seen.get(name, 0) + 1
    if _seen[name] == int(_count or 1):
        os.kill(os.getpid(), signal.SIGKILL)
