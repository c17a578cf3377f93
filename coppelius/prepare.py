"""Stage 1, prepare: a corpus (or an llm.c .bin file) -> train and validation token streams.

Byte-level tokens (vocab 256). The default corpus is the running Python's standard-library
`.py` sources in sorted path order. The last tenth of the tokens is the validation stream, as
nanoGPT splits its character-level corpora.
"""
import sysconfig
from pathlib import Path

import numpy as np

from . import canonical
from .cas import file_digest
from .errors import CoppeliusError
from .formats import tokens as token_file

VALIDATION_PART = 10  # the last 1/VALIDATION_PART of the tokens validates


def default_corpus() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def corpus_files(corpus: str | Path) -> list[Path]:
    """The files of a corpus in the order their bytes are concatenated."""
    root = Path(corpus)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise CoppeliusError(f"config: key 'corpus' is {str(corpus)!r}, which does not exist; give a text file or a folder")
    pattern = "*.py" if root == default_corpus() else "*"
    files = [f for f in root.rglob(pattern) if f.is_file() and "site-packages" not in f.relative_to(root).parts
             and "__pycache__" not in f.parts]
    files.sort(key=lambda f: f.relative_to(root).as_posix())
    if not files:
        raise CoppeliusError(f"config: key 'corpus' is {str(corpus)!r}, a folder with no files; add text files to it")
    return files


def corpus_digest(corpus: str | Path) -> str:
    """Digest of the corpus contents, independent of where the corpus lies."""
    root = Path(corpus)
    return canonical.digest([[f.relative_to(root).as_posix() if root.is_dir() else f.name, file_digest(f)]
                             for f in corpus_files(root)])


def split(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    cut = len(tokens) - len(tokens) // VALIDATION_PART
    return tokens[:cut], tokens[cut:]


def prepare(train_path: str, val_path: str, corpus: str | None = None, tokens: str | None = None) -> dict:
    """Write the train and validation streams; return their token counts."""
    if tokens is not None:
        stream = np.asarray(token_file.read(tokens))
    else:
        data = b"".join(f.read_bytes() for f in corpus_files(corpus or default_corpus()))
        stream = np.frombuffer(data, dtype=np.uint8)
    if len(stream) < 2 * VALIDATION_PART:
        raise CoppeliusError(f"{tokens or corpus}: the corpus holds {len(stream)} tokens; give at least {2 * VALIDATION_PART}")
    train, val = split(stream)
    token_file.write(train_path, train)
    token_file.write(val_path, val)
    return {"train": len(train), "validation": len(val)}
