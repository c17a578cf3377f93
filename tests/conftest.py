import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REFERENCE_HOST = str(ROOT / "tests" / "reference_host")  # `python REFERENCE_HOST run ...`: the Python reference host


def pytest_collection_modifyitems(config, items):
    """GPU tests skip cleanly where no CUDA device is present."""
    from cuda_probe import cuda_device_count
    if cuda_device_count() > 0:
        return
    skip = pytest.mark.skip(reason="no CUDA device on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def copy_clone(dest: Path) -> Path:
    """A copy of the tracked (and untracked, not ignored) working tree, like a fresh clone."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    for rel in files:
        if (ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)
    return dest


def build_corpus() -> Path:
    """A corpus long enough for every build the workflow tests make (gpt2-124m at batch 4 runs 600 steps of
    4,096 tokens; the workflow refuses a shorter corpus before any job runs): the README, repeated."""
    readme = (ROOT / "README.md").read_bytes()
    data = readme * (-(-3_000_000 // len(readme)))
    path = Path(tempfile.gettempdir()) / f"coppelius-test-corpus-{hashlib.sha256(data).hexdigest()[:16]}.txt"
    if not path.exists():
        # a name of its own (not the pid: two threads of one test share it, and one renamed the other's file)
        fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    return path


def llmc_datafile(path: Path, ids, model_desc: str = "gpt-2") -> Path:
    """A token file written as llm.c's dev/data/data_common.py write_datafile writes it: int32[256] header (magic,
    version, count), then the ids as uint16 (gpt-2: magic 20240520, version 1) or uint32 (llama-3: 20240801, 7)."""
    import numpy as np
    magic, version, dtype = {"gpt-2": (20240520, 1, np.uint16), "llama-3": (20240801, 7, np.uint32)}[model_desc]
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = magic, version, len(ids)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.array(ids, dtype=dtype).tobytes())
    return path


def snakemake(workdir: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "snakemake"
    return subprocess.run([str(exe), "--cores", "2", *args], cwd=workdir, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=1800)


@pytest.fixture(scope="session")
def gpu_target() -> str:
    """The target whose card this machine has (h200, h100, ...): the GPU tests build their host ELFs for it."""
    from cuda_probe import card_target, cuda_card_name
    target = card_target()
    if target is None:
        pytest.skip(f"no profile in config/targets/ names this card ({cuda_card_name()}); add one to test on it")
    return target


@pytest.fixture
def clone(tmp_path):
    return copy_clone(tmp_path / "clone")
