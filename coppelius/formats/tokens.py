"""llm.c's token file: int32[256] header (magic 20240520, version 1, token count), uint16 tokens.

Any llm.c .bin is accepted as is. Readers check everything a run relies on and refuse with the
file, the field, the value and what to do.
"""
from pathlib import Path

import numpy as np

from ..errors import CoppeliusError
from .head import read_head
from .publish import publish_bytes

MAGIC = 20240520
VERSION = 1
HEADER_BYTES = 1024
LLAMA3_MAGIC = 20240801  # llm.c's LLaMA-3 token file (version 7, uint32 ids): named, never read
LLAMA3_REFUSAL = (f"header magic is {LLAMA3_MAGIC}: llm.c's LLaMA-3 token file (uint32 ids), which Coppelius does "
                  f"not read; give a GPT-2 token file (magic {MAGIC}, uint16 ids), as llm.c's data scripts write it "
                  f"with --model_desc gpt-2")


def encode(tokens: np.ndarray) -> bytes:
    tokens = np.asarray(tokens)
    if tokens.size and (tokens.min() < 0 or tokens.max() > 0xFFFF):
        raise ValueError("token ids must fit in uint16")
    header = np.zeros(256, dtype="<i4")
    header[:3] = (MAGIC, VERSION, tokens.size)
    return header.tobytes() + tokens.astype("<u2").tobytes()


def write(path: str | Path, tokens: np.ndarray) -> None:
    publish_bytes(path, encode(tokens))


def read_header(path: str | Path) -> int:
    """Check the header and size of a token file; return its token count."""
    path = Path(path)
    size, head = read_head(path, HEADER_BYTES, "the token file", "an existing llm.c .bin file")
    if len(head) < HEADER_BYTES:
        raise CoppeliusError(f"{path}: header is {len(head)} bytes, not {HEADER_BYTES}; "
                             f"the file is truncated or not an llm.c .bin file")
    magic, version, count = np.frombuffer(head, dtype="<i4", count=3)
    if magic == LLAMA3_MAGIC:
        raise CoppeliusError(f"{path}: {LLAMA3_REFUSAL}")
    if magic != MAGIC:
        raise CoppeliusError(f"{path}: header magic is {int(magic)}, not {MAGIC}; give an llm.c .bin token file")
    if version != VERSION:
        raise CoppeliusError(f"{path}: header version is {int(version)}, not {VERSION}; "
                             f"re-export it with llm.c's uint16 writer")
    if count < 0 or size != HEADER_BYTES + 2 * int(count):
        raise CoppeliusError(f"{path}: size is {size} bytes but the header's token count {int(count)} needs "
                             f"{HEADER_BYTES + 2 * int(count)}; the file is truncated or corrupt: prepare it again")
    return int(count)


def read(path: str | Path, vocab: int | None = None) -> np.ndarray:
    """All tokens of a checked file (a read-only memory map), each below `vocab` when given."""
    count = read_header(path)
    tokens = (np.memmap(path, dtype="<u2", mode="r", offset=HEADER_BYTES, shape=(count,)) if count
              else np.zeros(0, "<u2"))
    if vocab is not None:
        check_vocab(path, tokens, vocab)
    return tokens


def check_vocab(path, tokens: np.ndarray, vocab: int, first_offset: int = 0) -> None:
    if not tokens.size or int(tokens.max()) < vocab:  # one pass, no index array, for a whole file of good ids
        return
    bad = np.flatnonzero(tokens >= vocab)
    if bad.size:
        at = first_offset + int(bad[0])
        raise CoppeliusError(f"{path}: token {at} is {int(tokens[bad[0]])}, not below the model's vocab {vocab}; "
                             f"use a model with a larger vocab or re-tokenize the corpus")
