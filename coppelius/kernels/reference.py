"""Numpy reference kernels: the definition of what every Coppelius kernel computes.

GPU kernels are checked against these functions. Each one computes in the float dtype of
its float inputs (float32 or float64; never lower), leaves its inputs untouched, returns new
arrays, and sums in a fixed order (scatter with np.add.at), so results are deterministic.
Shapes follow llm.c: B batch, T time, C channels, NH heads, hs = C // NH, N rows (B*T),
Vp padded vocabulary (only the first `vocab` columns are real tokens).

encoder      out[b,t] = wte[tokens[b,t]] + wpe[t]; backward scatters dout into wte rows
             and sums it over the batch into wpe rows [0:T].
layernorm    out = (x - mean) * rstd * w + b per row, biased variance, rstd = 1/sqrt(var+eps);
             mean and rstd are saved for the backward.
matmul       out = x @ w.T (+ b), w stored (OC, C) like llm.c.
attention    causal multi-head softmax(q k^T / sqrt(hs)) v from packed qkv (B,T,3C); only
             the log-sum-exp of each query row is saved (flash-attention style) and the
             probabilities are recomputed in the backward.
gelu         tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); the forward also
             gives the slope d gelu / dx, which the backward multiplies the gradient by.
residual     a + b.
crossentropy per-row -log softmax(logits[:, :vocab])[target]; its backward is
             (softmax - onehot) * scale, exact zeros in padding columns. The row's max and sum of
             exp may be given instead: merged from the (max, sum of exp) of parts of its columns.
argmax       first index of the row maximum among the first vocab columns (int32).
adamw        one AdamW step in the Adam paper's efficient form (bias correction folded into
             step_size, decoupled weight decay folded into decay).
all_finite   True when no array holds a nan or an inf.
"""

import numpy as np


# ---------------------------------------------------------------- encoder

def encoder_forward(tokens, wte, wpe):
    T = tokens.shape[1]
    if T > wpe.shape[0]:
        raise ValueError(f"a sequence of {T} tokens is longer than the {wpe.shape[0]}-row position table")
    return wte[tokens] + wpe[:T]


def encoder_backward(dout, tokens, vocab_padded, context):
    B, T, C = dout.shape
    dwte = np.zeros((vocab_padded, C), dtype=dout.dtype)
    np.add.at(dwte, tokens.reshape(-1), dout.reshape(B * T, C))
    dwpe = np.zeros((context, C), dtype=dout.dtype)
    dwpe[:T] = dout.sum(axis=0)
    return dwte, dwpe


# ---------------------------------------------------------------- layernorm

def layernorm_forward(x, w, b, eps=1e-5):
    mean = x.mean(axis=1)
    xc = x - mean[:, None]
    var = (xc * xc).mean(axis=1)  # biased, like llm.c
    rstd = 1.0 / np.sqrt(var + eps)
    out = xc * rstd[:, None] * w + b
    return out, mean, rstd


def layernorm_backward(dout, x, w, mean, rstd):
    norm = (x - mean[:, None]) * rstd[:, None]
    dnorm = dout * w
    dx = rstd[:, None] * (dnorm - dnorm.mean(axis=1, keepdims=True)
                          - norm * (dnorm * norm).mean(axis=1, keepdims=True))
    dw = (dout * norm).sum(axis=0)
    db = dout.sum(axis=0)
    return dx, dw, db


# ---------------------------------------------------------------- matmul

def matmul_forward(x, w, b):
    out = x @ w.T
    return out if b is None else out + b


def matmul_backward(dout, x, w, has_bias):
    dx = dout @ w
    dw = dout.T @ x
    db = dout.sum(axis=0) if has_bias else None
    return dx, dw, db


# ---------------------------------------------------------------- attention

def _split_heads(qkv, n_head):
    """(B,T,3C) -> q, k, v each (B,NH,T,hs)."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    hs = C // n_head
    parts = qkv.reshape(B, T, 3, n_head, hs).transpose(2, 0, 3, 1, 4)
    return parts[0], parts[1], parts[2]


def _merge_heads(y):
    """(B,NH,T,hs) -> (B,T,C) with heads in channel order."""
    B, NH, T, hs = y.shape
    return y.transpose(0, 2, 1, 3).reshape(B, T, NH * hs)


def _causal_probs(q, k, lse=None):
    """Masked scaled scores S and, from lse (computed here when not given), P = exp(S - lse)."""
    T, hs = q.shape[2], q.shape[3]
    scale = q.dtype.type(1.0 / np.sqrt(hs))
    causal = np.tril(np.ones((T, T), dtype=bool))
    s = np.where(causal, (q @ k.transpose(0, 1, 3, 2)) * scale, -np.inf)
    if lse is None:
        smax = s.max(axis=-1, keepdims=True)  # finite: the diagonal is never masked
        lse = (smax + np.log(np.exp(s - smax).sum(axis=-1, keepdims=True)))[..., 0]
    p = np.exp(s - lse[..., None])  # exp(-inf) = 0 in masked places
    return p, lse, scale


def attention_forward(qkv, n_head):
    q, k, v = _split_heads(qkv, n_head)
    p, lse, _ = _causal_probs(q, k)
    return _merge_heads(p @ v), lse


def attention_backward(dout, qkv, out, lse, n_head):
    q, k, v = _split_heads(qkv, n_head)
    B, T, C = dout.shape
    hs = C // n_head
    do = dout.reshape(B, T, n_head, hs).transpose(0, 2, 1, 3)
    o = out.reshape(B, T, n_head, hs).transpose(0, 2, 1, 3)
    p, _, scale = _causal_probs(q, k, lse)
    dv = p.transpose(0, 1, 3, 2) @ do
    dp = do @ v.transpose(0, 1, 3, 2)
    d = (do * o).sum(axis=-1, keepdims=True)
    ds = p * (dp - d)
    dq = (ds @ k) * scale
    dk = (ds.transpose(0, 1, 3, 2) @ q) * scale
    return np.concatenate([_merge_heads(dq), _merge_heads(dk), _merge_heads(dv)], axis=2)


# ---------------------------------------------------------------- gelu, residual

_GELU_A = 0.044715


def gelu_forward(x):
    s = x.dtype.type(np.sqrt(2.0 / np.pi))
    return 0.5 * x * (1.0 + np.tanh(s * (x + _GELU_A * x * x * x)))


def gelu_slope(x):
    """d gelu / dx at x: what the forward stores for the backward (llm.c recomputes it there from x)."""
    s = x.dtype.type(np.sqrt(2.0 / np.pi))
    th = np.tanh(s * (x + _GELU_A * x * x * x))
    sech2 = 1.0 - th * th
    return 0.5 * (1.0 + th) + 0.5 * x * sech2 * s * (1.0 + 3.0 * _GELU_A * x * x)


def gelu_backward(dout, slope):
    return dout * slope


def residual_forward(a, b):
    return a + b


# ---------------------------------------------------------------- loss, prediction

def softmax_parts(logits, vocab, width):
    """(rows, P, 2), P = ceil(columns / width): for each row and part j, the max m of the row's columns
    [j width, min((j + 1) width, vocab)) and the sum of exp(x - m) there; an empty part is (-inf, 0)."""
    rows, columns = logits.shape
    parts = np.empty((rows, -(-columns // width), 2), logits.dtype)
    for j in range(parts.shape[1]):
        x = logits[:, j * width:min((j + 1) * width, vocab)]
        if x.shape[1] == 0:
            parts[:, j] = (-np.inf, 0.0)
            continue
        parts[:, j, 0] = x.max(axis=1)
        parts[:, j, 1] = np.exp(x - parts[:, j, :1]).sum(axis=1)
    return parts


def merge_softmax_parts(parts):
    """Each row's (max, sum of exp), (m, s), from its softmax_parts merged in order j = 0, 1, ...: the larger
    max, and both sums rescaled to it; (-inf, 0) while every part so far is empty."""
    m = np.full(parts.shape[0], -np.inf, parts.dtype)
    s = np.zeros(parts.shape[0], parts.dtype)
    for j in range(parts.shape[1]):
        top = np.maximum(m, parts[:, j, 0])
        with np.errstate(invalid="ignore"):  # -inf - -inf when both are empty: s stays 0 there
            s = np.where(top == -np.inf, parts.dtype.type(0),
                         s * np.exp(m - top) + parts[:, j, 1] * np.exp(parts[:, j, 0] - top))
        m = top
    return m, s


def _softmax_real(logits, vocab, stats=None):
    """Softmax over the first vocab columns, row max subtracted; also returns z and log-sum. stats = (m, s), each
    row's max and sum of exp (merge_softmax_parts'), replaces the row's own."""
    real = logits[:, :vocab]
    top, total = (real.max(axis=1), None) if stats is None else stats
    z = real - top[:, None]
    e = np.exp(z)
    if total is None:
        total = e.sum(axis=1)
    return e / total[:, None], z, np.log(total)


def crossentropy_forward(logits, targets, vocab, stats=None):
    _, z, logsum = _softmax_real(logits, vocab, stats)
    return logsum - z[np.arange(logits.shape[0]), targets]


def crossentropy_backward(logits, targets, vocab, scale, stats=None):
    probs, _, _ = _softmax_real(logits, vocab, stats)
    onehot = np.zeros_like(probs)
    onehot[np.arange(logits.shape[0]), targets] = 1.0
    dlogits = np.zeros_like(logits)
    dlogits[:, :vocab] = (probs - onehot) * logits.dtype.type(scale)
    return dlogits


def argmax_forward(logits, vocab):
    return np.argmax(logits[:, :vocab], axis=1).astype(np.int32)


# ---------------------------------------------------------------- optimizer, checks

def adamw(param, m, v, grad, step_size, eps, beta1, beta2, decay):
    f = param.dtype.type
    step_size, eps, beta1, beta2, decay = (f(s) for s in (step_size, eps, beta1, beta2, decay))
    one = f(1.0)
    g = grad.astype(param.dtype)
    m_new = beta1 * m.astype(param.dtype) + (one - beta1) * g
    v_new = beta2 * v.astype(param.dtype) + (one - beta2) * g * g
    param_new = param - decay * param - step_size * m_new / (np.sqrt(v_new) + eps)
    return param_new, m_new, v_new


def all_finite(*arrays):
    return all(bool(np.isfinite(a).all()) for a in arrays)
