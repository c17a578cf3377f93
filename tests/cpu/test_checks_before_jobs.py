"""A workflow refused for its corpus, token file or counts touches nothing: the refusal comes when the
workflow resolves its config, before any job runs, so every file under results/ keeps its bytes. Run
from a virtual environment whose path holds a space, as a user's may."""
import hashlib
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import build_corpus, copy_clone, snakemake
from coppelius.formats import checkpoint

SMALL = ["steps=4", "interval=2", "batch=2", "eval_contexts=2"]


def results_digests(clone: Path) -> dict:
    return {p.relative_to(clone).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((clone / "results").rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The whole workflow, once, run by a Python whose path holds a space."""
    root = tmp_path_factory.mktemp("checks")
    clone = copy_clone(root / "clone")
    venv = root / "venv with space"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(sysconfig.get_paths(vars={"base": str(venv), "platbase": str(venv)})["purelib"])
    site.mkdir(parents=True, exist_ok=True)
    this_site = sysconfig.get_paths()["purelib"]  # where this test's packages (snakemake, coppelius) live
    (site / "coppelius_test.pth").write_text(f"import site; site.addsitedir({this_site!r})\n")
    run = subprocess.run([str(venv / "bin" / "python"), "-m", "snakemake", "--cores", "2", "--config",
                          f"corpus={build_corpus()}", *SMALL], cwd=clone, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stderr[-3000:]
    assert (clone / "results/cpu/report/summary.md").exists()
    return clone


def empty_file(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"")
    return path


CASES = {
    "missing corpus": (lambda t: [f"corpus={t / 'none'}"], "key 'corpus'"),
    "empty corpus": (lambda t: [f"corpus={empty_file(t, 'empty.txt')}"], "holds 0 tokens"),
    "missing tokens": (lambda t: [f"tokens={t / 'none.bin'}"], "cannot read the token file"),
    "empty tokens": (lambda t: [f"tokens={empty_file(t, 'empty.bin')}"], "header is 0 bytes"),
    "validation stream shorter than one context": (lambda t: ["batch=8192"], "key 'batch' is 8192"),
    "vocab under the bytes": (lambda t: ["vocab=128"], "key 'vocab' is 128"),
    "batch past int32 counts": (lambda t: ["batch=1000000000"], "key 'batch' is 1000000000"),
}


@pytest.mark.parametrize("case", CASES)
def test_refusal_before_any_job_touches_nothing(trained, tmp_path, case):
    overrides, expected = CASES[case]
    before = results_digests(trained)
    settings = overrides(tmp_path)
    source = [] if any(s.startswith(("corpus=", "tokens=")) for s in settings) else [f"corpus={build_corpus()}"]
    run = snakemake(trained, "--config", *source, *SMALL, *settings)
    lines = [line for line in run.stderr.splitlines() if "coppelius:" in line]
    print(lines)
    assert run.returncode != 0 and len(lines) == 1 and expected in lines[0], run.stderr[-2000:]
    assert results_digests(trained) == before


def test_a_truncated_result_is_rebuilt_whole_from_the_store(trained):
    """`truncate -s 100 results/cpu/init.ckpt`, then `snakemake --forcerun init`: whole bytes again."""
    init = trained / "results/cpu/init.ckpt"
    whole = init.read_bytes()
    with open(init, "r+b") as f:
        f.truncate(100)
    run = snakemake(trained, "--forcerun", "init", "--config", f"corpus={build_corpus()}", *SMALL)
    assert run.returncode == 0, run.stderr[-3000:]
    assert init.read_bytes() == whole
    checkpoint.read(init)
