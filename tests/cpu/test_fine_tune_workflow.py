"""Fine-tuning through the workflow: with `init_from`, the cpu target's run starts from imported weights (an
llm.c checkpoint, a Hugging Face model.safetensors) instead of init's; other weights train anew; weights of
another model are refused before any job runs."""
import hashlib
import json
import subprocess
import sys

import numpy as np

from conftest import build_corpus, copy_clone, snakemake
from coppelius.config import read_resolved
from coppelius.formats import checkpoint
from coppelius.weights import llmc
from coppelius.initialize import write_initial_checkpoint
from coppelius.model import Model

SMALL = ["steps=4", "interval=2", "batch=2", "eval_contexts=2"]


def losses(clone, start: str) -> list:
    """The train run's losses, once its record says it started from results/cpu/START."""
    record = json.loads((clone / "results/cpu/train/result.json").read_text())
    assert record["checkpoint_in"]["path"].endswith(f"results/cpu/{start}"), record["checkpoint_in"]
    return [step["loss"] for step in record["steps"]]


def test_a_workflow_fine_tunes_from_imported_weights(tmp_path):
    clone = copy_clone(tmp_path / "clone")
    settings = ["--config", f"corpus={build_corpus()}", *SMALL]
    run = snakemake(clone, *settings)
    assert run.returncode == 0, run.stderr[-3000:]
    seeded, init = losses(clone, "init.ckpt"), clone / "results/cpu/init.ckpt"

    # init's weights, handed over as llm.c's checkpoint: the imported start is init's, byte for byte
    exported = tmp_path / "gpt2.bin"
    subprocess.run([sys.executable, "-m", "coppelius", "export", init, "--out", exported], check=True, cwd=clone)
    run = snakemake(clone, *settings, f"init_from={exported}")
    assert run.returncode == 0, run.stderr[-3000:]
    assert (clone / "results/cpu/imported.ckpt").read_bytes() == init.read_bytes()
    assert losses(clone, "imported.ckpt") == seeded

    # other weights (seed 1, as a Hugging Face file): a new import and a new run from them
    config = read_resolved(clone / "results/cpu/config.json")
    write_initial_checkpoint(tmp_path / "other.ckpt", config.model, config.learner, 1)
    other = tmp_path / "model.safetensors"
    subprocess.run([sys.executable, "-m", "coppelius", "export", tmp_path / "other.ckpt", "--out", other], check=True)
    run = snakemake(clone, *settings, f"init_from={other}")
    assert run.returncode == 0, run.stderr[-3000:]
    imported = checkpoint.read(clone / "results/cpu/imported.ckpt")[1]["params"]
    assert (imported == checkpoint.read(tmp_path / "other.ckpt")[1]["params"]).all()
    manifest = json.loads((clone / "results/cpu/manifests/import.json").read_text())
    assert manifest["inputs"]["weights"] == hashlib.sha256(other.read_bytes()).hexdigest()
    tuned = losses(clone, "imported.ckpt")
    print(f"seeded run's losses {seeded}; from other weights {tuned}")
    assert len(tuned) == 4 and tuned[0] != seeded[0]

    # a checkpoint of another model, or one the workflow itself writes: one line, before any job runs
    wide = tmp_path / "wide.bin"
    model = Model(vocab=256, context=64, width=96, layers=2, heads=4)
    llmc.write(wide, model, np.zeros(model.parameter_count, np.float32))
    before = {p: p.stat().st_mtime_ns for p in (clone / "results").rglob("*") if p.is_file()}
    for init_from, expected in [(wide, "header field C is 96 but the config's model has width 64"),
                                ("results/cpu/train/final.ckpt", "a file under results/, which this workflow writes")]:
        run = snakemake(clone, *settings, f"init_from={init_from}")
        lines = [line for line in run.stderr.splitlines() if "coppelius:" in line]
        assert run.returncode != 0 and len(lines) == 1 and expected in lines[0], run.stderr[-2000:]
    assert {p: p.stat().st_mtime_ns for p in (clone / "results").rglob("*") if p.is_file()} == before
