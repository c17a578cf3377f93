"""The whole GPT-2 model (llm.c train_gpt2 semantics) composed only of the reference kernels.

Learned position embeddings, pre-LayerNorm blocks (causal self-attention, then a tanh-GELU
MLP, each added to the residual stream), a final LayerNorm and a head tied to the token
embedding. Parameters are a dict name -> array in llm.c's order and shapes, the L layers
stacked on axis 0 (see PARAMETER_ORDER). Everything is computed in the dtype of the
parameters (float64 or float32). The loss is the mean cross-entropy over all B*T positions,
over the first `vocab` logits (columns vocab..Vp-1 are padding and never predicted).
"""

import numpy as np

from coppelius.kernels import reference as k

PARAMETER_ORDER = (
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb",
)

_LAYER_NAMES = PARAMETER_ORDER[2:14]


def forward(params, tokens, targets, vocab, n_head):
    """Mean loss (Python float) and the cache of activations the backward needs."""
    p = params
    B, T = tokens.shape
    C = p["wte"].shape[1]
    N = B * T
    residual = k.encoder_forward(tokens, p["wte"], p["wpe"]).reshape(N, C)
    layers = []
    for l in range(p["qkvw"].shape[0]):
        a = {"residual": residual}
        a["ln1"], a["ln1_mean"], a["ln1_rstd"] = k.layernorm_forward(residual, p["ln1w"][l], p["ln1b"][l])
        a["qkv"] = k.matmul_forward(a["ln1"], p["qkvw"][l], p["qkvb"][l]).reshape(B, T, 3 * C)
        a["atty"], a["lse"] = k.attention_forward(a["qkv"], n_head)
        attproj = k.matmul_forward(a["atty"].reshape(N, C), p["attprojw"][l], p["attprojb"][l])
        a["residual2"] = k.residual_forward(residual, attproj)
        a["ln2"], a["ln2_mean"], a["ln2_rstd"] = k.layernorm_forward(a["residual2"], p["ln2w"][l], p["ln2b"][l])
        a["fch"] = k.matmul_forward(a["ln2"], p["fcw"][l], p["fcb"][l])
        a["fch_gelu"] = k.gelu_forward(a["fch"])
        fcproj = k.matmul_forward(a["fch_gelu"], p["fcprojw"][l], p["fcprojb"][l])
        residual = k.residual_forward(a["residual2"], fcproj)
        layers.append(a)
    lnf, lnf_mean, lnf_rstd = k.layernorm_forward(residual, p["lnfw"], p["lnfb"])
    logits = k.matmul_forward(lnf, p["wte"], None)
    losses = k.crossentropy_forward(logits, targets.reshape(N), vocab)
    cache = {
        "tokens": tokens, "targets": targets, "vocab": vocab, "n_head": n_head,
        "layers": layers, "residual": residual, "lnf": lnf, "lnf_mean": lnf_mean,
        "lnf_rstd": lnf_rstd, "logits": logits,
    }
    return float(losses.mean()), cache


def backward(params, cache):
    """Gradients of the mean loss, a dict with the same names and shapes as params."""
    p = params
    tokens, n_head = cache["tokens"], cache["n_head"]
    B, T = tokens.shape
    N = B * T
    Vp, C = p["wte"].shape
    dlogits = k.crossentropy_backward(cache["logits"], cache["targets"].reshape(N),
                                      cache["vocab"], 1.0 / N)
    dlnf, dwte_head, _ = k.matmul_backward(dlogits, cache["lnf"], p["wte"], False)
    dresidual, dlnfw, dlnfb = k.layernorm_backward(dlnf, cache["residual"], p["lnfw"],
                                                   cache["lnf_mean"], cache["lnf_rstd"])
    layer_grads = []
    for l in reversed(range(len(cache["layers"]))):
        a, g = cache["layers"][l], {}
        # MLP branch: residual3 = residual2 + fcproj
        dfch_gelu, g["fcprojw"], g["fcprojb"] = k.matmul_backward(dresidual, a["fch_gelu"], p["fcprojw"][l], True)
        dfch = k.gelu_backward(dfch_gelu, k.gelu_slope(a["fch"]))
        dln2, g["fcw"], g["fcb"] = k.matmul_backward(dfch, a["ln2"], p["fcw"][l], True)
        dx, g["ln2w"], g["ln2b"] = k.layernorm_backward(dln2, a["residual2"], p["ln2w"][l],
                                                        a["ln2_mean"], a["ln2_rstd"])
        dresidual = k.residual_forward(dresidual, dx)
        # attention branch: residual2 = residual + attproj
        datty, g["attprojw"], g["attprojb"] = k.matmul_backward(dresidual, a["atty"].reshape(N, C),
                                                                p["attprojw"][l], True)
        dqkv = k.attention_backward(datty.reshape(B, T, C), a["qkv"], a["atty"], a["lse"], n_head)
        dln1, g["qkvw"], g["qkvb"] = k.matmul_backward(dqkv.reshape(N, 3 * C), a["ln1"], p["qkvw"][l], True)
        dx, g["ln1w"], g["ln1b"] = k.layernorm_backward(dln1, a["residual"], p["ln1w"][l],
                                                        a["ln1_mean"], a["ln1_rstd"])
        dresidual = k.residual_forward(dresidual, dx)
        layer_grads.append(g)
    layer_grads.reverse()
    dwte_enc, dwpe = k.encoder_backward(dresidual.reshape(B, T, C), tokens, Vp, p["wpe"].shape[0])
    grads = {"wte": k.residual_forward(dwte_head, dwte_enc), "wpe": dwpe,
             "lnfw": dlnfw, "lnfb": dlnfb}
    for name in _LAYER_NAMES:
        grads[name] = np.stack([g[name] for g in layer_grads])
    return {name: grads[name] for name in PARAMETER_ORDER}


def forward_backward(params, tokens, targets, vocab, n_head):
    """Mean loss and the gradients of the mean loss for every parameter tensor."""
    loss, cache = forward(params, tokens, targets, vocab, n_head)
    return loss, backward(params, cache)
