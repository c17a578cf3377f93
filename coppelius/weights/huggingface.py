"""Hugging Face's GPT-2 weights: model.safetensors as transformers' GPT2Model / GPT2LMHeadModel save them.

The file is read and written by the `safetensors` package (an 8-byte header length, a JSON header of
names, dtypes, shapes and offsets, then the raw data). Its names, one tensor per layer:

    wte.weight (V, C)   wpe.weight (maxT, C)   ln_f.weight (C)   ln_f.bias (C)
    h.{i}.ln_1.weight, h.{i}.ln_1.bias, h.{i}.ln_2.weight, h.{i}.ln_2.bias          (C)
    h.{i}.attn.c_attn.weight (C, 3C)   h.{i}.attn.c_attn.bias (3C)
    h.{i}.attn.c_proj.weight (C, C)    h.{i}.attn.c_proj.bias (C)
    h.{i}.mlp.c_fc.weight (C, 4C)      h.{i}.mlp.c_fc.bias (4C)
    h.{i}.mlp.c_proj.weight (4C, C)    h.{i}.mlp.c_proj.bias (C)

GPT-2's projections are Conv1D modules, whose weight is stored (in, out): the transpose of llm.c's and
Coppelius's (out, in). wte holds the V real rows only: Coppelius's padded rows (to a multiple of 128)
are zero on the way in and dropped on the way out. GPT2LMHeadModel saves every name under
`transformer.` and may add lm_head.weight, which GPT-2 ties to wte (the reader accepts it only equal
to wte); some transformers versions also save the attention's causal mask (h.{i}.attn.bias,
h.{i}.attn.masked_bias), a buffer, not a parameter: ignored. The writer writes the names without a
prefix, f32, with the metadata {"format": "pt"} that transformers looks for, as the published
model.safetensors does.
"""
from pathlib import Path

import numpy as np
import safetensors.numpy
from safetensors import SafetensorError, safe_open

from ..errors import CoppeliusError
from ..model import Model
from ..formats.publish import publish_bytes

GLOBAL = {"wte": "wte.weight", "wpe": "wpe.weight", "lnfw": "ln_f.weight", "lnfb": "ln_f.bias"}
# Coppelius's stacked tensor -> (the name of one layer's slice after "h.{i}.", stored as a Conv1D weight)
LAYER = {
    "ln1w": ("ln_1.weight", False), "ln1b": ("ln_1.bias", False),
    "qkvw": ("attn.c_attn.weight", True), "qkvb": ("attn.c_attn.bias", False),
    "attprojw": ("attn.c_proj.weight", True), "attprojb": ("attn.c_proj.bias", False),
    "ln2w": ("ln_2.weight", False), "ln2b": ("ln_2.bias", False),
    "fcw": ("mlp.c_fc.weight", True), "fcb": ("mlp.c_fc.bias", False),
    "fcprojw": ("mlp.c_proj.weight", True), "fcprojb": ("mlp.c_proj.bias", False),
}
PREFIX = "transformer."
TIED = "lm_head.weight"
BUFFERS = ("attn.bias", "attn.masked_bias")
DTYPES = {"F32": np.float32, "F16": np.float16}
METADATA = {"format": "pt"}


def is_safetensors(head: bytes) -> bool:
    """A file's first 9 bytes: a u64 header length (the package caps it at 100 MB: text never reads so small),
    then the JSON header's opening brace."""
    return len(head) >= 9 and int.from_bytes(head[:8], "little") < 1 << 32 and head[8:9] == b"{"


def expected_shapes(model: Model) -> dict[str, tuple[int, ...]]:
    """Every Hugging Face name of `model` with the shape it is stored in, in Coppelius's tensor order."""
    shapes = {}
    for name, shape, _ in model.tensors():
        if name in GLOBAL:
            shapes[GLOBAL[name]] = (model.vocab, model.width) if name == "wte" else shape
            continue
        suffix, conv1d = LAYER[name]
        for i in range(model.layers):
            shapes[f"h.{i}.{suffix}"] = shape[1:][::-1] if conv1d else shape[1:]
    return shapes


def _is_buffer(name: str) -> bool:
    return name.startswith("h.") and name.split(".", 2)[-1] in BUFFERS


def _file_names(path, keys) -> dict[str, str]:
    """Hugging Face name (without the `transformer.` prefix) -> the key stored in the file."""
    names = {}
    for key in keys:
        name = key.removeprefix(PREFIX)
        if name in names:
            raise CoppeliusError(f"{path}: tensor {name!r} is stored twice (with and without {PREFIX!r}); "
                                 f"give a file that holds each weight once")
        names[name] = key
    return names


def _open(path):
    try:
        return safe_open(str(path), framework="numpy")
    except (SafetensorError, OSError) as e:
        reason = getattr(e, "strerror", None) or str(e).splitlines()[0]
        raise CoppeliusError(f"{path}: not a readable safetensors file ({reason}); the file is truncated or is not "
                             f"a model.safetensors: give the whole file")


def _checked(path, handle, model: Model, describe: str) -> dict[str, str]:
    """Check every name, dtype and shape of an open file against `model`; return name -> stored key."""
    names = _file_names(path, handle.keys())
    shapes = expected_shapes(model)
    missing = [n for n in shapes if n not in names]
    if missing:
        layers = sum(1 for n in names if n.endswith(".ln_1.weight"))
        raise CoppeliusError(f"{path}: holds no tensor {missing[0]!r} ({layers} layers found), which the config's "
                             f"model ({describe}) needs; give a GPT-2 model.safetensors of that model, or set the "
                             f"config's model to the file's")
    unknown = [n for n in names if n not in shapes and n != TIED and not _is_buffer(n)]
    if unknown:
        raise CoppeliusError(f"{path}: tensor {unknown[0]!r} is no part of a GPT-2 of the config's model "
                             f"({describe}); give a GPT-2 model.safetensors of that model")
    for name in [*shapes, *([TIED] if TIED in names else [])]:
        view = handle.get_slice(names[name])
        dtype, found = view.get_dtype(), tuple(view.get_shape())
        if dtype not in DTYPES:
            raise CoppeliusError(f"{path}: tensor {name!r} is {dtype}; give F32 or F16 weights (save the model "
                                 f"with torch_dtype=torch.float32)")
        wanted = shapes["wte.weight" if name == TIED else name]
        if found != wanted:
            raise CoppeliusError(f"{path}: tensor {name!r} has shape {list(found)} but the config's model "
                                 f"({describe}) needs {list(wanted)}; set the config's model to the file's")
    return names


def dimensions(path: str | Path) -> dict[str, tuple[str, int]]:
    """The model dimensions the file's shapes tell (no heads): dimension -> (where the file says it, value)."""
    with _open(path) as handle:
        names = _file_names(path, handle.keys())
        found = {}
        for tensor, letters, keys in (("wte.weight", ("V", "C"), ("vocab", "width")),
                                      ("wpe.weight", ("maxT", "C"), ("context",))):
            if tensor in names:
                shape = handle.get_slice(names[tensor]).get_shape()
                found |= {key: (f"{letters[axis]} of tensor {tensor!r} ({', '.join(letters)})", shape[axis])
                          for axis, key in enumerate(keys) if axis < len(shape)}
        layers = {n.split(".")[1] for n in names if n.startswith("h.") and n.endswith(".ln_1.weight")}
        return found | {"layers": ("the count of layers h.{i}", len(layers))}


def check(path: str | Path, model: Model, describe: str) -> None:
    """Names, dtypes and shapes against `model`, from the file's header alone."""
    with _open(path) as handle:
        _checked(path, handle, model, describe)


def read(path: str | Path, model: Model, describe: str) -> np.ndarray:
    """Every parameter of `model` as one f32 vector in llm.c's order (Conv1D weights transposed, wte padded)."""
    with _open(path) as handle:
        names = _checked(path, handle, model, describe)

        def tensor(name):
            return np.asarray(handle.get_tensor(names[name]), dtype=np.float32)
        parts = []
        for name, shape, _ in model.tensors():
            if name == "wte":
                wte = np.zeros(shape, np.float32)
                wte[:model.vocab] = tensor(GLOBAL[name])
                if TIED in names and not np.array_equal(tensor(TIED), wte[:model.vocab]):
                    raise CoppeliusError(f"{path}: {TIED!r} differs from 'wte.weight'; GPT-2 ties the two and so "
                                         f"does Coppelius: give a GPT-2 whose lm_head is its token embedding")
                parts.append(wte)
            elif name in GLOBAL:
                parts.append(tensor(GLOBAL[name]))
            else:
                suffix, conv1d = LAYER[name]
                layers = [tensor(f"h.{i}.{suffix}") for i in range(model.layers)]
                parts.append(np.stack([t.T if conv1d else t for t in layers]))
    return np.concatenate([p.ravel() for p in parts])


def write(path: str | Path, model: Model, params: np.ndarray) -> None:
    """Publish `params` (f32, llm.c's order) as a GPT-2 model.safetensors."""
    tensors, at = {}, 0
    for name, shape, _ in model.tensors():
        count = int(np.prod(shape))
        tensor = np.asarray(params[at:at + count], dtype="<f4").reshape(shape)
        at += count
        if name in GLOBAL:
            tensors[GLOBAL[name]] = tensor[:model.vocab] if name == "wte" else tensor
            continue
        suffix, conv1d = LAYER[name]
        for i in range(model.layers):
            tensors[f"h.{i}.{suffix}"] = np.ascontiguousarray(tensor[i].T if conv1d else tensor[i])
    publish_bytes(path, safetensors.numpy.save(tensors, metadata=METADATA))
