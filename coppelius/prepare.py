"""Stage 1, prepare: a corpus (or an llm.c .bin file) -> train and validation token streams.

Byte-level tokens (vocab 256). The default corpus is the running Python's standard-library
`.py` sources in sorted path order. The last tenth of the tokens is the validation stream, as
nanoGPT splits its character-level corpora.
"""
import os
import sysconfig
from pathlib import Path

import numpy as np

from . import canonical
from .cas import file_digest
from .config import check_outside
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
        raise CoppeliusError(f"config: key 'corpus' is {str(corpus)!r}, which does not exist; "
                             f"give a text file or a folder")
    pattern = "*.py" if root == default_corpus() else "*"
    files = [f for f in root.rglob(pattern) if f.is_file() and "site-packages" not in f.relative_to(root).parts
             and "__pycache__" not in f.parts]
    files.sort(key=lambda f: f.relative_to(root).as_posix())
    seen = set()  # a file reached through several links is read once, at its first path
    files = [f for f in files if not (f.resolve() in seen or seen.add(f.resolve()))]
    if not files:
        raise CoppeliusError(f"config: key 'corpus' is {str(corpus)!r}, a folder with no files; add text files to it")
    return files


def corpus_digest(corpus: str | Path) -> str:
    """Digest of the corpus contents, independent of where the corpus lies."""
    root = Path(corpus)
    return canonical.digest([[f.relative_to(root).as_posix() if root.is_dir() else f.name, file_digest(f)]
                             for f in corpus_files(root)])


def split_lengths(count: int) -> tuple[int, int]:
    """Token counts of the train and validation streams cut from a stream of `count` tokens."""
    return count - count // VALIDATION_PART, count // VALIDATION_PART


def split(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    cut = split_lengths(len(tokens))[0]
    return tokens[:cut], tokens[cut:]


def source_stats(config) -> list[tuple[Path, os.stat_result]]:
    """The token file, or the corpus files in their order, each with its stat (one walk of a corpus folder)."""
    files = [Path(config.tokens)] if config.tokens else corpus_files(config.corpus or default_corpus())
    return [(f, f.stat()) for f in files]


def stream_length(config, stats: list | None = None) -> int:
    """The token count `prepare` will see, without reading the tokens: a corpus is byte-level, so
    its length is its files' sizes (`stats`: source_stats', when the caller has them); a token file's is its
    header's count."""
    if config.tokens:
        if Path(config.tokens).is_dir():
            raise CoppeliusError(f"config: key 'tokens' is {config.tokens!r}, a folder; give an llm.c .bin token file")
        return token_file.read_header(config.tokens)
    return sum(stat.st_size for _, stat in stats or source_stats(config))


def check_inputs(config, outputs: str | Path = "results") -> str:
    """Everything about the corpus or token file that would stop a job (or that a job would remove: a file under
    the workflow's `outputs`), refused before any job runs. Returns the sources' stamp: their paths, sizes and
    modification times (not their bytes, which prepare's store key digests), the prepare rule's params, so that
    an edited source reruns it."""
    check_outside("tokens", config.tokens, outputs)
    check_outside("corpus", config.corpus, outputs)
    stats = [] if config.tokens else source_stats(config)  # (a token file's header is read first: it may be missing)
    source = f"tokens {config.tokens!r}" if config.tokens else f"corpus {str(config.corpus or default_corpus())!r}"
    if not config.tokens and config.model.vocab < 256:
        raise CoppeliusError(f"config: key 'vocab' is {config.model.vocab}; the byte-level corpus needs at least 256: "
                             f"set vocab to 256 or more, or give a token file with `tokens`")
    count = stream_length(config, stats)
    if count < 2 * VALIDATION_PART:
        raise CoppeliusError(f"config: the {source} holds {count} tokens; give one with at least {2 * VALIDATION_PART}")
    # the run goes round a stream as often as steps or eval_contexts take (epochs): each stream needs one context
    batch, context = config.run.batch, config.model.context
    need = batch * context + 1  # one step reads batch x context tokens, plus the last one's target
    for stream, held in zip(("train stream", "validation stream (the last tenth)"), split_lengths(count)):
        if held < need:
            raise CoppeliusError(f"config: key 'batch' is {batch}; the {stream} of the {source} holds {held:,} tokens, "
                                 f"less than one context of batch {batch} x context {context} + 1 = {need:,}: lower "
                                 f"batch or context, or give a larger corpus")
    if config.tokens:  # every id goes into the train or the validation stream: one the model has not is refused now
        token_file.read(config.tokens, vocab=config.model.vocab)
    return canonical.digest([[str(f), stat.st_size, stat.st_mtime_ns] for f, stat in stats or source_stats(config)])


def prepare(train_path: str, val_path: str, corpus: str | None = None, tokens: str | None = None) -> dict:
    """Write the train and validation streams; return their token counts."""
    if tokens is not None:
        stream = np.asarray(token_file.read(tokens))
    else:
        data = b"".join(f.read_bytes() for f in corpus_files(corpus or default_corpus()))
        stream = np.frombuffer(data, dtype=np.uint8)
    if len(stream) < 2 * VALIDATION_PART:
        raise CoppeliusError(f"{tokens or corpus}: the corpus holds {len(stream)} tokens; "
                             f"give at least {2 * VALIDATION_PART}")
    train, val = split(stream)
    token_file.write(train_path, train)
    token_file.write(val_path, val)
    return {"train": len(train), "validation": len(val)}
