"""The whole tiny GPT-2 built from the reference kernels: the gradient of the mean loss
against float64 central finite differences for every parameter tensor, and the loss at a
small-weight initialization.

Tolerance: max |analytic - numeric| over the checked entries <= RTOL * max |grad| of the
tensor (+ 1e-12 absolute).
"""

import numpy as np
import pytest

from coppelius.kernels import gpt2

VOCAB, VP, CONTEXT, C, L, NH, B = 13, 16, 6, 8, 2, 2, 2
H = 1e-5
RTOL = 1e-6
ENTRIES_PER_TENSOR = 6
FULL_TENSORS = ("lnfb", "ln1b")  # every entry of these small tensors is checked


def shapes():
    return {
        "wte": (VP, C), "wpe": (CONTEXT, C), "ln1w": (L, C), "ln1b": (L, C),
        "qkvw": (L, 3 * C, C), "qkvb": (L, 3 * C), "attprojw": (L, C, C), "attprojb": (L, C),
        "ln2w": (L, C), "ln2b": (L, C), "fcw": (L, 4 * C, C), "fcb": (L, 4 * C),
        "fcprojw": (L, C, 4 * C), "fcprojb": (L, C), "lnfw": (C,), "lnfb": (C,),
    }


def make_params(seed, std, dtype=np.float64):
    """Layernorm weights near 1, everything else normal(0, std)."""
    r = np.random.default_rng(seed)
    params = {}
    for name in gpt2.PARAMETER_ORDER:
        shape = shapes()[name]
        base = 1.0 if name in ("ln1w", "ln2w", "lnfw") else 0.0
        params[name] = (base + std * r.normal(size=shape)).astype(dtype)
    return params


def make_batch(seed, T=CONTEXT):
    r = np.random.default_rng(seed)
    return r.integers(0, VOCAB, size=(B, T)), r.integers(0, VOCAB, size=(B, T))


def test_parameter_order_and_shapes():
    assert gpt2.PARAMETER_ORDER == tuple(shapes())
    params = make_params(0, 0.1)
    tokens, targets = make_batch(1)
    loss, grads = gpt2.forward_backward(params, tokens, targets, VOCAB, NH)
    assert isinstance(loss, float)
    assert tuple(grads) == gpt2.PARAMETER_ORDER
    for name in gpt2.PARAMETER_ORDER:
        assert grads[name].shape == params[name].shape and grads[name].dtype == np.float64


def test_gradients_match_finite_differences():
    params = make_params(seed=2, std=0.4)  # large enough that every nonlinearity matters
    tokens, targets = make_batch(3)
    before = {n: a.copy() for n, a in params.items()}
    loss, grads = gpt2.forward_backward(params, tokens, targets, VOCAB, NH)
    assert all(np.array_equal(params[n], before[n]) for n in params)  # inputs untouched
    assert loss == gpt2.forward(params, tokens, targets, VOCAB, NH)[0]

    r = np.random.default_rng(4)
    for name in gpt2.PARAMETER_ORDER:
        x, g = params[name], grads[name]
        if name in FULL_TENSORS:
            picks = list(np.ndindex(x.shape))
        else:
            flat = r.choice(x.size, size=ENTRIES_PER_TENSOR, replace=False)
            picks = [np.unravel_index(i, x.shape) for i in flat]
        analytic, numeric = [], []
        for idx in picks:
            orig = x[idx]
            x[idx] = orig + H
            up = gpt2.forward(params, tokens, targets, VOCAB, NH)[0]
            x[idx] = orig - H
            down = gpt2.forward(params, tokens, targets, VOCAB, NH)[0]
            x[idx] = orig
            analytic.append(g[idx])
            numeric.append((up - down) / (2 * H))
        d = float(np.abs(np.subtract(analytic, numeric)).max())
        scale = float(np.abs(g).max())
        print(f"{name}: max diff {d:.3e} over {len(picks)} entries (max |grad| {scale:.3e})")
        assert scale > 0, f"{name}: gradient is all zero"
        assert d <= RTOL * scale + 1e-12, f"{name}: max diff {d:.3e} > {RTOL:g} * {scale:.3e}"


def test_padding_and_unused_positions_get_zero_gradient():
    params = make_params(seed=5, std=0.4)
    T = CONTEXT - 2  # a shorter sequence than the context: positions T.. are unused
    tokens, targets = make_batch(6, T=T)
    _, grads = gpt2.forward_backward(params, tokens, targets, VOCAB, NH)
    assert np.all(grads["wte"][VOCAB:] == 0.0)  # padded vocabulary rows
    assert np.all(grads["wpe"][T:] == 0.0)
    assert np.abs(grads["wpe"][:T]).min() > 0.0


def test_loss_at_small_init_is_log_vocab():
    params = make_params(seed=7, std=0.02)
    tokens, targets = make_batch(8)
    loss, _ = gpt2.forward(params, tokens, targets, VOCAB, NH)
    print(f"init loss {loss:.6f}, ln(vocab) {np.log(VOCAB):.6f}")
    assert abs(loss - np.log(VOCAB)) < 0.02


def test_float32_model_matches_float64():
    p64 = make_params(seed=9, std=0.2)
    p32 = {n: a.astype(np.float32) for n, a in p64.items()}
    tokens, targets = make_batch(10)
    loss64, g64 = gpt2.forward_backward(p64, tokens, targets, VOCAB, NH)
    loss32, g32 = gpt2.forward_backward(p32, tokens, targets, VOCAB, NH)
    assert loss32 == pytest.approx(loss64, rel=1e-5)
    for name in gpt2.PARAMETER_ORDER:
        assert g32[name].dtype == np.float32
        d = float(np.abs(g32[name] - g64[name]).max())
        assert d <= 1e-4 * float(np.abs(g64[name]).max()) + 1e-7, f"{name}: float32 diff {d:.3e}"
