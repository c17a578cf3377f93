"""Atomic publication: a file appears whole under its name or not at all, even across a crash."""
import contextlib
import errno
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from ..errors import CoppeliusError


def write_remedy(error: OSError) -> str:
    """What to do when writing a file failed with `error` (the native host's write_remedy, failure.c)."""
    if error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return "free space"
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "make the folder writable"
    return "check the disk"


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_folders(path: Path) -> None:
    """mkdir -p, each folder made durable in its parent (as publish.c's make_folders): else after a power cut a
    published file's synced bytes could lie in a folder no directory names."""
    missing = []
    while not path.exists():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    if not path.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path))
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        fsync_directory(folder.parent)


def check_writable_folder(path: str | Path, flag: str, make: bool = True) -> Path:
    """Make sure `path` is a folder this process can publish into (created if absent), or refuse. make=False:
    nothing is created; where it is absent, the nearest existing folder above it is the one probed."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise CoppeliusError(f"{path}: {flag} names a file, not a folder; give a folder for the outputs")
    probed = path
    while not make and not probed.exists() and probed != probed.parent:
        probed = probed.parent
    try:
        if make:
            make_folders(path)
        fd, probe = tempfile.mkstemp(prefix=".writable.", dir=probed)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise CoppeliusError(f"{path}: {flag} is not a writable folder ({e.strerror}); give a folder you can write to")
    return path


class Publication:
    """A file written to a temporary in its destination's directory, then renamed over it.

    Used as a context manager: the body writes to `.file`; on success the data is fsynced,
    renamed onto the destination and the directory fsynced; on failure the temporary is
    removed and the destination is untouched.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if self.path.is_dir():
            raise CoppeliusError(f"{self.path}: the output names a folder; give a file path")
        # a full disk or a permission stays an OSError: callers that publish a run's outputs say what it leaves
        try:
            make_folders(self.path.parent)
        except NotADirectoryError:
            raise CoppeliusError(f"{self.path}: the output's folder lies under a file; give a file path in a "
                                 f"folder") from None
        fd, self.temporary = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        self.file = os.fdopen(fd, "wb")

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        """Publish (no exception) or discard (an exception). Safe to call again: later calls do nothing."""
        if self.file.closed and not os.path.exists(self.temporary):
            return False
        try:
            if kind is None:
                self.file.flush()
                os.fchmod(self.file.fileno(), 0o644)  # mkstemp's 0600 is not what a published file should have
                os.fsync(self.file.fileno())
                self.file.close()
                os.replace(self.temporary, self.path)
                fsync_directory(self.path.parent)
        finally:
            if not self.file.closed:
                with contextlib.suppress(OSError):  # a full disk can fail the close of a discarded file too
                    self.file.close()
            if os.path.exists(self.temporary):
                os.unlink(self.temporary)
        return False


def publish_bytes(path: str | Path, data: bytes) -> None:
    with Publication(path) as out:
        out.file.write(data)


def publish_link(source: str | Path, path: str | Path) -> None:
    """Make `path` name the same bytes as `source` (a hard link, else a copy), replacing atomically.

    For a run's own outputs (final.ckpt beside its published checkpoint): no space is spent twice."""
    path = Path(path)
    make_folders(path.parent)
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


class DigestMismatch(Exception):
    """A copy's source did not hold the bytes it was expected to hold."""

    def __init__(self, source: Path, actual: str):
        super().__init__(f"{source}: sha256 is {actual}")
        self.source, self.actual = source, actual


def publish_copy(source: str | Path, path: str | Path, expected_sha256: str | None = None) -> str:
    """Publish a copy of `source` at `path` and return the sha256 of the bytes copied.

    A copy, never a hard link: whoever edits the copy in place cannot change the source (a store
    object or a published checkpoint). With `expected_sha256`, bytes that do not match it are
    not published (DigestMismatch) and `path` is left as it was.
    """
    digest = hashlib.sha256()
    with Publication(path) as out, open(source, "rb") as src:
        for block in iter(lambda: src.read(1 << 20), b""):
            digest.update(block)
            out.file.write(block)
        if expected_sha256 is not None and digest.hexdigest() != expected_sha256:
            raise DigestMismatch(Path(source), digest.hexdigest())
    return digest.hexdigest()
