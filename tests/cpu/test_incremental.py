"""Reproducible and incremental builds: bit-identical artifacts from any directory, a change
rebuilds only what it touches (the store logs its misses), and a shared store serves clones,
also two workflows writing it at once."""
import hashlib
import os
import threading
from pathlib import Path

import pytest

from coppelius.formats import result
from conftest import build_corpus, copy_clone, snakemake

MODELS = ("tiny", "small", "gpt2-124m")
TARGETS = ("cpu", "h200", "rtx3090", "gb10")


def misses(store: Path) -> list[str]:
    log = store / "misses.log"
    return [line.split()[0] for line in log.read_text().splitlines()] if log.exists() else []


def build(clone: Path, store: Path, *config: str, target_file: str = "host.elf", target: str = "cpu"):
    run = snakemake(clone, "--config", f"target={target}", f"corpus={build_corpus()}", *config, "--",
                    f"results/{target}/{target_file}", env={"COPPELIUS_STORE": str(store)})
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout + run.stderr


def new_misses(store, before):
    return sorted(misses(store)[len(before):])


def tree_digests(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and "logs" not in p.parts and "benchmarks" not in p.parts
            and p.name != "config.json"}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("incremental")
    return copy_clone(root / "clone"), root / "store"


def test_nothing_changed_nothing_rebuilt(workspace):
    clone, store = workspace
    build(clone, store)
    before = misses(store)
    assert {"plan", "realize", "tables", "admit", "elf"} <= set(before)
    output = build(clone, store)
    assert "Nothing to be done" in output and new_misses(store, before) == []


def test_a_code_edit_reruns_the_rules_that_run_it(workspace):
    """An edit of the host runtime (or a new version of the package) reruns the elf rule, whose store key it
    changes, and no rule before it; put back, the rule reruns once more and the store serves the first ELF."""
    clone, store = workspace
    build(clone, store)
    first = (clone / "results/cpu/host.elf").read_bytes()
    before = misses(store)
    source = clone / "coppelius/host/main.c"
    text = source.read_text()
    source.write_text(text + "\n// an edit\n")
    try:
        output = build(clone, store)
    finally:
        source.write_text(text)
    assert "Nothing to be done" not in output and new_misses(store, before) == ["elf"]
    assert "rule plan:" not in output and "rule elf:" in output
    before = misses(store)
    build(clone, store)
    assert new_misses(store, before) == [] and (clone / "results/cpu/host.elf").read_bytes() == first


def test_an_edit_of_the_report_code_reruns_the_report_and_nothing_else(workspace):
    """The report rule had no code param: an upgraded report.py left the old summary.md in place ('Nothing to be
    done'), as the build rules' params already prevent."""
    clone, store = workspace
    short = ("steps=4", "interval=2")
    build(clone, store, *short, target_file="report/summary.md")
    source = clone / "coppelius/report.py"
    text = source.read_text()
    source.write_text(text + "\n# an edit\n")
    try:
        output = build(clone, store, *short, target_file="report/summary.md")
    finally:
        source.write_text(text)
    assert "rule report:" in output and "rule train:" not in output and "rule sample:" not in output, output[-3000:]


def test_a_value_spelled_another_way_reruns_nothing(workspace):
    """The configure rule's params are the resolved configuration: lr=3/1000 is config.yaml's "3e-3"."""
    clone, store = workspace
    build(clone, store)
    assert "Nothing to be done" in build(clone, store, "lr=3/1000", "beta2=0.95")


def test_an_edited_corpus_reruns_prepare_and_what_reads_its_tokens(workspace, tmp_path):
    clone, store = workspace
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(build_corpus().read_bytes())

    def run():
        result = snakemake(clone, "--config", f"corpus={corpus}", "--", "results/cpu/tokens/train.bin",
                           env={"COPPELIUS_STORE": str(store)})
        assert result.returncode == 0, result.stderr[-3000:]
        return (clone / "results/cpu/tokens/train.bin").read_bytes()
    first = run()
    before = misses(store)
    with open(corpus, "ab") as f:
        f.write(b"one more line\n" * 100)
    assert run() != first and new_misses(store, before) == ["prepare"]


def test_touch_without_change_rebuilds_nothing(workspace):
    clone, store = workspace
    build(clone, store)
    before = misses(store)
    for name in ("config/config.yaml", "results/cpu/plan.json", "results/cpu/realize/launches.bin"):
        os.utime(clone / name)
    build(clone, store)
    assert new_misses(store, before) == []


def test_steps_change_redoes_the_program_not_the_kernels(workspace):
    clone, store = workspace
    build(clone, store, target="h200")
    assert "compile" in misses(store)
    before = misses(store)
    build(clone, store, "steps=800", "interval=200", target="h200")
    redone = new_misses(store, before)
    # the host program changes; the launch table does not, so the tables may come from the store
    assert {"plan", "realize", "admit", "elf"} <= set(redone) <= {"plan", "realize", "tables", "admit", "elf"}
    assert "compile" not in redone and "init" not in redone and "prepare" not in redone


def test_lr_change_compiles_nothing(workspace):
    clone, store = workspace
    build(clone, store, target="h200")
    before = misses(store)
    build(clone, store, "lr=1e-3", target="h200")
    assert "compile" not in new_misses(store, before) and "plan" in new_misses(store, before)


def test_width_change_redoes_everything_of_the_target(workspace):
    clone, store = workspace
    build(clone, store, target_file="init.ckpt")
    before = misses(store)
    build(clone, store, "width=96", "heads=4", target_file="init.ckpt")
    build(clone, store, "width=96", "heads=4")
    assert new_misses(store, before) == ["admit", "elf", "init", "plan", "realize", "tables"]
    # the kernels do not depend on the model: a GPU target compiles them once for any width
    build(clone, store, target="rtx3090")
    before = misses(store)
    build(clone, store, "width=96", "heads=4", target="rtx3090")
    assert new_misses(store, before) == ["admit", "elf", "plan", "realize", "tables"]


def test_another_target_leaves_the_first_alone(workspace):
    clone, store = workspace
    build(clone, store)
    first = tree_digests(clone / "results/cpu")
    mtimes = {p: p.stat().st_mtime_ns for p in (clone / "results/cpu").rglob("*") if p.is_file()}
    before = misses(store)
    build(clone, store, target_file="plan.json", target="gb10")
    assert new_misses(store, before) == ["plan"]
    assert tree_digests(clone / "results/cpu") == first
    assert {p: p.stat().st_mtime_ns for p in mtimes} == mtimes


def test_shared_store_serves_a_second_clone(workspace, tmp_path):
    clone, store = workspace
    build(clone, store)
    before = misses(store)
    second = copy_clone(tmp_path / "second")
    build(second, store)
    assert new_misses(store, before) == []
    theirs, ours = tree_digests(second / "results/cpu"), tree_digests(clone / "results/cpu")
    assert "host.elf" in theirs and theirs == {name: ours[name] for name in theirs}


def test_a_failed_train_keeps_its_result_record_and_runs_again(workspace):
    """Every output is published whole or not at all, so the profile keeps a failed job's outputs
    (keep-incomplete): the record of a run stopped by max_skips says so; the next run redoes it."""
    clone, store = workspace
    stopped = ("steps=8", "interval=4", "loss_scale=1073741824", "max_skips=2")
    run = snakemake(clone, "--config", f"corpus={build_corpus()}", *stopped, "--", "results/cpu/train/result.json",
                    env={"COPPELIUS_STORE": str(store)})
    assert run.returncode != 0
    record = result.read(clone / "results/cpu/train/result.json")
    assert record["status"].startswith("stopped:") and len(record["steps"]) == 2, record["status"]
    again = snakemake(clone, "-n", "--config", f"corpus={build_corpus()}", *stopped, "--",
                      "results/cpu/train/result.json", env={"COPPELIUS_STORE": str(store)})
    assert again.returncode == 0 and "train" in again.stdout, again.stdout[-2000:]


def test_two_workflows_writing_one_store_at_once(tmp_path):
    store = tmp_path / "store"
    clones = [copy_clone(tmp_path / f"c{i}") for i in range(2)]
    outputs, corpus = [None, None], build_corpus()

    def work(i):
        outputs[i] = snakemake(clones[i], "--config", f"corpus={corpus}", "--", "results/cpu/host.elf",
                               env={"COPPELIUS_STORE": str(store)})
    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failed = [i for i, o in enumerate(outputs) if o.returncode != 0]
    # the cause of a failure is in the failing rule's log, not in the end of Snakemake's output
    assert not failed, [(outputs[i].stderr[-1500:], {p.name: p.read_text()[-1500:] for p in
                         (clones[i] / "results/cpu/logs").glob("*.log")}) for i in failed]
    logged = misses(store)
    assert sorted(logged) == sorted(set(logged))  # every key computed once
    assert tree_digests(clones[0] / "results/cpu") == tree_digests(clones[1] / "results/cpu")
    for obj in (store / "objects").rglob("*"):
        if obj.is_file():
            assert hashlib.sha256(obj.read_bytes()).hexdigest() == obj.name


def test_every_artifact_is_bit_identical_across_clones(tmp_path):
    """Two clones in different directories, each with its own store: the same digests for every
    artifact up to the host ELF, for all four targets and all three models (cubins included)."""
    clones = [copy_clone(tmp_path / "a" / "clone"), copy_clone(tmp_path / "deeper" / "b" / "clone")]
    digests = [{}, {}]
    for i, clone in enumerate(clones):
        for target in TARGETS:
            for model in MODELS:
                build(clone, tmp_path / f"store{i}", f"model={model}", "batch=4", target=target)
                digests[i][(target, model)] = tree_digests(clone / f"results/{target}")
    for key in digests[0]:
        assert digests[0][key] == digests[1][key], key
        assert any(name.endswith("host.elf") for name in digests[0][key])
    from coppelius.formats.elf import host_machine, read_host_elf
    machines = {"cpu": host_machine(), "h200": "x86_64", "rtx3090": "x86_64", "gb10": "aarch64"}
    for target in TARGETS:  # each host ELF is for its target's host machine (the last model built)
        assert read_host_elf(clones[0] / f"results/{target}/host.elf").machine == machines[target]
    print(f"{len(digests[0])} target x model builds, {sum(len(d) for d in digests[0].values())} artifacts identical")
