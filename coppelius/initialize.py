"""Stage 2, init: model + seed -> the initial checkpoint (step 0, cursor 0, zero moments).

GPT-2's initialisation as nanoGPT and llm.c do it: weights normal(0, 0.02), the two residual
projections scaled by 1/sqrt(2 * layers), biases zero, LayerNorm gains one; the padded
vocabulary rows of wte stay zero. Draws come from numpy's PCG64 seeded with `seed`, tensor by
tensor in llm.c's order, so the same seed gives the same bytes everywhere.
"""
import numpy as np

from . import canonical
from .formats import checkpoint

RESIDUAL_PROJECTIONS = ("attprojw", "fcprojw")


def initial_parameters(model, seed: int) -> np.ndarray:
    rng = np.random.Generator(np.random.PCG64(seed))
    parts = []
    for name, shape, _ in model.tensors():
        if name in ("ln1w", "ln2w", "lnfw"):
            tensor = np.ones(shape, np.float32)
        elif name.endswith("b") and name != "wte":
            tensor = np.zeros(shape, np.float32)
        else:
            std = 0.02 / np.sqrt(2 * model.layers) if name in RESIDUAL_PROJECTIONS else 0.02
            tensor = (rng.standard_normal(shape) * std).astype(np.float32)
            if name == "wte":
                tensor[model.vocab:] = 0
        parts.append(tensor.ravel())
    return np.concatenate(parts)


def write_initial_checkpoint(path: str, model, learner, seed: int) -> None:
    write_starting_checkpoint(path, model, learner, initial_parameters(model, seed))


def write_starting_checkpoint(path: str, model, learner, params: np.ndarray) -> None:
    """Where a run starts: `params` (f32, llm.c's order) at step 0, cursor 0, AdamW moments zero.
    init's seeded weights, or weights imported from another tool (coppelius.weights)."""
    params = np.asarray(params, dtype="<f4")
    zeros = np.zeros_like(params)
    payload = params.tobytes() + zeros.tobytes() + zeros.tobytes()
    learner_dict = canonical.json.loads(canonical.encode(learner.as_dict()))
    checkpoint.write(path, checkpoint.header_for(model.as_dict(), learner_dict, 0, 0), payload)
