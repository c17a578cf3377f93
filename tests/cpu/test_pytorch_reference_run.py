"""A native cpu run of the host ELF against PyTorch: twelve steps of a small model from the same weights on the same
token stream, the loss of each step compared with PyTorch's in float32 (tests/fixtures/make_pytorch_reference.py,
committed output; no torch needed here). Coppelius keeps fp16 activations and gradients with a static loss scale,
so the losses agree to fp16's precision, not to the bit: each step's difference is printed, and each must be within
5e-4 of PyTorch's loss, relative (measured 2026-12-05: at most 5.2e-5; the first step 1.5e-7). The whole training
program is held: the token cursor's batches, the forward, the backward, the unscaling, AdamW's step size and decay
at each step. The run's initial and final loss, its last validation point and a predict run's mean loss are held
against the float32 reference forward (coppelius/kernels/gpt2.py) on the contexts each is defined to score, and the
first forward's predictions against its argmax."""
import subprocess
from pathlib import Path

import numpy as np
import pytest

from coppelius.formats import checkpoint, result, tokens
from coppelius.initialize import write_starting_checkpoint
from coppelius.kernels.gpt2 import PARAMETER_ORDER, forward
from coppelius.stages import build_chain
from test_train_cpu import config

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "pytorch_reference.npz"
RUN = {"vocab": 256, "context": 16, "width": 32, "layers": 2, "heads": 4, "batch": 4, "steps": 12, "interval": 12,
       "lr": "1e-2", "beta1": "9/10", "beta2": "95/100", "eps": "1e-8", "weight_decay": "1/10"}
RELATIVE = 5e-4


def torch_run() -> dict:
    with np.load(FIXTURE) as data:
        return {k: data[k] for k in data.files}


def follow_pytorch(tmp_path: Path, target: str) -> None:
    """Build the fixture's model for `target`, run its host ELF from the fixture's weights on its stream, and hold
    each step's loss against PyTorch's."""
    run = torch_run()
    cfg = config(tmp_path, target=target, **RUN)
    paths = build_chain(cfg, tmp_path / "results" / target)
    shapes = {name: shape for name, shape, _ in cfg.model.tensors()}
    params = []
    for name in PARAMETER_ORDER:
        tensor = run[f"run_param_{name}"]
        assert tensor.shape == shapes[name], name
        params.append(tensor.astype(np.float32).ravel())
    start, stream = tmp_path / "start.ckpt", tmp_path / "stream.bin"
    write_starting_checkpoint(str(start), cfg.model, cfg.learner, np.concatenate(params))
    tokens.write(stream, run["run_stream"])
    proc = subprocess.run([paths["elf"], "--checkpoint", str(start), "--tokens", str(stream), "--validation",
                           str(stream), "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    record = result.read(tmp_path / "out" / "result.json")
    losses = [s["loss"] for s in record["steps"]]
    want = run["run_losses"]
    assert len(losses) == len(want) == RUN["steps"]
    for step, (got, expected) in enumerate(zip(losses, want), start=1):
        print(f"{target} step {step:2d}: loss {got:.6f}, PyTorch's {expected:.6f}, relative difference "
              f"{abs(got - expected) / expected:.2e}")
    assert want[-1] < 0.6 * want[0]  # the run learns, so a wrong update would show
    for got, expected in zip(losses, want):
        assert abs(got - expected) <= RELATIVE * expected
    # the scored losses against the float32 reference forward: initial_loss (the starting weights on the first
    # context), final_loss (the final weights on the last step's context), the validation point at the end (the
    # final weights on eval_contexts contexts from the validation stream's start, here the same stream) and a
    # predict run's mean_loss from final.ckpt (the same contexts)
    proc = subprocess.run([paths["elf"], "--operation", "predict", "--checkpoint", str(tmp_path / "out" / "final.ckpt"),
                           "--tokens", str(stream), "--out", str(tmp_path / "predict")], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    predicted = result.read(tmp_path / "predict" / "result.json")
    _, parts = checkpoint.read(tmp_path / "out" / "final.ckpt")
    stream, n = run["run_stream"].astype(np.int64), RUN["batch"] * RUN["context"]

    def reference(flat: np.ndarray, step: int, cache: bool = False):
        sizes = [int(np.prod(shape)) for shape in shapes.values()]
        parts_of = np.split(flat, np.cumsum(sizes)[:-1])
        weights = {name: part.reshape(shapes[name]) for name, part in zip(shapes, parts_of)}
        ids, context = stream[step * n:step * n + n + 1], (RUN["batch"], RUN["context"])
        scored = forward(weights, ids[:-1].reshape(context), ids[1:].reshape(context), RUN["vocab"], RUN["heads"])
        return scored if cache else scored[0]

    validation = np.mean([reference(parts["params"], k) for k in range(cfg.run.eval_contexts)])
    # predictions.bin: the first forward's argmax (fp16 logits against float32 ones: a near tie may go either way)
    _, cache = reference(np.concatenate(params), 0, cache=True)
    want = np.argmax(cache["logits"][:, :RUN["vocab"]], axis=1)
    got = np.fromfile(tmp_path / "out" / "predictions.bin", "<i4")
    print(f"{target} predictions: {np.mean(got == want):.4f} of {len(want)} agree with the reference's argmax")
    assert len(got) == len(want) and np.mean(got == want) >= 0.98
    for name, got, expected in (("initial", record["initial_loss"], reference(np.concatenate(params), 0)),
                                ("final", record["final_loss"], reference(parts["params"], RUN["steps"] - 1)),
                                ("validation", record["validation"]["points"][-1]["loss"], validation),
                                ("predict", predicted["mean_loss"], validation)):
        print(f"{target} {name} loss {got:.6f}, the reference's {expected:.6f}")
        assert abs(got - expected) <= RELATIVE * expected, name


def test_a_native_cpu_run_follows_pytorchs_losses_step_by_step(tmp_path):
    follow_pytorch(tmp_path, "cpu")
