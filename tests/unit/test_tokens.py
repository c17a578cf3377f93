"""Token files round-trip; corrupt ones are refused with the file, the field and the value."""
import numpy as np
import pytest

from coppelius.errors import CoppeliusError
from coppelius.inspect import describe
from coppelius.formats import tokens
from coppelius.prepare import prepare
from conftest import llmc_datafile


def test_round_trip(tmp_path):
    ids = np.random.default_rng(0).integers(0, 50257, size=10_000)
    tokens.write(tmp_path / "a.bin", ids)
    raw = (tmp_path / "a.bin").read_bytes()
    assert len(raw) == 1024 + 2 * ids.size
    assert list(np.frombuffer(raw[:12], "<i4")) == [20240520, 1, ids.size]
    assert np.array_equal(tokens.read(tmp_path / "a.bin", vocab=50257), ids)


def corrupt(tmp_path, mutate) -> str:
    path = tmp_path / "t.bin"
    tokens.write(path, np.arange(100) % 256)
    data = bytearray(path.read_bytes())
    path.write_bytes(bytes(mutate(data)))
    with pytest.raises(CoppeliusError) as caught:
        tokens.read(path, vocab=256)
    print(caught.value)
    return str(caught.value)


def test_bad_magic(tmp_path):
    def mutate(d):
        d[0:4] = (12345).to_bytes(4, "little")
        return d
    assert "magic is 12345, not 20240520" in corrupt(tmp_path, mutate)


def test_bad_version(tmp_path):
    def mutate(d):
        d[4:8] = (2).to_bytes(4, "little")
        return d
    assert "version is 2" in corrupt(tmp_path, mutate)


def test_short_file(tmp_path):
    assert "size is 1198 bytes but the header's token count 100 needs 1224" in corrupt(tmp_path, lambda d: d[:-26])
    assert "header is 500 bytes" in corrupt(tmp_path, lambda d: d[:500])


def test_token_over_vocab_names_first_offset(tmp_path):
    def mutate(d):
        d[1024 + 2 * 37:1024 + 2 * 38] = (300).to_bytes(2, "little")
        d[1024 + 2 * 60:1024 + 2 * 61] = (999).to_bytes(2, "little")
        return d
    assert "token 37 is 300, not below the model's vocab 256" in corrupt(tmp_path, mutate)


def test_a_gpt2_token_file_as_llmc_writes_it_is_read_as_it_is(tmp_path):
    ids = np.random.default_rng(1).integers(0, 50257, size=1000)
    path = llmc_datafile(tmp_path / "gpt2.bin", ids)
    assert np.array_equal(tokens.read(path, vocab=50257), ids)
    assert describe(str(path)) == [f"{path}: llm.c token stream", "1,000 tokens"]


def test_llmcs_llama3_token_file_is_refused_by_name_with_what_to_give_instead(tmp_path):
    """llm.c's LLaMA-3 file (magic 20240801, version 7, uint32 ids) is an llm.c .bin token file: the refusal said
    'give an llm.c .bin token file'; it names the format and the GPT-2 file to give instead, as inspect does."""
    path = llmc_datafile(tmp_path / "llama3.bin", np.arange(1000), "llama-3")
    expected = (f"{path}: header magic is 20240801: llm.c's LLaMA-3 token file (uint32 ids), which Coppelius does not "
                f"read; give a GPT-2 token file (magic 20240520, uint16 ids), as llm.c's data scripts write it with "
                f"--model_desc gpt-2")
    for read in (tokens.read, describe):
        with pytest.raises(CoppeliusError) as caught:
            read(str(path))
        assert str(caught.value) == expected


def test_missing_file(tmp_path):
    with pytest.raises(CoppeliusError, match="cannot read the token file"):
        tokens.read(tmp_path / "none.bin")


def test_prepare_splits_corpus_and_accepts_bin(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "b.txt").write_bytes(b"world " * 50)
    (corpus / "a.txt").write_bytes(b"hello " * 50)
    counts = prepare(str(tmp_path / "train.bin"), str(tmp_path / "val.bin"), corpus=str(corpus))
    assert counts == {"train": 540, "validation": 60}
    joined = np.concatenate([tokens.read(tmp_path / "train.bin"), tokens.read(tmp_path / "val.bin")])
    assert bytes(joined.astype(np.uint8)) == b"hello " * 50 + b"world " * 50  # sorted path order
    again = prepare(str(tmp_path / "t2.bin"), str(tmp_path / "v2.bin"), tokens=str(tmp_path / "train.bin"))
    assert counts["train"] == again["train"] + again["validation"]
