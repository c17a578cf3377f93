"""The reference host's token streams (coppelius/host/run_streams.c is the native host's, in the same
words): the options that name them, and the checks before any work. The cursor goes round a stream as
llm.c's loader does (cursor-wrap), so a stream needs to hold only one context, however long the run."""
from pathlib import Path

import numpy as np

from coppelius.errors import CoppeliusError
from coppelius.formats import tokens as token_file


def check_command_line(operation: str, validation_path: str | None, predict_from: str) -> None:
    """The run's options that do not go together, refused before anything is read."""
    if operation not in ("train", "predict"):
        raise CoppeliusError(f"command line: operation is {operation!r}; use train or predict")
    if operation == "predict" and validation_path is not None:
        raise CoppeliusError("command line: --validation is for train runs; a predict run scores --tokens")
    if predict_from not in ("start", "checkpoint"):
        raise CoppeliusError(f"command line: --predict-from is {predict_from!r}; use start or checkpoint")


def first_cursor(plan: dict, stream: np.ndarray, cursor: int) -> int:
    """Where the first context is read: the cursor, or the stream's start when a context does not fit there."""
    return cursor if cursor + plan["contracts"]["tokens"]["context_tokens"] <= len(stream) else 0


def check_stream(plan: dict, path: Path, start: int, contexts: int) -> np.ndarray:
    """A token stream holding at least one context, its ids below vocab wherever the run reads: from
    `start` for `contexts` contexts, or the whole stream when the run goes round it."""
    contract, run = plan["contracts"]["tokens"], plan["run"]
    stream = token_file.read(path)
    context = contract["context_tokens"]
    if len(stream) < context:
        raise CoppeliusError(f"{path}: token count is {len(stream)}, less than one context: batch {run['batch']} "
                             f"x context {plan['model']['context']} + 1 = {context} tokens; use a longer "
                             f"stream, or rebuild with a smaller batch or context")
    start, end = first_cursor(plan, stream, start), (context - 1) * contexts + 1
    start, end = (start, start + end) if start + end <= len(stream) else (0, len(stream))
    token_file.check_vocab(path, stream[start:end], contract["vocab"], start)
    return stream
