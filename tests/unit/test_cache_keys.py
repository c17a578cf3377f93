"""Cache keys that cannot go stale: each stage's code is the import closure of its entry, read from
the ast (coppelius.sources); the closure holds every package module Python really loads for it; and
a real edit to any module changes exactly the keys of the stages whose closure holds it."""
import json
import shutil
import subprocess
import sys

import pytest

from coppelius import cas, sources, stages
from coppelius.realize import IMAGE_SOURCES
from coppelius.realize.nvrtc import SOURCES

STAGES = tuple(stages.FUNCTIONS)


def digests() -> dict[str, str]:
    stages.code.cache_clear()
    sources._tree.cache_clear()
    return {stage: cas.code_digest(stages.code(stage)) for stage in STAGES}


@pytest.mark.parametrize("stage", STAGES)
def test_the_closure_holds_every_module_python_loads_for_the_stage(stage):
    """Import the stage's entry modules in a fresh interpreter: every package module loaded is keyed."""
    entry = sorted(sources.stage_entry(stages.FUNCTIONS[stage]))
    program = (f"import importlib, json, sys\nfor m in {entry!r}: importlib.import_module(m)\n"
               f"print(json.dumps(sorted(m for m in sys.modules if m == 'coppelius' or m.startswith('coppelius.'))))")
    loaded = json.loads(subprocess.run([sys.executable, "-c", program], check=True, capture_output=True,
                                       text=True).stdout)
    files = {sources.module_path(m).relative_to(sources.PACKAGE).as_posix() for m in loaded}
    assert files <= set(stages.code(stage)), sorted(files - set(stages.code(stage)))


def test_stages_read_their_data_files():
    assert set(IMAGE_SOURCES) <= set(stages.code("realize"))
    assert SOURCES.relative_to(sources.PACKAGE).as_posix() in stages.code("compile")


def test_a_real_edit_changes_exactly_the_keys_of_the_stages_that_run_it(tmp_path, monkeypatch):
    copy = tmp_path / "coppelius"
    shutil.copytree(sources.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(sources, "PACKAGE", copy)
    monkeypatch.setattr(cas, "PACKAGE", copy)
    before = digests()
    closures = {stage: set(stages.code(stage)) for stage in STAGES}
    modules = sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*.py"))
    for rel in modules + ["kernels/cuda/common.cuh"]:
        path = copy / rel
        original = path.read_bytes()
        path.write_bytes(original + b"\n# an edit\n")
        after = digests()
        path.write_bytes(original)
        changed = {stage for stage in STAGES if after[stage] != before[stage]}
        keyed = {stage for stage in STAGES if rel in closures[stage] or any(rel.startswith(d + "/") for d in
                                                                              closures[stage])}
        assert changed == keyed, rel
    assert digests() == before
    every = set(STAGES)
    assert all("stages.py" in closures[s] and "cas.py" in closures[s] for s in every)  # the stage code itself
    assert "formats/elf.py" in closures["elf"] and "formats/elf.py" not in closures["plan"]
    assert digests()["compile"] == before["compile"]
    (copy / "kernels/cuda/common.cuh").write_text("// a kernel edit\n" + (copy / "kernels/cuda/common.cuh").read_text())
    assert {s for s, d in digests().items() if d != before[s]} == {"compile"}  # the cubin is realize's input
    assert "report.py" not in set().union(*(closures[s] for s in every - {"report"}))  # it runs after the build
    assert "report.py" in closures["report"]
    assert not any(rel.startswith("runtime/") for rel in closures["plan"] | closures["admit"])


def test_the_init_key_names_the_numpy_that_draws_the_weights(tmp_path):
    """init's bytes are numpy's draws (PCG64, standard_normal: NEP 19 lets a numpy release change a Generator
    method's stream), so its key and manifest name numpy's version as the realize key does for the cpu target; the
    init manifest's tools were {}."""
    import os
    import numpy
    env = {**os.environ, "PYTHONPATH": str(sources.PACKAGE.parent), "COPPELIUS_STORE": str(tmp_path / "store")}
    defaults = str(sources.PACKAGE.parent / "config" / "config.yaml")
    for command in (["configure", "--config", defaults, "--out", "results/cpu/config.json"],
                    ["init", "--config", "results/cpu/config.json", "--out", "results/cpu/init.ckpt"]):
        subprocess.run([sys.executable, "-m", "coppelius", *command], cwd=tmp_path, env=env, check=True,
                       capture_output=True)
    manifest = json.loads((tmp_path / "results/cpu/manifests/init.json").read_text())
    assert manifest["tools"] == {"numpy": numpy.__version__}
