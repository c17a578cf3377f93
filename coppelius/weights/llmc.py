"""llm.c's GPT-2 checkpoint (gpt2_124M.bin): what train_gpt2.c reads and train_gpt2.py writes.

    int32[256] header: [0] magic 20240326, [1] version (3: fp32 parameters, 5: bf16 parameters),
                       [2] maxT, [3] V, [4] L, [5] NH, [6] C, [7] Vp (V padded to a multiple of 128); the rest zero
    then every parameter tensor in llm.c's order (coppelius.model.Model.tensors: wte (Vp, C), wpe (maxT, C),
    ln1w (L, C), ln1b, qkvw (L, 3C, C), qkvb, attprojw (L, C, C), attprojb, ln2w, ln2b, fcw (L, 4C, C), fcb,
    fcprojw (L, C, 4C), fcprojb, lnfw (C), lnfb), row-major, back to back, as f32 or bf16.

That order and those shapes are Coppelius's own parameter layout, so the parameters move as one block.
bf16 is the top half of an f32: read exactly by shifting; written rounded to nearest, ties to even, as
PyTorch's conversion does.
"""
from pathlib import Path

import numpy as np

from ..errors import CoppeliusError
from ..model import Model
from ..formats.head import read_head
from ..formats.publish import Publication

MAGIC = 20240326
VERSIONS = {3: "<f4", 5: "<u2"}  # version -> how a parameter is stored (bf16 as its 16 bits)
HEADER_WORDS = 256
HEADER_BYTES = 4 * HEADER_WORDS
FIELDS = ("maxT", "V", "L", "NH", "C", "Vp")  # header[2:8]
DIMENSION_OF = {"maxT": "context", "V": "vocab", "L": "layers", "NH": "heads", "C": "width"}


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype("<u4") << 16).view("<f4")


def f32_to_bf16(values: np.ndarray) -> np.ndarray:
    """Round to nearest, ties to even; a NaN stays a (quiet) NaN."""
    bits = np.ascontiguousarray(values, dtype="<f4").view("<u4")
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")
    return np.where(np.isnan(values), (bits >> 16).astype("<u2") | 0x40, rounded)


def header_model(fields: dict) -> Model:
    return Model(**{DIMENSION_OF[k]: fields[k] for k in DIMENSION_OF})


def read_header(path: str | Path) -> tuple[int, dict]:
    """(version, header fields) of an llm.c GPT-2 checkpoint whose size adds up; a one-line refusal otherwise."""
    size, head = read_head(path, HEADER_BYTES, "the llm.c checkpoint", "an existing file")
    if len(head) < HEADER_BYTES:
        raise CoppeliusError(f"{path}: the header is {len(head)} bytes, not {HEADER_BYTES}; the file is truncated "
                             f"or not an llm.c checkpoint: give gpt2_124M.bin as train_gpt2.py wrote it")
    words = np.frombuffer(head, dtype="<i4")
    if words[0] != MAGIC:
        raise CoppeliusError(f"{path}: header magic is {int(words[0])}, not {MAGIC}; give an llm.c GPT-2 checkpoint "
                             f"(gpt2_124M.bin as train_gpt2.py writes it)")
    version = int(words[1])
    if version not in VERSIONS:
        raise CoppeliusError(f"{path}: header version is {version}, not 3 (fp32) or 5 (bf16); write the checkpoint "
                             f"again with llm.c's train_gpt2.py")
    fields = dict(zip(FIELDS, (int(w) for w in words[2:8])))
    bad = next((k for k in FIELDS if fields[k] < 1), None)
    if bad is not None:
        raise CoppeliusError(f"{path}: header field {bad} is {fields[bad]}; it must be positive: the file is corrupt")
    model = header_model(fields)
    if fields["Vp"] != model.vocab_padded:
        raise CoppeliusError(f"{path}: header field Vp is {fields['Vp']}, but V {fields['V']} padded to a multiple of "
                             f"128 is {model.vocab_padded}, the only padding Coppelius lays out: write it with llm.c's "
                             f"train_gpt2.py")
    expected = HEADER_BYTES + model.parameter_count * np.dtype(VERSIONS[version]).itemsize
    if size != expected:
        raise CoppeliusError(f"{path}: size is {size} bytes but the header (version {version}, "
                             f"{model.parameter_count:,} parameters) needs {expected}; "
                             f"the file is truncated or corrupt: write it again")
    return version, fields


def read(path: str | Path) -> tuple[int, dict, np.ndarray]:
    """(version, header fields, every parameter as one f32 vector in llm.c's order)."""
    version, fields = read_header(path)
    stored = np.fromfile(path, dtype=VERSIONS[version], offset=HEADER_BYTES)
    return version, fields, bf16_to_f32(stored) if version == 5 else stored


def write(path: str | Path, model: Model, params: np.ndarray, version: int = 3) -> None:
    """Publish `params` (f32, llm.c's order) as a version 3 (f32) or 5 (bf16) checkpoint of `model`."""
    if version not in VERSIONS:
        raise ValueError(f"llm.c checkpoint version {version} is not 3 or 5")
    header = np.zeros(HEADER_WORDS, dtype="<i4")
    header[:8] = (MAGIC, version, model.context, model.vocab, model.layers, model.heads, model.width,
                  model.vocab_padded)
    params = np.asarray(params, dtype="<f4")
    with Publication(path) as out:
        out.file.write(header.tobytes())
        out.file.write((f32_to_bf16(params) if version == 5 else params).tobytes())
