"""The workflow passes Snakemake's linter and snakefmt's check (as catalog workflows must)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_snakemake_lint_is_clean():
    run = subprocess.run([str(BIN / "snakemake"), "--lint"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    print(run.stdout[-2000:], run.stderr[-2000:])
    assert run.returncode == 0 and "Congratulations, your workflow is in a good condition!" in run.stdout + run.stderr


def test_snakefmt_check_passes():
    files = ["Snakefile", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "workflow" / "rules").glob("*.smk"))]
    run = subprocess.run([str(BIN / "snakefmt"), "--check", *files], cwd=ROOT, capture_output=True, text=True, timeout=300)
    print(run.stderr[-2000:])
    assert run.returncode == 0
