"""Every command refuses a user's wrong file in one line on stderr with exit status 1: never a traceback."""
import json
import subprocess
import sys

import pytest

from coppelius.formats import result


def coppelius(*args, cwd=None) -> str:
    proc = subprocess.run([sys.executable, "-m", "coppelius", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=300)
    lines = proc.stderr.strip().splitlines()
    print(proc.stderr.strip())
    assert proc.returncode == 1 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


@pytest.fixture
def incomplete_record(tmp_path):
    path = tmp_path / "result.json"
    path.write_text(json.dumps({"format": result.FORMAT, "version": result.VERSION, "steps": []}))
    return path


def test_inspect_and_report_refuse_an_incomplete_result_record(incomplete_record, tmp_path):
    line = coppelius("inspect", incomplete_record)
    assert "key 'operation' is None, not a str" in line and "run again" in line
    plan = tmp_path / "plan.json"
    plan.write_text("{}")
    line = coppelius("report", "--train", incomplete_record, "--evaluate", incomplete_record, "--plan", plan,
                     "--out", tmp_path / "report")
    assert "key 'operation'" in line and not (tmp_path / "report").exists()


def test_configure_refuses_a_binary_file(tmp_path):
    line = coppelius("configure", "--config", "/usr/bin/ls", "--out", tmp_path / "config.json")
    assert "/usr/bin/ls: not a text file" in line and not (tmp_path / "config.json").exists()


def test_report_and_admit_refuse_a_plan_that_is_not_json(tmp_path):
    binary = tmp_path / "plan.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    record = tmp_path / "result.json"
    record.write_text(json.dumps({"format": result.FORMAT, "version": result.VERSION, "operation": "train",
                                  "status": "completed", "steps": [], "predict": [], "skipped": 0, "published": [],
                                  "epoch": 0}))
    line = coppelius("report", "--train", record, "--evaluate", record, "--plan", binary, "--out", tmp_path / "r")
    assert f"{binary}: the plan is not JSON" in line
    text = tmp_path / "plan.txt"
    text.write_text("plan: yes")
    config = tmp_path / "config.json"
    subprocess.run([sys.executable, "-m", "coppelius", "configure", "--out", config], check=True)
    line = coppelius("admit", "--config", config, "--plan", text, "--realization", tmp_path, "--tables", tmp_path)
    assert f"{text}: the plan is not JSON" in line
    partial = tmp_path / "partial.json"
    partial.write_text('{"model": {}}')
    line = coppelius("admit", "--config", config, "--plan", partial, "--realization", tmp_path, "--tables", tmp_path)
    assert "the plan has no key 'learner'" in line


def test_log_that_is_a_folder_is_refused(tmp_path):
    line = coppelius("--log", tmp_path, "inspect", "/usr/bin/ls")
    assert "--log cannot be written" in line
