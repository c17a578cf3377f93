"""The first bytes of a file and its size, as every format reader starts: one refusal for a file
that cannot be read."""
import os
from pathlib import Path

from ..errors import CoppeliusError


def read_head(path: str | Path, nbytes: int, what: str, give: str) -> tuple[int, bytes]:
    """(size in bytes, the first `nbytes` bytes or fewer) of `path`; "PATH: cannot read WHAT (why);
    give GIVE" when it cannot be read."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            return size, f.read(nbytes)
    except OSError as e:
        raise CoppeliusError(f"{path}: cannot read {what} ({e.strerror}); give {give}")
