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


def test_a_small_folder_of_documents_trains_for_more_steps_than_it_holds(tmp_path):
    """The issue's small-folder case, scaled to the cpu target's tiny model: about 30,000 tokens of plain
    text hold 26 contexts of batch 16 x context 64; 60 steps go round the train stream twice (llm.c and
    nanoGPT go round the data again; the workflow used to refuse it), with the validation stream
    scored at every publication and drawn on the loss plot, and a sample of the trained model in the report."""
    clone = copy_clone(tmp_path / "clone")
    folder = tmp_path / "documents"
    folder.mkdir()
    text = b"".join((clone / source).read_bytes() for source in ("README.md", "docs/design.md", "docs/formats.md"))
    for k in range(4):  # four documents of 7,500 bytes: 27,000 train tokens, 3,000 validation tokens
        (folder / f"doc-{k}.txt").write_bytes(text[7500 * k:7500 * (k + 1)])
    run = snakemake(clone, "--config", f"corpus={folder}", "steps=60", "interval=20", "batch=16", "eval_contexts=4")
    assert run.returncode == 0, run.stderr[-4000:]
    train = json.loads((clone / "results/cpu/train/result.json").read_text())
    assert train["status"] == "completed" and train["tokens"]["count"] == 27_000 and train["epoch"] == 2
    assert [s["epoch"] for s in train["steps"]] == [0] * 26 + [1] * 26 + [2] * 8
    points = train["validation"]["points"]
    assert [p["t"] for p in points] == [20, 40, 60] and points[-1]["loss"] < points[0]["loss"]
    assert train["steps"][-1]["loss"] < 0.8 * train["steps"][0]["loss"]
    print(f"train loss {train['steps'][0]['loss']:.3f} -> {train['steps'][-1]['loss']:.3f}; validation "
          f"{[round(p['loss'], 3) for p in points]}; {train['tokens_per_second']:.0f} tokens/s, "
          f"{train['validation']['seconds']:.2f} s of it validating")
    assert (clone / "results/cpu/train/predictions.bin").stat().st_size == 4 * 16 * 64
    summary = (clone / "results/cpu/report/summary.md").read_text()
    assert "2 passes over the 27,000-token train stream" in summary and "(step 60)" in summary
    sample = (clone / "results/cpu/sample/sample.txt").read_bytes()  # the report shows the trained model's sample
    assert len(sample) == 32 + 256 and sample.decode(errors="replace").rstrip("\n")[-40:] in summary
    assert (clone / "results/cpu/report/loss.png").read_bytes()[:4] == b"\x89PNG"
