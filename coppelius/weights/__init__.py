"""Weights in and out: `coppelius import`, `coppelius export` and the configuration's `init_from`.

Three formats hold a GPT-2's weights: llm.c's checkpoint (weights/llmc.py), Hugging Face's
model.safetensors (weights/huggingface.py) and Coppelius's own checkpoint (formats/checkpoint.py).
A file is known by its first bytes; its name's suffix only chooses which reader explains a refusal.
Import takes the parameters alone, checks every shape against the configuration's model, and writes
a Coppelius checkpoint at step 0, cursor 0, AdamW moments zero: a run that starts as init's does,
from other weights (fine-tuning). Export writes a checkpoint's parameters (not its moments) back.
"""
from pathlib import Path

import numpy as np

from ..config import check_outside
from ..errors import CoppeliusError
from ..formats import checkpoint
from ..initialize import write_starting_checkpoint
from ..model import DIMENSIONS, MODELS_DIR, Model, preset
from . import huggingface, llmc

# export format -> what it writes
EXPORTS = {"llmc": "llm.c checkpoint, version 3 (fp32)", "llmc-bf16": "llm.c checkpoint, version 5 (bf16)",
           "safetensors": "Hugging Face GPT-2 model.safetensors (fp32)"}
SUFFIXES = {".bin": "llmc", ".safetensors": "safetensors", ".ckpt": "coppelius"}
WHAT = "give an llm.c GPT-2 checkpoint (.bin), a Hugging Face GPT-2 model.safetensors or a Coppelius checkpoint"


def describe(model: Model) -> str:
    return (f"vocab {model.vocab}, context {model.context}, width {model.width}, {model.layers} layers, "
            f"{model.heads} heads")


def kind(path: str | Path) -> str:
    """'llmc', 'safetensors' or 'coppelius', from the file's first bytes (or, for a refusal's sake, its suffix)."""
    try:
        with open(path, "rb") as f:
            head = f.read(9)
    except OSError as e:
        raise CoppeliusError(f"{path}: cannot read the weights ({e.strerror}); {WHAT}")
    if head[:8] == checkpoint.MAGIC:
        return "coppelius"
    if len(head) >= 4 and int.from_bytes(head[:4], "little") == llmc.MAGIC:
        return "llmc"
    if huggingface.is_safetensors(head):
        return "safetensors"
    if Path(path).suffix in SUFFIXES:  # its reader says what is wrong (a wrong magic, a truncated file)
        return SUFFIXES[Path(path).suffix]
    raise CoppeliusError(f"{path}: starts with {head[:8]!r}, which is none of the weight formats; {WHAT}")


def _check_dimensions(path, found: dict[str, tuple[str, int]], model: Model) -> None:
    """`found`: dimension -> (where the file says it, value). Refuse the first that differs from `model`'s,
    naming the preset of the file's model when there is one."""
    for key in DIMENSIONS:
        if key in found and found[key][1] != getattr(model, key):
            where, value = found[key]
            dims = {k: v for k, (_, v) in found.items()}
            presets = [p.stem for p in sorted(MODELS_DIR.glob("*.yaml"))
                       if all(preset(p.stem)[k] == v for k, v in dims.items())]
            todo = f"set model={presets[0]}" if presets else f"set {key}={value} and the other dimensions to the file's"
            raise CoppeliusError(f"{path}: {where} is {value} but the config's model has {key} {getattr(model, key)}; "
                                 f"{todo} (config key 'model', or {', '.join(DIMENSIONS)})")


def _checkpoint_model(path, header: dict) -> Model:
    try:
        return Model(**{k: int(header["model"][k]) for k in DIMENSIONS})
    except (KeyError, TypeError, ValueError):
        raise CoppeliusError(f"{path}: the header's model is unreadable; {checkpoint.CORRUPT}")


def check(path: str | Path, model: Model) -> str:
    """Everything about a weights file that its header tells, against `model`; returns its kind."""
    form = kind(path)
    if form == "llmc":
        _, fields = llmc.read_header(path)
        _check_dimensions(path, {llmc.DIMENSION_OF[k]: (f"header field {k}", v) for k, v in fields.items()
                                 if k in llmc.DIMENSION_OF}, model)
    elif form == "safetensors":
        _check_dimensions(path, huggingface.dimensions(path), model)
        huggingface.check(path, model, describe(model))
    else:
        found = _checkpoint_model(path, checkpoint.read_header(path))
        _check_dimensions(path, {k: (f"the header's model.{k}", getattr(found, k)) for k in DIMENSIONS}, model)
    return form


def parameters(path: str | Path, model: Model) -> np.ndarray:
    """Every parameter of `model` as one f32 vector in llm.c's order, read from a checked weights file, each
    value finite (a NaN or infinity would make every step's gradients non-finite: skipped, never trained)."""
    form = check(path, model)
    if form == "llmc":
        params = llmc.read(path)[2]
    elif form == "safetensors":
        params = huggingface.read(path, model, describe(model))
    else:
        params = checkpoint.read(path)[1]["params"]
    bad = np.flatnonzero(~np.isfinite(params))
    if bad.size:
        start = 0
        for name, shape, _ in model.tensors():
            size = int(np.prod(shape))
            if bad[0] < start + size:
                at = ", ".join(str(int(i)) for i in np.unravel_index(bad[0] - start, shape))  # layer first
                raise CoppeliusError(f"{path}: parameter {name}[{at}] is {params[bad[0]]} ({bad.size} values are not "
                                     f"finite); give weights whose every value is finite")
            start += size
    return params


def import_weights(source: str | Path, out: str | Path, model: Model, learner) -> None:
    write_starting_checkpoint(out, model, learner, parameters(source, model))


def check_init_from(config, outputs: str | Path) -> None:
    """The configuration's init_from, refused before any job runs if it cannot start this model. A file under
    `outputs` (the workflow's results) is refused too: the run it starts may replace it (final.ckpt would
    make the workflow a cycle)."""
    if config.init_from is None:
        return
    if not Path(config.init_from).is_file():
        raise CoppeliusError(f"config: key 'init_from' is {config.init_from!r}, which is not a file; {WHAT}")
    check_outside("init_from", config.init_from, outputs)
    check(config.init_from, config.model)


def export_format(out: str | Path, given: str | None) -> str:
    if given is not None:
        return given
    form = SUFFIXES.get(Path(out).suffix)
    if form not in EXPORTS:
        raise CoppeliusError(f"{out}: --out ends in {Path(out).suffix or 'no suffix'!r}; name it .bin or .safetensors, "
                             f"or give --format ({', '.join(EXPORTS)})")
    return form


def export(source: str | Path, out: str | Path, form: str | None = None) -> str:
    """Write a Coppelius checkpoint's parameters as `form` (EXPORTS; by default from out's suffix)."""
    form = export_format(out, form)
    header, parts = checkpoint.read(source)
    model = _checkpoint_model(source, header)
    if form == "safetensors":
        huggingface.write(out, model, parts["params"])
    else:
        llmc.write(out, model, parts["params"], version=5 if form == "llmc-bf16" else 3)
    return form
