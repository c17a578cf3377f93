"""The content-addressed store: artifacts by sha256, stage results by action key.

A stage's action key is the digest of everything that can change its result (Bazel's remote
execution model): the stage's name, the digest of the code it runs, the configuration it
reads, its inputs' digests, the target and the tool versions, in one canonical encoding.
A known key is not recomputed: its outputs are linked out of the store. Every miss is logged.

Layout under the store root (results/store, or $COPPELIUS_STORE):
  objects/ab/abcdef...   immutable artifacts, named by their sha256, read-only
  actions/KEY.json       {"stage", "outputs": {name: sha256}}
  misses.log             one line per stage actually computed: stage, key
"""
import contextlib
import fcntl
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from . import canonical
from .errors import CoppeliusError
from .formats.publish import Publication, publish_bytes, publish_link

PACKAGE = Path(__file__).resolve().parent


def default_root() -> Path:
    return Path(os.environ.get("COPPELIUS_STORE") or "results/store")


def file_digest(path: str | Path) -> str:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError as e:
        raise CoppeliusError(f"{path}: cannot read input ({e.strerror}); check the path")
    return h.hexdigest()


SOURCE_PATTERNS = ("*.py", "*.cu", "*.cuh", "*.c", "*.h")


def code_digest(paths) -> str:
    """Digest of the package sources a stage runs (files, or folders of Python, CUDA and C sources,
    relative to the package; coppelius.stages.code computes the list)."""
    entries = []
    for rel in sorted(paths):
        base = PACKAGE / rel
        files = sorted(f for pattern in SOURCE_PATTERNS for f in base.rglob(pattern)) if base.is_dir() else [base]
        for f in files:
            entries.append([f.relative_to(PACKAGE).as_posix(), canonical.sha256(f.read_bytes())])
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
        if not target.exists():
            target.parent.mkdir(exist_ok=True)
            with Publication(target) as out, open(path, "rb") as src:
                shutil.copyfileobj(src, out.file, 1 << 20)
            os.chmod(target, 0o444)
        return digest

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
    def lock(self, key: str):
        """An exclusive lock on one action key, held while it is computed (released if the process dies)."""
        (self.root / "locks").mkdir(exist_ok=True)
        with open(self.root / "locks" / key, "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def log_miss(self, stage: str, key: str) -> None:
        with open(self.root / "misses.log", "a") as log:
            log.write(f"{stage} {key}\n")

    def materialize(self, digest: str, dest: str | Path) -> None:
        """Place an artifact at dest: a hard link into the store where possible, else a copy."""
        publish_link(self.object_path(digest), dest)


def action_key(stage: str, code, config, inputs: dict[str, str], target: str, tools: dict) -> str:
    return canonical.digest({
        "stage": stage, "code": code_digest(code), "config": config,
        "inputs": {name: file_digest(path) for name, path in sorted(inputs.items())},
        "target": target, "tools": tools,
    })


def run_stage(stage: str, *, code, config, inputs: dict[str, str], target: str,
              outputs: dict[str, str], build, tools: dict | None = None, store: Store | None = None,
              manifest: str | Path | None = None) -> str:
    """Produce `outputs` (name -> destination path) through the store.

    `build(paths)` is called only on a miss, with name -> temporary path to write each output.
    Returns the action key. A manifest naming every digest is written to `manifest` if given.
    """
    store = store or Store()
    tools = tools or {}
    key = action_key(stage, code, config, inputs, target, tools)
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
    digests = record["outputs"]
    for name, dest in outputs.items():
        store.materialize(digests[name], dest)
    if manifest is not None:
        publish_bytes(manifest, canonical.encode({
            "stage": stage, "key": key, "target": target, "tools": tools,
            "inputs": {name: file_digest(path) for name, path in sorted(inputs.items())},
            "outputs": {name: {"path": str(outputs[name]), "sha256": digests[name]} for name in sorted(outputs)},
        }) + b"\n")
    return key
