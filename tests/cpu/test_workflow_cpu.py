"""The README's main job on a fresh copy: `snakemake --cores 2` with the default config trains the
tiny model on the cpu target, learns, reports validation loss and a sample of the trained model, and a
second run has nothing to do."""
import json

from conftest import copy_clone, snakemake


def test_default_workflow_learns_and_reports(tmp_path):
    clone = copy_clone(tmp_path / "clone")
    run = snakemake(clone)
    assert run.returncode == 0, run.stderr[-4000:]
    train = json.loads((clone / "results/cpu/train/result.json").read_text())
    evaluation = json.loads((clone / "results/cpu/evaluate/result.json").read_text())
    first, last = train["steps"][0]["loss"], train["steps"][-1]["loss"]
    tail = sum(s["loss"] for s in train["steps"][-20:]) / 20
    print(f"train loss {first:.3f} -> {last:.3f} (last 20 mean {tail:.3f}); validation {evaluation['mean_loss']:.3f}; "
          f"{train['tokens_per_second']:.0f} tokens/s")
    assert tail <= 0.65 * first and last <= 0.65 * first
    assert evaluation["mean_loss"] < 0.65 * first and len(evaluation["predict"]) > 0
    summary = (clone / "results/cpu/report/summary.md").read_text()
    assert "validation loss" in summary and (clone / "results/cpu/report/loss.png").read_bytes()[:4] == b"\x89PNG"
    sample = (clone / "results/cpu/sample/sample.txt").read_bytes()  # 32 prompt tokens, 256 new
    assert len(sample) == 32 + 256 and "## A sample from the trained model" in summary
    again = snakemake(clone)
    assert "Nothing to be done" in again.stdout + again.stderr
