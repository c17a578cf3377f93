"""The numpy reference model and its AdamW against PyTorch, in float64: the definition of what every kernel computes
held against an implementation that shares none of its code (tests/fixtures/make_pytorch_reference.py, PyTorch's
own operations; its output is committed, so these tests need no torch). Each tensor's largest difference is printed,
as llm.c's test_gpt2 prints its own.

Tolerances: float64 arithmetic in another order differs in the last bits only: the loss to 1e-12 of itself, each
gradient to 1e-10 of the tensor's largest entry, each parameter after three AdamW steps to 1e-9 (the updates are
of size lr = 1e-2; decay on the wrong tensors, eps scaled by the bias correction as torch.optim.AdamW does, or a
bias correction left out moves them by 1e-5 and more)."""
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from coppelius.kernels import gpt2, reference

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "pytorch_reference.npz"
DECAYED = ("wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw")
VOCAB, HEADS = 13, 2
LR, BETA1, BETA2, EPS, WEIGHT_DECAY = 1e-2, 0.9, 0.95, 1e-3, 0.1  # the fixture's exact case


@pytest.fixture(scope="module")
def torch_run() -> dict:
    with np.load(FIXTURE) as data:
        return {k: data[k] for k in data.files}


def tensors(run: dict, kind: str) -> dict:
    return {name: run[f"exact_{kind}_{name}"] for name in gpt2.PARAMETER_ORDER}


def inputs(batch: np.ndarray, B: int) -> tuple[np.ndarray, np.ndarray]:
    return batch[:-1].reshape(B, -1), batch[1:].reshape(B, -1)


def test_the_reference_models_loss_and_gradients_are_pytorchs(torch_run):
    params = tensors(torch_run, "param")
    tokens, targets = inputs(torch_run["exact_batches"][0], 2)
    loss, grads = gpt2.forward_backward(params, tokens, targets, VOCAB, HEADS)
    want = float(torch_run["exact_losses"][0])
    print(f"loss {loss:.15f} against PyTorch's {want:.15f}")
    assert abs(loss - want) <= 1e-12 * abs(want)
    for name, expected in tensors(torch_run, "grad").items():
        diff = np.abs(grads[name] - expected).max()
        print(f"{name:9s} largest gradient difference {diff:.3e} of {np.abs(expected).max():.3e}")
        assert grads[name].shape == expected.shape
        assert diff <= 1e-10 * np.abs(expected).max(), name


def test_three_adamw_steps_of_the_reference_are_pytorchs(torch_run):
    """The reference kernel's AdamW with the plan's per-step numbers (decay lr * weight_decay on the decayed
    tensors, step size lr * sqrt(1 - beta2^t) / (1 - beta1^t)), in float64, after three batches."""
    params = tensors(torch_run, "param")
    m = {k: np.zeros_like(a) for k, a in params.items()}
    v = {k: np.zeros_like(a) for k, a in params.items()}
    for t, batch in enumerate(torch_run["exact_batches"], start=1):
        loss, grads = gpt2.forward_backward(params, *inputs(batch, 2), VOCAB, HEADS)
        assert abs(loss - torch_run["exact_losses"][t - 1]) <= 1e-12 * loss
        step_size = LR * np.sqrt(1 - BETA2 ** t) / (1 - BETA1 ** t)
        for name in gpt2.PARAMETER_ORDER:
            decay = LR * WEIGHT_DECAY if name in DECAYED else 0.0
            params[name], m[name], v[name] = reference.adamw(params[name], m[name], v[name], grads[name], step_size,
                                                             EPS, BETA1, BETA2, decay)
    for name, expected in tensors(torch_run, "final").items():
        diff = np.abs(params[name] - expected).max()
        print(f"{name:9s} largest parameter difference after 3 steps {diff:.3e}")
        assert diff <= 1e-9, name


def test_the_decayed_tensors_are_the_models_matrices():
    """The fixture decays what the plan decays (model.tensors' flag), so the comparison above is of the plan's rule."""
    from coppelius.model import Model
    model = Model(vocab=VOCAB, context=6, width=8, layers=2, heads=HEADS)
    assert tuple(name for name, _, decayed in model.tensors() if decayed) == DECAYED
    assert Fraction(1, 10) == Fraction(str(WEIGHT_DECAY))
