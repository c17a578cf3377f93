"""Atomic publication: a file appears whole under its name or not at all, even across a crash."""
import os
import tempfile
from pathlib import Path


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Publication:
    """A file written to a temporary in its destination's directory, then renamed over it.

    Used as a context manager: the body writes to `.file`; on success the data is fsynced,
    renamed onto the destination and the directory fsynced; on failure the temporary is
    removed and the destination is untouched.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, self.temporary = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        self.file = os.fdopen(fd, "wb")

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        try:
            if kind is None:
                self.file.flush()
                os.fchmod(self.file.fileno(), 0o644)  # mkstemp's 0600 is not what a published file should have
                os.fsync(self.file.fileno())
            self.file.close()
            if kind is None:
                os.replace(self.temporary, self.path)
                fsync_directory(self.path.parent)
        finally:
            if os.path.exists(self.temporary):
                os.unlink(self.temporary)
        return False


def publish_bytes(path: str | Path, data: bytes) -> None:
    with Publication(path) as out:
        out.file.write(data)


def publish_link(source: str | Path, path: str | Path) -> None:
    """Make `path` name the same bytes as `source` (a hard link, else a copy), replacing atomically."""
    import shutil
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and os.path.samefile(source, path):
        return  # already that file (and rename() between two links of one file does nothing)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    os.unlink(temporary)
    try:
        os.link(source, temporary)
    except OSError:
        shutil.copyfile(source, temporary)
    os.replace(temporary, path)
    fsync_directory(path.parent)
