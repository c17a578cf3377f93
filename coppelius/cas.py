"""The content-addressed store: artifacts by sha256, stage results by action key.

A stage's action key is the digest of everything that can change its result (Bazel's remote
execution model): the stage's name, the digest of the code it runs, the configuration it
reads, its inputs' digests, the target and the tool versions, in one canonical encoding.
A known key is not recomputed: its outputs are copied out of the store, each copy checked against
its digest as it is made; an object found damaged is evicted and its action computed again, so a
damaged object is never served. Every miss is logged.

Layout under the store root (results/store, or $COPPELIUS_STORE):
  objects/ab/abcdef...   immutable artifacts, named by their sha256, read-only
  actions/KEY.json       {"stage", "outputs": {name: sha256}}
  misses.log             one line per stage actually computed: stage, key
  locks/KEY, locks/object-SHA256   flock files: one process computes a key, stores or evicts an object
"""
import contextlib
import fcntl
import os
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

from . import canonical
from .errors import CoppeliusError
from .formats.publish import DigestMismatch, Publication, publish_bytes, publish_copy

PACKAGE = Path(__file__).resolve().parent


def default_root() -> Path:
    return Path(os.environ.get("COPPELIUS_STORE") or "results/store")


def file_digest(path: str | Path) -> str:
    try:
        return canonical.file_sha256(path)
    except OSError as e:
        raise CoppeliusError(f"{path}: cannot read input ({e.strerror}); check the path")


SOURCE_PATTERNS = ("*.py", "*.cu", "*.cuh", "*.c", "*.h")


@lru_cache(maxsize=None)
def _source_sha256(path: str, size: int, mtime_ns: int) -> str:
    """A source file's digest, read once a process for each (size, time) it has: the workflow digests the
    code of every stage's rule at start-up, and the stages share most of their files."""
    return canonical.sha256(Path(path).read_bytes())


def code_digest(paths) -> str:
    """Digest of the package sources a stage runs (files, or folders of Python, CUDA and C sources,
    relative to the package; coppelius.stages.code computes the list)."""
    entries = []
    for rel in sorted(paths):
        base = PACKAGE / rel
        files = sorted(f for pattern in SOURCE_PATTERNS for f in base.rglob(pattern)) if base.is_dir() else [base]
        for f in files:
            stat = f.stat()
            entries.append([f.relative_to(PACKAGE).as_posix(), _source_sha256(str(f), stat.st_size, stat.st_mtime_ns)])
    return canonical.digest(entries)


class Store:
    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root is not None else default_root()
        (self.root / "objects").mkdir(parents=True, exist_ok=True)
        (self.root / "actions").mkdir(parents=True, exist_ok=True)

    def object_path(self, digest: str) -> Path:
        return self.root / "objects" / digest[:2] / digest

    def put_file(self, path: str | Path) -> str:
        digest = file_digest(path)
        target = self.object_path(digest)
        with self.lock(f"object-{digest}"):  # never beside an eviction of the same object (evict)
            if not self._whole(digest):  # absent, or damaged since it was stored
                target.parent.mkdir(exist_ok=True)
                with Publication(target) as out, open(path, "rb") as src:
                    shutil.copyfileobj(src, out.file, 1 << 20)
                os.chmod(target, 0o444)
        return digest

    def _whole(self, digest: str) -> bool:
        try:
            return canonical.file_sha256(self.object_path(digest)) == digest
        except FileNotFoundError:
            return False

    def lookup(self, key: str) -> dict | None:
        path = self.root / "actions" / f"{key}.json"
        try:
            record = canonical.json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if all(self.object_path(d).exists() for d in record["outputs"].values()):
            return record
        return None

    def record(self, key: str, stage: str, outputs: dict[str, str]) -> None:
        publish_bytes(self.root / "actions" / f"{key}.json", canonical.encode({"stage": stage, "outputs": outputs}))

    @contextlib.contextmanager
    def lock(self, name: str):
        """An exclusive lock on one name, released if the process dies: an action key, held while the action
        is computed; object-DIGEST, held while that object is stored or evicted."""
        (self.root / "locks").mkdir(exist_ok=True)
        with open(self.root / "locks" / name, "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def log_miss(self, stage: str, key: str) -> None:
        with open(self.root / "misses.log", "a") as log:
            log.write(f"{stage} {key}\n")

    def materialize(self, digest: str, dest: str | Path) -> bool:
        """Place a copy of an artifact at dest. False, dest untouched, if the object is damaged (it is then
        evicted) or gone (another process evicted it after this one looked the action up)."""
        source = self.object_path(digest)
        try:
            publish_copy(source, dest, expected_sha256=digest)
            return True
        except DigestMismatch:
            self.evict(digest)
        except FileNotFoundError as gone:
            if gone.filename != str(source):
                raise
        return False

    def evict(self, digest: str) -> None:
        """Remove a damaged object: every action naming it then misses and is computed again. Only while it is
        still damaged: another process may have put it back whole since this one read it."""
        with self.lock(f"object-{digest}"):
            if not self._whole(digest):
                with contextlib.suppress(FileNotFoundError):
                    self.object_path(digest).unlink()


def action_key(stage: str, code, config, inputs: dict[str, str], target: str, tools: dict) -> str:
    return canonical.digest({
        "stage": stage, "code": code_digest(code), "config": config,
        "inputs": {name: file_digest(path) for name, path in sorted(inputs.items())},
        "target": target, "tools": tools,
    })


def _outputs(store: Store, key: str, stage: str, outputs: dict[str, str], build) -> dict[str, str]:
    """The output digests of an action: from the store, or computed once (under the key's lock)."""
    record = store.lookup(key)
    if record is None:
        with store.lock(key):  # two workflows sharing a store compute a key once
            record = store.lookup(key)
            if record is None:
                with tempfile.TemporaryDirectory(dir=store.root, prefix=f".build-{stage}-") as work:
                    paths = {name: str(Path(work) / name) for name in outputs}
                    build(paths)
                    digests = {name: store.put_file(paths[name]) for name in outputs}
                store.record(key, stage, digests)
                store.log_miss(stage, key)
                record = {"outputs": digests}
    return record["outputs"]


def run_stage(stage: str, *, code, config, inputs: dict[str, str], target: str,
              outputs: dict[str, str], build, tools: dict | None = None, store: Store | None = None,
              manifest: str | Path | None = None) -> str:
    """Produce `outputs` (name -> destination path) through the store.

    `build(paths)` is called only on a miss, with name -> temporary path to write each output.
    Returns the action key. A manifest naming every digest is written to `manifest` if given (FOLDER/manifests/
    STAGE.json), each output's path relative to FOLDER (results/TARGET/, or the folder of an ELF written elsewhere),
    so that the manifest is the same bytes whatever directory, and however spelled, the command was given.
    """
    store = store or Store()
    tools = tools or {}
    key = action_key(stage, code, config, inputs, target, tools)
    for attempt in (1, 2):
        digests = _outputs(store, key, stage, outputs, build)
        unserved = [digests[name] for name, dest in outputs.items() if not store.materialize(digests[name], dest)]
        if not unserved:
            break
        if attempt == 2:  # computed again after the first damage, and damaged (or removed) again meanwhile
            raise CoppeliusError(f"{store.object_path(unserved[0])}: the store object changed while it was served; "
                                 f"stop whatever writes into {store.root} and run again")
    if manifest is not None:
        folder = Path(manifest).parent.parent
        publish_bytes(manifest, canonical.encode({
            "stage": stage, "key": key, "target": target, "tools": tools,
            "inputs": {name: file_digest(path) for name, path in sorted(inputs.items())},
            "outputs": {name: {"path": Path(os.path.relpath(outputs[name], folder)).as_posix(), "sha256": digests[name]}
                        for name in sorted(outputs)},
        }) + b"\n")
    return key
