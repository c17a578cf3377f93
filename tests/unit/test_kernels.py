"""Reference kernels: every backward against float64 central finite differences, plus the
forward definitions (attention, cross-entropy padding, argmax, AdamW, all_finite), and the cpu
device's lm-head statistics kernels (matmul_forward_stats, crossentropy_forward_backward_stats).

A kernel's scalar test loss is sum(output * W) for a fixed random W, so its backward is fed
dout = W. Tolerance: max |analytic - numeric| <= RTOL * max |numeric| (+ 1e-12 absolute).
"""

import numpy as np
import pytest

from coppelius.kernels import reference as k
from coppelius.runtime import cpu

B, T, TMAX, C, NH, VP, VOCAB = 2, 5, 6, 8, 2, 16, 13
N = B * T
H = 1e-5      # central-difference step (truncation and roundoff both ~1e-11 here)
RTOL = 1e-6   # relative tolerance on the max abs difference per tensor


def rng(seed=0):
    return np.random.default_rng(seed)


def numeric_grad(loss, x):
    """Central differences of loss() w.r.t. every entry of x (perturbed in place, restored)."""
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        orig = x[idx]
        x[idx] = orig + H
        up = loss()
        x[idx] = orig - H
        down = loss()
        x[idx] = orig
        g[idx] = (up - down) / (2 * H)
    return g


def check(name, analytic, numeric, rtol=RTOL):
    assert analytic.shape == numeric.shape and analytic.dtype == np.float64
    d = float(np.abs(analytic - numeric).max())
    scale = float(np.abs(numeric).max())
    print(f"{name}: max diff {d:.3e} (max |grad| {scale:.3e})")
    assert d <= rtol * scale + 1e-12, f"{name}: max diff {d:.3e} > {rtol:g} * {scale:.3e}"


def unchanged(*arrays):
    """Copies of arrays, and a function asserting the originals still equal them."""
    copies = [a.copy() for a in arrays]
    return lambda: all(np.array_equal(a, c) for a, c in zip(arrays, copies))


# ---------------------------------------------------------------- backward vs differences

def test_encoder_backward():
    r = rng(1)
    tokens = r.integers(0, VOCAB, size=(B, T))
    tokens[1, 3] = tokens[0, 0]  # a repeated token: its rows must be summed
    wte, wpe = r.normal(size=(VP, C)), r.normal(size=(TMAX, C))
    w = r.normal(size=(B, T, C))
    same = unchanged(tokens, wte, wpe, w)
    dwte, dwpe = k.encoder_backward(w, tokens, VP, TMAX)
    assert same()
    loss = lambda: float((k.encoder_forward(tokens, wte, wpe) * w).sum())
    check("encoder dwte", dwte, numeric_grad(loss, wte))
    check("encoder dwpe", dwpe, numeric_grad(loss, wpe))
    assert not dwpe[T:].any() and not dwte[VOCAB:].any()
    np.testing.assert_array_equal(k.encoder_forward(tokens, wte, wpe)[1, 2], wte[tokens[1, 2]] + wpe[2])


def test_layernorm_backward():
    r = rng(2)
    x, w, b = r.normal(size=(N, C)) * 2 + 0.5, r.normal(size=C), r.normal(size=C)
    dout = r.normal(size=(N, C))
    out, mean, rstd = k.layernorm_forward(x, w, b)
    np.testing.assert_allclose(mean, x.mean(1), rtol=1e-14)
    np.testing.assert_allclose(rstd, 1 / np.sqrt(x.var(1) + 1e-5), rtol=1e-14)  # biased var
    same = unchanged(dout, x, w, mean, rstd)
    dx, dw, db = k.layernorm_backward(dout, x, w, mean, rstd)
    assert same()
    loss = lambda: float((k.layernorm_forward(x, w, b)[0] * dout).sum())
    check("layernorm dx", dx, numeric_grad(loss, x))
    check("layernorm dw", dw, numeric_grad(loss, w))
    check("layernorm db", db, numeric_grad(loss, b))


@pytest.mark.parametrize("has_bias", [True, False])
def test_matmul_backward(has_bias):
    r = rng(3)
    OC = 12
    x, w = r.normal(size=(N, C)), r.normal(size=(OC, C))
    b = r.normal(size=OC) if has_bias else None
    dout = r.normal(size=(N, OC))
    dx, dw, db = k.matmul_backward(dout, x, w, has_bias)
    loss = lambda: float((k.matmul_forward(x, w, b) * dout).sum())
    check("matmul dx", dx, numeric_grad(loss, x))
    check("matmul dw", dw, numeric_grad(loss, w))
    if has_bias:
        check("matmul db", db, numeric_grad(loss, b))
    else:
        assert db is None


def test_attention_backward():
    r = rng(4)
    qkv = r.normal(size=(B, T, 3 * C))
    dout = r.normal(size=(B, T, C))
    out, lse = k.attention_forward(qkv, NH)
    same = unchanged(dout, qkv, out, lse)
    dqkv = k.attention_backward(dout, qkv, out, lse, NH)
    assert same()
    loss = lambda: float((k.attention_forward(qkv, NH)[0] * dout).sum())
    numeric = numeric_grad(loss, qkv)
    for name, sl in (("q", slice(0, C)), ("k", slice(C, 2 * C)), ("v", slice(2 * C, 3 * C))):
        check(f"attention d{name}", dqkv[..., sl], numeric[..., sl])


def test_gelu_backward():
    r = rng(5)
    x = r.normal(size=(N, C)) * 3
    dout = r.normal(size=(N, C))
    slope = k.gelu_slope(x)
    dx = k.gelu_backward(dout, slope)
    loss = lambda: float((k.gelu_forward(x) * dout).sum())
    check("gelu dx", dx, numeric_grad(loss, x))
    s = np.sqrt(2 / np.pi)
    np.testing.assert_allclose(k.gelu_forward(x), 0.5 * x * (1 + np.tanh(s * (x + 0.044715 * x**3))),
                               rtol=1e-15, atol=1e-15)


def test_crossentropy_backward():
    r = rng(6)
    logits = r.normal(size=(N, VP)) * 2
    targets = r.integers(0, VOCAB, size=N)
    scale = 0.37
    dlogits = k.crossentropy_backward(logits, targets, VOCAB, scale)
    loss = lambda: scale * float(k.crossentropy_forward(logits, targets, VOCAB).sum())
    check("crossentropy dlogits", dlogits, numeric_grad(loss, logits))


# ---------------------------------------------------------------- forward definitions

def naive_attention(qkv, n_head):
    """Loop over batch, head and query row; full softmax over the visible keys."""
    Bn, Tn, C3 = qkv.shape
    Cn = C3 // 3
    hs = Cn // n_head
    out, lse = np.zeros((Bn, Tn, Cn)), np.zeros((Bn, n_head, Tn))
    for b in range(Bn):
        for h in range(n_head):
            ch = slice(h * hs, (h + 1) * hs)
            q, kk, v = qkv[b, :, ch], qkv[b, :, Cn:][:, ch], qkv[b, :, 2 * Cn:][:, ch]
            for t in range(Tn):
                scores = np.array([q[t] @ kk[s] / np.sqrt(hs) for s in range(t + 1)])
                p = np.exp(scores) / np.exp(scores).sum()
                out[b, t, ch] = p @ v[: t + 1]
                lse[b, h, t] = np.log(np.exp(scores).sum())
    return out, lse


def test_attention_forward_matches_naive():
    qkv = rng(7).normal(size=(B, T, 3 * C))
    out, lse = k.attention_forward(qkv, NH)
    ref_out, ref_lse = naive_attention(qkv, NH)
    assert out.shape == (B, T, C) and lse.shape == (B, NH, T)
    print(f"attention out: max diff {np.abs(out - ref_out).max():.3e}")
    print(f"attention lse: max diff {np.abs(lse - ref_lse).max():.3e}")
    np.testing.assert_allclose(out, ref_out, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(lse, ref_lse, rtol=1e-12, atol=1e-13)
    # causality: changing the last position changes no earlier output
    qkv2 = qkv.copy()
    qkv2[:, -1] += 1.0
    np.testing.assert_array_equal(k.attention_forward(qkv2, NH)[0][:, :-1], out[:, :-1])


def test_crossentropy_padding():
    r = rng(8)
    logits = r.normal(size=(N, VP))
    targets = r.integers(0, VOCAB, size=N)
    losses = k.crossentropy_forward(logits, targets, VOCAB)
    real = logits[:, :VOCAB]
    expected = -np.log(np.exp(real[np.arange(N), targets]) / np.exp(real).sum(1))
    np.testing.assert_allclose(losses, expected, rtol=1e-13)
    padded = logits.copy()
    padded[:, VOCAB:] = 1e4  # would dominate (and overflow exp) if the padding were used
    np.testing.assert_array_equal(k.crossentropy_forward(padded, targets, VOCAB), losses)
    big = logits + 800.0  # numerically stable: exp(800) would overflow
    np.testing.assert_allclose(k.crossentropy_forward(big, targets, VOCAB), losses, rtol=1e-10)
    dlogits = k.crossentropy_backward(padded, targets, VOCAB, 1.0 / N)
    assert np.all(dlogits[:, VOCAB:] == 0.0)
    np.testing.assert_allclose(dlogits[:, :VOCAB].sum(1), 0.0, atol=1e-15)


def test_argmax_ignores_padding():
    logits = rng(9).normal(size=(N, VP))
    logits[:, VOCAB:] = 100.0
    logits[0, 3] = logits[0, 7] = 50.0  # a tie: the first index wins
    got = k.argmax_forward(logits, VOCAB)
    assert got.dtype == np.int32 and got.shape == (N,)
    np.testing.assert_array_equal(got, np.argmax(logits[:, :VOCAB], axis=1))
    assert got[0] == 3 and np.all(got < VOCAB)


def adamw_by_hand(p, m, v, g, lr, eps, b1, b2, wd, t):
    m2 = b1 * m + (1 - b1) * g
    v2 = b2 * v + (1 - b2) * g * g
    step = lr * np.sqrt(1 - b2**t) / (1 - b1**t)
    return p - lr * wd * p - step * m2 / (np.sqrt(v2) + eps), m2, v2


def test_adamw_one_step():
    r = rng(10)
    p, m, g = r.normal(size=(4, 5)), r.normal(size=(4, 5)) * 0.1, r.normal(size=(4, 5))
    v = r.random(size=(4, 5)) * 0.01
    lr, eps, b1, b2, wd, t = 3e-4, 1e-8, 0.9, 0.95, 0.1, 7
    step = lr * np.sqrt(1 - b2**t) / (1 - b1**t)
    same = unchanged(p, m, v, g)
    got = k.adamw(p, m, v, g, step, eps, b1, b2, lr * wd)
    assert same()
    for name, a, e in zip(("param", "m", "v"), got, adamw_by_hand(p, m, v, g, lr, eps, b1, b2, wd, t)):
        print(f"adamw {name}: max diff {np.abs(a - e).max():.3e}")
        np.testing.assert_allclose(a, e, rtol=1e-14, atol=1e-17)
    # no decay for tensors without weight decay
    np.testing.assert_allclose(k.adamw(p, m, v, g, step, eps, b1, b2, 0.0)[0],
                               adamw_by_hand(p, m, v, g, lr, eps, b1, b2, 0.0, t)[0], rtol=1e-14)


def test_adamw_float32_arithmetic():
    r = rng(11)
    p, m, g = (r.normal(size=20).astype(np.float32) for _ in range(3))
    v = (r.random(size=20) * 0.01).astype(np.float32)
    scalars = (np.float32(1e-3), 1e-8, 0.9, np.float32(0.95), 1e-4)
    got = k.adamw(p, m, v, g, *scalars)
    assert all(a.dtype == np.float32 for a in got)
    f = np.float32
    st, eps, b1, b2, dec = (f(s) for s in scalars)
    m2 = b1 * m + (f(1) - b1) * g
    v2 = b2 * v + (f(1) - b2) * g * g
    p2 = p - dec * p - st * m2 / (np.sqrt(v2) + eps)
    for a, e in zip(got, (p2, m2, v2)):
        np.testing.assert_array_equal(a, e)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_adamw_invariant_to_loss_scale(dtype):
    r = rng(12)
    p = r.normal(size=50).astype(dtype)
    g = r.normal(size=50).astype(dtype)
    step, eps, b1, b2, decay = 1e-3, 1e-8, 0.9, 0.95, 1e-4
    p1, m1, v1 = k.adamw(p, np.zeros_like(p), np.zeros_like(p), g, step, eps, b1, b2, decay)
    p2, m2, v2 = k.adamw(p1, m1, v1, -0.5 * g, step, eps, b1, b2, decay)
    S = 2.0**12
    q1, n1, w1 = k.adamw(p, np.zeros_like(p), np.zeros_like(p), g * S, step, eps * S, b1, b2, decay)
    q2, n2, w2 = k.adamw(q1, n1, w1, -0.5 * g * S, step, eps * S, b1, b2, decay)
    print(f"adamw scaled param ({np.dtype(dtype).name}): max diff {np.abs(q2 - p2).max():.3e}")
    np.testing.assert_allclose(q2, p2, rtol=np.finfo(dtype).eps, atol=0)  # in fact bit-exact
    np.testing.assert_array_equal(n2, m2 * S)  # the moments scale
    np.testing.assert_array_equal(w2, v2 * S * S)


def test_all_finite():
    a, b = np.ones(3), np.zeros((2, 2), dtype=np.float32)
    assert k.all_finite(a, b) is True and k.all_finite() is True
    for bad in (np.nan, np.inf, -np.inf):
        c = b.copy()
        c[1, 0] = bad
        assert k.all_finite(a, c) is False


def test_residual_forward():
    a, b = rng(13).normal(size=(2, N, C))
    same = unchanged(a, b)
    np.testing.assert_array_equal(k.residual_forward(a, b), a + b)
    assert same()


def test_float32_stays_float32():
    r = rng(14)
    f = lambda *s: r.normal(size=s).astype(np.float32)
    tokens = r.integers(0, VOCAB, size=(B, T))
    targets = r.integers(0, VOCAB, size=N)
    x, w, b, qkv, logits = f(N, C), f(C), f(C), f(B, T, 3 * C), f(N, VP)
    out, mean, rstd = k.layernorm_forward(x, w, b)
    att, lse = k.attention_forward(qkv, NH)
    results = [
        k.encoder_forward(tokens, f(VP, C), f(TMAX, C)), *k.encoder_backward(f(B, T, C), tokens, VP, TMAX),
        out, mean, rstd, *k.layernorm_backward(f(N, C), x, w, mean, rstd),
        k.matmul_forward(x, f(3, C), f(3)), *k.matmul_backward(f(N, 3), x, f(3, C), True),
        att, lse, k.attention_backward(f(B, T, C), qkv, att, lse, NH),
        k.gelu_forward(x), k.gelu_slope(x), k.gelu_backward(f(N, C), x), k.residual_forward(x, x),
        k.crossentropy_forward(logits, targets, VOCAB),
        k.crossentropy_backward(logits, targets, VOCAB, np.float64(1.0 / N)),
    ]
    assert [a.dtype for a in results] == [np.float32] * len(results)


# ---------------------------------------------------------------- the lm head's softmax statistics

def test_merged_softmax_parts_are_the_rows_max_and_sum():
    r = rng(15)
    logits = r.normal(size=(N, VP)) * 3
    targets = r.integers(0, VOCAB, size=N)
    for width in (1, 3, 5, VOCAB, VP, 40):  # parts cut by the vocab, empty parts past it, one part for the row
        parts = k.softmax_parts(logits, VOCAB, width)
        assert parts.shape == (N, -(-VP // width), 2)
        empty = np.arange(parts.shape[1]) * width >= VOCAB
        assert np.all(parts[:, empty, 0] == -np.inf) and np.all(parts[:, empty, 1] == 0.0)
        m, s = k.merge_softmax_parts(parts)
        real = logits[:, :VOCAB]
        np.testing.assert_array_equal(m, real.max(axis=1))
        np.testing.assert_allclose(s, np.exp(real - real.max(axis=1, keepdims=True)).sum(axis=1), rtol=1e-13)
        np.testing.assert_allclose(k.crossentropy_forward(logits, targets, VOCAB, (m, s)),
                                   k.crossentropy_forward(logits, targets, VOCAB), rtol=1e-13)
        np.testing.assert_allclose(k.crossentropy_backward(logits, targets, VOCAB, 0.37, (m, s)),
                                   k.crossentropy_backward(logits, targets, VOCAB, 0.37), rtol=1e-12, atol=1e-15)


# The cpu device's matmul_forward_stats and crossentropy_forward_backward_stats (fp16 storage, float32 arithmetic).
# (OC, V, width): empty parts past V with a part cut by V; a cut part only; one part for the row; no cut part.
STATS_CASES = [(40, 20, 8), (40, 37, 16), (40, 20, 64), (40, 40, 10)]
STATS_RTOL = 1e-5  # float32 sums of at most 64 float32 exps against float64


def _lm_head(seed, OC, V, width, rows=6, channels=24):
    r = rng(seed)
    inp = r.normal(size=(rows, channels)).astype(np.float16).ravel()
    weight = (r.normal(size=(OC, channels)) * 0.5).astype(np.float16).ravel()
    P = -(-OC // width)
    out, stats = np.full(rows * OC, np.nan, np.float16), np.full(rows * P * 2, np.nan, np.float32)
    cpu.matmul_forward_stats(out, stats, inp, weight, rows, channels, OC, V, width)
    plain = np.full(rows * OC, np.nan, np.float16)
    cpu.matmul_forward(plain, inp, weight, None, rows, channels, OC)
    return out, plain, stats.reshape(rows, P, 2), r.integers(0, V, rows).astype(np.int32)


@pytest.mark.parametrize("OC, V, width", STATS_CASES)
def test_matmul_forward_stats_is_matmul_forward_and_the_stats_of_its_parts(OC, V, width):
    out, plain, stats, _ = _lm_head(16, OC, V, width)
    assert out.tobytes() == plain.tobytes()  # matmul_forward with a null bias, bit for bit
    x = out.astype(np.float64).reshape(-1, OC)  # the fp16 values as stored
    want = np.empty(stats.shape)
    for n in range(x.shape[0]):
        for j in range(stats.shape[1]):
            part = x[n, j * width:min((j + 1) * width, V)]
            want[n, j] = (part.max(), np.exp(part - part.max()).sum()) if part.size else (-np.inf, 0.0)
    empty = np.arange(stats.shape[1]) * width >= V
    assert np.all(stats[:, empty, 0] == -np.inf) and np.all(stats[:, empty, 1] == 0.0)
    m_diff = float(np.abs(stats[:, ~empty, 0] - want[:, ~empty, 0]).max())
    s_diff = float((np.abs(stats[:, ~empty, 1] - want[:, ~empty, 1]) / want[:, ~empty, 1]).max())
    print(f"matmul_forward_stats OC={OC} V={V} width={width} ({int(empty.sum())} empty parts): max |m - float64| "
          f"{m_diff:.3g} (tolerance 0), max relative |s - float64| {s_diff:.3g} (tolerance {STATS_RTOL:g})")
    assert m_diff == 0.0 and s_diff <= STATS_RTOL


@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("OC, V, width", STATS_CASES)
def test_crossentropy_from_the_stats_is_crossentropy(OC, V, width, in_place):
    logits, _, stats, targets = _lm_head(17, OC, V, width)
    rows, Vp, scale = stats.shape[0], OC, np.float32(1024 / 6)
    losses, dlogits = np.full(rows, np.nan, np.float32), np.full(rows * Vp, np.nan, np.float16)
    cpu.crossentropy_forward_backward(losses, dlogits, logits, targets, rows, V, Vp, scale)
    got_losses = np.full(rows, np.nan, np.float32)
    got = logits.copy() if in_place else np.full(rows * Vp, np.nan, np.float16)
    cpu.crossentropy_forward_backward_stats(got_losses, got, got if in_place else logits, stats.ravel(), targets,
                                            rows, V, Vp, width, scale)
    loss_diff = float(np.abs(got_losses.astype(np.float64) - losses).max())
    d, want = got.astype(np.float64), dlogits.astype(np.float64)
    d_diff = float(np.abs(d - want).max())
    print(f"crossentropy_forward_backward_stats OC={OC} V={V} width={width} in place={in_place}: max |loss diff| "
          f"{loss_diff:.3g} (tolerance 1e-5 x |loss| + 1e-6), max |dlogits diff| {d_diff:.3g} "
          f"(tolerance 2^-10 x |value| + 2^-12 x max |value|)")
    assert np.all(np.abs(got_losses - losses) <= 1e-5 * np.abs(losses) + 1e-6)
    assert np.all(np.abs(d - want) <= 2.0 ** -10 * np.abs(want) + 2.0 ** -12 * np.abs(want).max())
    assert np.all(got.reshape(rows, Vp)[:, V:] == 0)
