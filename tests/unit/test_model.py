from coppelius.model import Model, preset


def test_parameter_counts_match_llm_c():
    counts = {name: Model(**preset(name)).parameter_count for name in ("tiny", "small", "gpt2-124m")}
    print(counts)
    assert counts == {"tiny": 120_576, "small": 10_844_160, "gpt2-124m": 124_475_904}


def test_vocab_padding_and_flops():
    gpt2 = Model(**preset("gpt2-124m"))
    assert gpt2.vocab_padded == 50304 and Model(**preset("tiny")).vocab_padded == 256
    assert gpt2.flops_per_token() == 6 * 124_475_904 + 12 * 12 * 1024 * 768


def test_tensor_order_is_llm_c():
    names = [n for n, _, _ in Model(**preset("tiny")).tensors()]
    assert names == ["wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
                     "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb"]
