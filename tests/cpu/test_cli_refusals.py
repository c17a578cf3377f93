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


def records(folder) -> tuple:
    """A train run's and a predict run's result records (only the keys a reader checks)."""
    base = {"format": result.FORMAT, "version": result.VERSION, "status": "completed", "steps": [], "predict": [],
            "skipped": 0, "published": [], "epoch": 0}
    trained, evaluated = folder / "train.json", folder / "evaluate.json"
    trained.write_text(json.dumps(base | {"operation": "train", "steps": [{"t": 1, "loss": 5.5, "skipped": False}]}))
    evaluated.write_text(json.dumps(base | {"operation": "predict", "predict": [{"context": 0, "loss": 5.4}]}))
    return trained, evaluated


def test_report_refuses_records_given_the_wrong_way_round_or_empty(tmp_path):
    trained, evaluated = records(tmp_path)
    plan = tmp_path / "plan.json"
    plan.write_text("{}")
    line = coppelius("report", "--train", evaluated, "--evaluate", trained, "--plan", plan, "--out", tmp_path / "r")
    assert line == (f"coppelius report: {evaluated}: --train's result record has operation 'predict', not 'train'; "
                    f"give a train run's result.json (train/result.json)")
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps(json.loads(trained.read_text()) | {"steps": [], "status": "interrupted"}))
    line = coppelius("report", "--train", empty, "--evaluate", evaluated, "--plan", plan, "--out", tmp_path / "r")
    assert line.endswith("--train's result record holds no steps (status 'interrupted'); give a train run's "
                         "result.json (train/result.json)")
    assert not (tmp_path / "r").exists()


def test_an_out_that_is_an_input_or_empty_is_refused(tmp_path):
    trained, _ = records(tmp_path)
    config = tmp_path / "config.json"
    subprocess.run([sys.executable, "-m", "coppelius", "configure", "--out", config], check=True)
    before = config.read_bytes()
    line = coppelius("init", "--config", config, "--out", config)
    assert line == (f"coppelius init: {config}: --out is the --config file, which this command would replace; give "
                    f"another --out")
    weights = tmp_path / "init.ckpt"
    subprocess.run([sys.executable, "-m", "coppelius", "init", "--config", config, "--out", weights], check=True,
                   cwd=tmp_path)
    saved = weights.read_bytes()
    line = coppelius("export", weights, "--format", "llmc", "--out", weights)
    assert line.endswith(f"{weights}: --out is the checkpoint, which this command would replace; give another --out")
    line = coppelius("import", weights, "--config", config, "--out", weights)
    assert line.endswith(f"{weights}: --out is the weights file, which this command would replace; give another --out")
    assert weights.read_bytes() == saved
    line = coppelius("configure", "--out", "")
    assert line == "coppelius configure: command line: --out is empty; give a path"
    assert config.read_bytes() == before
    line = coppelius("configure", "--out", tmp_path)
    assert line == f"coppelius configure: {tmp_path}: the output names a folder; give a file path"
    line = coppelius("configure", "--out", trained / "config.json")
    assert line == (f"coppelius configure: {trained / 'config.json'}: the output's folder lies under a file; give a "
                    f"file path in a folder")


def test_inspect_says_an_interrupted_records_rate_and_refuses_a_partial_one(tmp_path):
    trained, _ = records(tmp_path)
    record = json.loads(trained.read_text())
    record["steps"][0]["tokens_per_second"] = 1234.5
    trained.write_text(json.dumps(record | {"status": "interrupted"}))
    line = coppelius("inspect", trained)  # no tokens: a reader needs it not, inspect shows it
    assert line == (f"coppelius inspect: {trained}: the result record lacks or mistypes 'tokens'; it is incomplete: "
                    f"run again to write a whole one")
    trained.write_text(json.dumps(record | {"status": "interrupted", "tokens": {"path": "t.bin", "count": 9000}}))
    shown = subprocess.run([sys.executable, "-m", "coppelius", "inspect", trained], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    assert shown[1] == "steps 1..1: loss 5.5000 -> 5.5000, 0 skipped, 1,234 tokens/s at the last step"


def test_configure_refuses_a_binary_file(tmp_path):
    line = coppelius("configure", "--config", "/usr/bin/ls", "--out", tmp_path / "config.json")
    assert "/usr/bin/ls: not a text file" in line and not (tmp_path / "config.json").exists()


def test_report_and_admit_refuse_a_plan_that_is_not_json(tmp_path):
    binary = tmp_path / "plan.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    trained, evaluated = records(tmp_path)
    line = coppelius("report", "--train", trained, "--evaluate", evaluated, "--plan", binary, "--out", tmp_path / "r")
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


def test_inspect_names_another_formats_json_rather_than_calling_it_a_damaged_record(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"format": "coppelius-plan", "version": 1, "pieces": []}))
    assert coppelius("inspect", plan) == (
        f"coppelius inspect: {plan}: format is 'coppelius-plan'; inspect reads a host ELF, checkpoint, token stream, "
        f"result record or GPT-2 weights: give one of those")


def test_inspect_calls_json_without_a_format_field_not_a_result_record(tmp_path):
    """The workflow's config.json (no format field) was refused as "format is None, not 'coppelius-result'"."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model": {"width": 64}, "run": {"steps": 30}, "target": "cpu"}))
    assert coppelius("inspect", config) == (
        f"coppelius inspect: {config}: JSON with no format field (not a result record); inspect reads a host ELF, "
        f"checkpoint, token stream, result record or GPT-2 weights: give one of those")


def test_prepare_refuses_a_train_or_val_that_is_the_configurations_token_file(tmp_path):
    """`coppelius prepare --train T` with the configuration's `tokens` T replaced the user's token file with its first
    nine tenths (the check held --out alone to the inputs; prepare's outputs are --train and --val)."""
    import numpy as np
    from conftest import llmc_datafile
    mine = llmc_datafile(tmp_path / "mine.bin", np.arange(100_000) % 256)
    saved = mine.read_bytes()
    config, other = tmp_path / "config.json", tmp_path / "other.bin"
    subprocess.run([sys.executable, "-m", "coppelius", "configure", "--set", f"tokens={mine}", "--out", config],
                   check=True)
    for flag in ("--train", "--val"):
        given = {"--train": other, "--val": other} | {flag: mine}
        line = coppelius("prepare", "--config", config, "--train", given["--train"], "--val", given["--val"],
                         cwd=tmp_path)  # (its store, had it run, under tmp_path)
        assert line == (f"coppelius prepare: {mine}: {flag} is the configuration's tokens file, which this command "
                        f"would replace; give another {flag}")
    line = coppelius("prepare", "--config", config, "--train", other, "--val", other, cwd=tmp_path)
    assert line == f"coppelius prepare: {other}: --val is --train, which this command writes too; give another --val"
    assert mine.read_bytes() == saved and not other.exists()
