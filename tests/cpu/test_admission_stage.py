"""`coppelius admit`: prints every check's outcome; a refusal exits non-zero with one line naming the
first failing check and its item, and writes no certificate."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from coppelius import stages
from coppelius.admit import CHECKS
from coppelius.config import ROOT, resolve

DEFAULTS = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


@pytest.fixture
def built(tmp_path, monkeypatch):
    """config, plan, realization and tables of a small cpu run, made by the stages themselves."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COPPELIUS_STORE", str(tmp_path / "store"))
    config = resolve(DEFAULTS | {"batch": 2, "steps": 20, "interval": 10, "eval_contexts": 2})
    paths = {"config": "config.json", "plan": "plan.json", "realize": "realize", "tables": "tables"}
    stages.configure(paths["config"], config)
    stages.plan(paths["config"], paths["plan"])
    stages.realize(paths["config"], paths["plan"], paths["realize"])
    stages.tables(paths["config"], paths["realize"], paths["tables"])
    return tmp_path, paths


def admit(tmp_path, paths, plan: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "coppelius", "admit", "--config", paths["config"], "--plan", plan,
                           "--realization", paths["realize"], "--tables", paths["tables"], "--out", "certificate.json"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def outcome_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.split()[:1] in (["passed"], ["FAILED"])]


def test_admitted_plan_prints_every_check_and_writes_the_certificate(built):
    tmp_path, paths = built
    done = admit(tmp_path, paths, paths["plan"])
    print(done.stderr)
    assert done.returncode == 0, done.stderr
    lines = outcome_lines(done.stderr)
    assert [line.split()[1] for line in lines] == [name for name, _ in CHECKS]
    assert all(line.startswith("passed") for line in lines)
    certificate = json.loads((tmp_path / "certificate.json").read_text())
    assert certificate["admitted"] and certificate["step_horizon"] >= 20


def test_refused_plan_prints_every_check_and_one_refusal_line(built):
    tmp_path, paths = built
    plan = json.loads((tmp_path / paths["plan"]).read_text())
    for name in ("update", "update_1"):  # the two update pieces alike, as the build makes them
        update = plan["pieces"][plan["ring"].index(name)]
        update["commands"] = [c for c in update["commands"]
                              if not (c["op"] == "memset" and c["dst"]["plane"] == "flag")]
    (tmp_path / "bad-plan.json").write_text(json.dumps(plan))
    done = admit(tmp_path, paths, "bad-plan.json")
    print(done.stderr)
    assert done.returncode == 1
    lines = outcome_lines(done.stderr)
    assert len(lines) == len(CHECKS) and any(line.startswith("FAILED") for line in lines)
    refusals = [line for line in done.stderr.splitlines() if line.startswith("coppelius admit: ")]
    assert len(refusals) == 1
    # the stale realization no longer encodes the plan: the ring holds one command more than the piece
    assert "admission: check schedule-reissues failed: ring entry 6 (update) holds" in refusals[0]
    assert not Path(tmp_path / "certificate.json").exists()
