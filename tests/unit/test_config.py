"""Every kind of configuration refusal, with its one-line message."""
from fractions import Fraction

import pytest
import yaml

from coppelius.config import ROOT, load, resolve
from coppelius.errors import CoppeliusError

DEFAULTS = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def refusal(**overrides) -> str:
    with pytest.raises(CoppeliusError) as caught:
        resolve(DEFAULTS | overrides)
    message = str(caught.value)
    print(message)
    assert "\n" not in message
    return message


def test_defaults_resolve_exactly():
    config = resolve(DEFAULTS)
    assert config.target["name"] == "cpu" and config.model.vocab == 256
    assert str(config.learner.lr) == "3/1000" and config.learner.loss_scale == 1024


@pytest.mark.parametrize("overrides, expected", [
    ({"colour": "red"}, "unknown key 'colour'"),
    ({"steps": "many"}, "key 'steps' is 'many' (str); it must be integer"),
    ({"batch": 1.5}, "key 'batch' is 1.5"),
    ({"target": "tpu"}, "key 'target' is 'tpu'; choose one of cpu, h200, h100, rtx3090, gb10"),
    ({"model": "gpt5"}, "key 'model' is 'gpt5'"),
    ({"steps": 301}, "key 'steps' is 301; it must be a multiple of interval (200)"),
    ({"steps_per_launch": 3}, "key 'steps_per_launch' is 3; it must divide interval (200)"),
    ({"steps_per_launch": 16}, "key 'steps_per_launch' is 16; it must be at most 8"),
    ({"steps_per_launch": 0}, "key 'steps_per_launch' is 0; it must be at least 1"),
    ({"heads": 5}, "key 'heads' is 5; it must divide width (64)"),
    ({"loss_scale": 1000}, "key 'loss_scale' is 1000; it must be a power of two"),
    ({"vocab": 70000}, "key 'vocab' is 70000; token ids are uint16"),
    ({"lr": "fast"}, "key 'lr' is 'fast'; write a decimal or a fraction"),
    ({"lr": "-1/10"}, "key 'lr' is '-1/10'; it must be positive"),
    ({"beta2": "1"}, "key 'beta2' is '1'; it must lie in [0, 1)"),
    ({"steps": 0}, "key 'steps' is 0; it must be at least 1"),
    ({"corpus": "a.txt", "tokens": "b.bin"}, "give either corpus or tokens"),
    ({"seed": 1.0}, "key 'seed' is 1.0 (float); it must be integer"),
    ({"steps": 600.0}, "key 'steps' is 600.0 (float); it must be integer"),
    ({"vocab": 256.0}, "key 'vocab' is 256.0 (float); it must be integer or null"),
    ({"keep": 2**32}, "key 'keep' is 4294967296; it must be at most 4294967295"),
    ({"max_skips": 2**40}, "key 'max_skips' is 1099511627776; it must be at most 4294967295"),
    ({"eval_contexts": 2**32}, "key 'eval_contexts' is 4294967296; it must be at most 4294967295"),
    ({"steps": 2**32, "interval": 2**32}, "key 'interval' is 4294967296; it must be at most 4294967295"),
    ({"lr": "1e-50"}, "key 'lr' is '1e-50'; it rounds to zero or a subnormal in binary32"),
    ({"lr": 1e300}, "key 'lr' is 1e+300; the AdamW step size, up to lr / (1 - beta1), would pass binary32's largest"),
    ({"lr": "1e999999"}, "key 'lr' is '1e999999'; it is far outside binary32's range"),
    ({"weight_decay": "1e-5000"}, "key 'weight_decay' is '1e-5000'; it is far outside binary32's range"),
    ({"eps": "1e300"}, "key 'eps' is '1e300'; the AdamW kernel takes eps x loss_scale (1024) in binary32"),
    ({"eps": "1e-50"}, "key 'eps' is '1e-50'; the AdamW kernel takes eps x loss_scale (1024) in binary32"),
    ({"weight_decay": "1e300"}, "key 'weight_decay' is '1e300'; the AdamW kernel takes lr x weight_decay in binary32"),
    ({"beta1": "0.99999999999999999999"}, "key 'beta1' is '0.99999999999999999999'; it rounds to 1 in binary32"),
    ({"loss_scale": 2**200}, "it must be at most 2^127"),
    ({"tokens": ""}, "key 'tokens' is ''; an empty path names no file: give a path, or null for the default"),
    ({"corpus": ""}, "key 'corpus' is ''; an empty path names no file"),
    ({"staging_bytes": 2**62}, "key 'staging_bytes' is 4611686018427387904; it must fit the cpu target's "
                               "8,589,934,592"),
    ({"init_from": ""}, "key 'init_from' is ''; an empty path names no file"),
    ({"width": 256, "heads": 1}, "key 'heads' is 1; the head size, width / heads = 256, is past the 128 the attention "
                                 "kernels take: use at least 2 heads"),
])
def test_refusals_name_key_and_value(overrides, expected):
    assert expected in refusal(**overrides)


def test_ratios_are_exact():
    config = resolve(DEFAULTS | {"lr": 0.0003, "beta1": "0.9", "eps": "1/1000"})
    assert (config.learner.lr.numerator, config.learner.lr.denominator) == (3, 10000)
    assert config.learner.beta1.denominator == 10 and config.learner.eps.denominator == 1000


def test_model_overrides_apply():
    config = resolve(DEFAULTS | {"width": 96, "heads": 3})
    assert config.model.width == 96 and config.model.head_size == 32


def test_unreadable_config_file(tmp_path):
    with pytest.raises(CoppeliusError, match="cannot read the configuration"):
        load(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(CoppeliusError, match="not a mapping"):
        load(bad)


def test_the_learners_numbers_at_binary32s_edges_resolve():
    """The smallest lr and the largest beta the kernels' binary32 words hold, a decay that is subnormal there."""
    config = resolve(DEFAULTS | {"lr": "2e-38", "beta1": "0.99999994", "beta2": "0.99999994", "loss_scale": 2**127,
                                 "eps": "1e-37"})
    assert config.learner.loss_scale == 2**127 and config.learner.lr == Fraction(2, 10**38)


def test_each_gpu_target_is_found_by_its_cards_name():
    """The GPU tests and benchmarks build for the target whose card the driver names (tests/cuda_probe.py):
    each profile's card name leads back to it, and a card no profile names to none."""
    from cuda_probe import card_target
    from coppelius.config import TARGETS_DIR
    for path in sorted(TARGETS_DIR.glob("*.yaml")):
        card = yaml.safe_load(path.read_text())["card"]
        if path.stem != "cpu":
            assert card_target(card) == path.stem, (card, path.stem)
    assert card_target("NVIDIA H100 80GB HBM3") == "h100" and card_target("NVIDIA H200") == "h200"
    assert card_target("NVIDIA A100-SXM4-80GB") is None
