"""The workflow on fresh copies of the repository: plans for the GPU targets on this CPU-only
machine, nothing to do on a second run, identical plan bytes across directories, and config
refusals in one line before any job runs."""
import pytest
from conftest import copy_clone, snakemake


def test_gpu_target_plans_identical_across_clones(tmp_path):
    first, second = copy_clone(tmp_path / "one"), copy_clone(tmp_path / "elsewhere" / "two")
    for target in ("gb10", "rtx3090"):
        for clone in (first, second):
            run = snakemake(clone, "--config", f"target={target}", "--", f"results/{target}/plan.json")
            assert run.returncode == 0, run.stderr[-3000:]
        plan = f"results/{target}/plan.json"
        assert (first / plan).read_bytes() == (second / plan).read_bytes()
    again = snakemake(first, "--config", "target=gb10", "--", "results/gb10/plan.json")
    assert "Nothing to be done" in again.stdout + again.stderr


def test_bad_config_refused_before_any_job(clone):
    run = snakemake(clone, "--config", "steps=301")
    lines = [l for l in run.stderr.splitlines() if "coppelius:" in l]
    assert run.returncode != 0 and lines == [
        "coppelius: config: key 'steps' is 301; it must be a multiple of interval (200): change steps or interval"]
    assert not (clone / "results").exists()


@pytest.mark.parametrize("value, line", [
    ("seed=1.0", "config: key 'seed' is 1.0 (float); it must be integer"),
    ("keep=4294967296", "config: key 'keep' is 4294967296; it must be at most 4294967295"),
    ("eps=1e300", "config: key 'eps' is 1e+300; the AdamW kernel takes eps x loss_scale (1024) in binary32: make "
                  "that product between 1.2e-38 and 3.4e38"),
    ("model=small heads=1", "config: key 'heads' is 1; the head size, width / heads = 384, is past the 128 "
                            "the attention kernels take: use at least 3 heads, dividing width"),
])
def test_a_value_of_the_wrong_kind_is_one_line_from_a_dry_run(clone, value, line):
    """What the schema lets through must not reach a stage (a traceback from canonical JSON, a table's packer):
    `snakemake -n` refuses it in the line of the config check."""
    run = snakemake(clone, "-n", "--config", *value.split())
    assert run.returncode != 0 and "Traceback" not in run.stderr, run.stderr[-3000:]
    assert [l for l in run.stderr.splitlines() if "coppelius:" in l] == [f"coppelius: {line}"]
    assert not (clone / "results").exists()


def test_an_empty_path_in_a_config_file_is_one_line_from_a_dry_run(clone, tmp_path):
    """`tokens: ""` (Snakemake's --config makes an empty value null; a file keeps it) used to pass as no token file and
    then fail the prepare job."""
    (tmp_path / "mine.yaml").write_text('tokens: ""\n')
    run = snakemake(clone, "-n", "--configfile", str(tmp_path / "mine.yaml"))
    assert run.returncode != 0 and "Traceback" not in run.stderr, run.stderr[-3000:]
    assert [l for l in run.stderr.splitlines() if "coppelius:" in l] == [
        "coppelius: config: key 'tokens' is ''; an empty path names no file: give a path, or null for the default"]


def test_llmcs_gpt2_tokens_for_a_byte_level_model_are_one_line_from_a_dry_run(clone, tmp_path):
    """An llm.c user's GPT-2 token file with the default model (tiny, vocab 256) passed the config check, and every
    stage built; the train job then refused results/cpu/tokens/train.bin, a file the user never named."""
    import numpy as np
    from conftest import llmc_datafile
    ids = np.arange(100_000) % 256
    ids[70_000] = 50256  # <|endoftext|>, in what becomes the train stream
    mine = llmc_datafile(tmp_path / "tiny_shakespeare_train.bin", ids)
    run = snakemake(clone, "-n", "--config", f"tokens={mine}")
    assert run.returncode != 0 and "Traceback" not in run.stderr, run.stderr[-3000:]
    assert [l for l in run.stderr.splitlines() if "coppelius:" in l] == [
        f"coppelius: {mine}: token 70000 is 50256, not below the model's vocab 256; use a model with a larger vocab "
        f"or re-tokenize the corpus"]
    assert not (clone / "results").exists()


def test_gb10_builds_admits_and_stops_before_training(clone):
    """On this CPU-only machine: the whole build for the GB10, then one line saying there is no GB10."""
    from conftest import build_corpus
    run = snakemake(clone, "--config", "target=gb10", f"corpus={build_corpus()}")
    assert run.returncode != 0
    assert (clone / "results/gb10/host.elf").exists() and (clone / "results/gb10/certificate.json").exists()
    lines = [l for l in run.stderr.splitlines() if l.startswith("coppelius run:")]
    print(lines)
    assert len(lines) == 1 and "no NVIDIA GB10 is present on this machine" in lines[0]
    assert "aarch64 host with the NVIDIA GB10 and run `host.elf --checkpoint" in lines[0]
