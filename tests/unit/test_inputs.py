"""The corpus and token-file checks the workflow makes before any job runs, against what prepare does."""
import pytest
import yaml

from coppelius.config import ROOT, resolve
from coppelius.errors import CoppeliusError
from coppelius.formats import tokens
from coppelius.prepare import check_inputs, corpus_files, prepare, stream_length

DEFAULTS = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def test_a_file_reached_through_a_link_is_read_once(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.txt").write_bytes(b"alpha " * 100)
    (folder / "b.txt").symlink_to(folder / "a.txt")
    (folder / "c.txt").write_bytes(b"gamma " * 100)
    assert [f.name for f in corpus_files(folder)] == ["a.txt", "c.txt"]


def test_stream_length_is_what_prepare_writes(tmp_path):
    folder = tmp_path / "corpus"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_bytes(b"x" * 1234)
    (folder / "sub" / "b.txt").write_bytes(b"y" * 777)
    config = resolve(DEFAULTS | {"corpus": str(folder)})
    counts = prepare(str(tmp_path / "train.bin"), str(tmp_path / "val.bin"), corpus=str(folder))
    assert stream_length(config) == counts["train"] + counts["validation"] == 2011
    tokens.write(tmp_path / "t.bin", list(range(100)))
    assert stream_length(resolve(DEFAULTS | {"tokens": str(tmp_path / "t.bin")})) == 100


def test_counts_are_refused_naming_the_key_that_fixes_them(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(b"z" * 20_000)  # 18,000 train tokens, 2,000 validation tokens
    base = DEFAULTS | {"corpus": str(corpus), "batch": 2, "steps": 100, "interval": 100, "eval_contexts": 1}
    check_inputs(resolve(base))  # 100 steps of 128 tokens fit in 18,000; one pass of 128 in 2,000
    # more steps or contexts than a stream holds go round it again (epochs), as llm.c's loader does
    check_inputs(resolve(base | {"steps": 1000, "interval": 100, "eval_contexts": 100}))
    with pytest.raises(CoppeliusError, match="key 'batch' is 32; the validation stream .* holds 2,000 tokens, less "
                                             "than one context of batch 32 x context 64 . 1 = 2,049"):
        check_inputs(resolve(base | {"batch": 32}))
    with pytest.raises(CoppeliusError, match="key 'batch' is 300; the train stream .* holds 18,000 tokens"):
        check_inputs(resolve(base | {"batch": 300}))
    with pytest.raises(CoppeliusError, match="key 'vocab' is 100"):
        check_inputs(resolve(base | {"vocab": 100}))


def test_a_token_file_with_an_id_the_model_has_not_is_refused_before_any_job(tmp_path):
    """Every id of `tokens` goes into the train or the validation stream; an id past the model's vocab was found only
    by the train job (naming results/TARGET/tokens/train.bin), after every build stage had run."""
    ids = list(range(256)) * 100
    ids[9000] = 50256
    tokens.write(tmp_path / "gpt2.bin", ids)
    config = DEFAULTS | {"tokens": str(tmp_path / "gpt2.bin"), "batch": 2}
    with pytest.raises(CoppeliusError) as refused:
        check_inputs(resolve(config))
    assert str(refused.value) == (f"{tmp_path / 'gpt2.bin'}: token 9000 is 50256, not below the model's vocab 256; "
                                  f"use a model with a larger vocab or re-tokenize the corpus")
    check_inputs(resolve(config | {"vocab": 50257}))


def test_config_refuses_counts_past_int32_and_control_characters():
    with pytest.raises(CoppeliusError, match="key 'batch' is 1000000000; the MLP activations"):
        resolve(DEFAULTS | {"batch": 1_000_000_000})
    with pytest.raises(CoppeliusError, match="key 'width' is 16384; the model would have"):
        resolve(DEFAULTS | {"width": 16384, "heads": 1, "layers": 12})
    with pytest.raises(CoppeliusError, match="key 'width' is 4160; the layernorm backward .* at most 4096"):
        resolve(DEFAULTS | {"width": 4160, "heads": 65, "layers": 1})
    with pytest.raises(CoppeliusError, match="key 'corpus' is 'a\\\\nb'; a path cannot hold a newline"):
        resolve(DEFAULTS | {"corpus": "a\nb"})


def test_an_input_under_the_workflows_results_is_refused(tmp_path):
    """Snakemake removes a job's outputs before the job runs: a token file or corpus under results/ would be
    deleted by the prepare job that reads it."""
    results = tmp_path / "results"
    (results / "cpu" / "tokens").mkdir(parents=True)
    tokens.write(results / "cpu" / "tokens" / "train.bin", list(range(30_000)))
    (results / "text.txt").write_bytes(b"z" * 30_000)
    for key, value in (("tokens", results / "cpu" / "tokens" / "train.bin"), ("corpus", results / "text.txt"),
                       ("corpus", results)):
        with pytest.raises(CoppeliusError, match=rf"^config: key '{key}' is '{value}', a (file|folder) under "
                                                 rf"{results}/, which this workflow writes; copy it out"):
            check_inputs(resolve(DEFAULTS | {key: str(value)}), outputs=results)
    check_inputs(resolve(DEFAULTS | {"corpus": str(results / "text.txt")}), outputs=tmp_path / "elsewhere")
