"""The generate operation's inputs and state, for the interpreter (the C runtime's is host/generate.c,
with the same checks, in the same order, and the same one-line refusals; docs/formats.md, Generate).

The options arrive as the command line's strings, so that both hosts read the very same text:
numbers are plain decimals (no sign, no underscores, no hex, no inf or nan), parsed once, correctly
rounded, then held to their ranges.
"""
import os
import re
from pathlib import Path

from coppelius.errors import CoppeliusError
from coppelius.formats import tokens as token_file
from coppelius.formats.publish import check_writable_folder
from coppelius.formats.sampling import Generator, sample

WHOLE = re.compile(r"[0-9]{1,20}")
DECIMAL = re.compile(r"([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")
SEED_LIMIT = (1 << 64) - 1
NEW_TOKENS_LIMIT = 1 << 20
DEFAULTS = {"temperature": "1", "top_k": None, "seed": "1337"}
BYTE_LEVEL_VOCAB = 256


def _whole(flag: str, text: str, low: int, high: int, what: str) -> int:
    if WHOLE.fullmatch(text) is None or not low <= int(text) <= high:
        raise CoppeliusError(f"command line: {flag} is {text!r}; give {what}")
    return int(text)


def parse_options(prompt: str | None = None, prompt_tokens: str | None = None, new_tokens: str | None = None,
                  temperature: str | None = None, top_k: str | None = None, seed: str | None = None) -> dict:
    """The options' syntax, before anything is read (the C runtime: generate_parse_options); None: not given."""
    if new_tokens is None:
        raise CoppeliusError("command line: --new-tokens is missing; give the number of tokens to generate")
    options = {"new_tokens": _whole("--new-tokens", new_tokens, 1, NEW_TOKENS_LIMIT,
                                    f"a whole number of tokens from 1 to {NEW_TOKENS_LIMIT}")}
    temperature = DEFAULTS["temperature"] if temperature is None else temperature
    value = float(temperature) if DECIMAL.fullmatch(temperature) else -1.0
    if not 0.0 <= value < float("inf"):
        raise CoppeliusError(f"command line: --temperature is {temperature!r}; give a finite number >= 0 "
                             f"(0 samples greedily)")
    options["temperature"] = value
    options["top_k"] = None if top_k is None else _whole("--top-k", top_k, 0, SEED_LIMIT, "a whole number")
    options["seed"] = _whole("--seed", DEFAULTS["seed"] if seed is None else seed, 0, SEED_LIMIT,
                             f"a whole number from 0 to {SEED_LIMIT}")
    if (prompt is None) == (prompt_tokens is None):
        raise CoppeliusError("command line: give --prompt TEXT or --prompt-tokens FILE, one of them, to generate")
    if prompt is not None and not prompt:
        raise CoppeliusError("command line: --prompt is empty; give at least one character of text")
    options["prompt"] = None if prompt is None else os.fsencode(prompt)
    options["prompt_tokens"] = prompt_tokens
    return options


def check_sample_path(out: str, inputs: dict) -> None:
    """--out names the sample file: not a folder, not one of the run's inputs (what each is: its path), in a
    writable folder."""
    out = Path(out)
    if out.is_dir():
        raise CoppeliusError(f"{out}: --out names a folder; give a file path for the sample")
    for what, path in inputs.items():
        if out.exists() and path is not None and Path(path).exists() and out.samefile(path):
            raise CoppeliusError(f"{out}: --out is {what}, which the sample would replace; give another path for the "
                                 f"sample")
    check_writable_folder(out.parent, "--out's folder")


class Generation:
    """The sequence (prompt, then each sampled id), its window and the sampler's state."""

    def __init__(self, options: dict, vocab: int, context: int):
        self.vocab, self.options = vocab, options
        top_k = options["top_k"]
        if top_k is not None and not 1 <= top_k <= vocab:
            raise CoppeliusError(f"command line: --top-k is {top_k}; give a whole number from 1 to the vocab, {vocab}")
        self.top_k = vocab if top_k is None else top_k
        self.byte_level = vocab == BYTE_LEVEL_VOCAB
        if options["prompt"] is not None:
            if not self.byte_level:
                raise CoppeliusError(f"command line: --prompt gives bytes, the ids of a byte-level model (vocab "
                                     f"{BYTE_LEVEL_VOCAB}); this model's vocab is {vocab}: give the prompt's ids with "
                                     f"--prompt-tokens FILE")
            self.ids, where = list(options["prompt"]), "command line: --prompt"
        else:
            path = options["prompt_tokens"]
            stream = token_file.read(path)
            if len(stream) == 0:
                raise CoppeliusError(f"{path}: the prompt holds no tokens; give at least one")
            token_file.check_vocab(path, stream, vocab, 0)
            self.ids, where = [int(i) for i in stream], f"{path}: the prompt"
        if len(self.ids) > context:
            raise CoppeliusError(f"{where} is {len(self.ids)} tokens, longer than the model's context of {context}; "
                                 f"shorten it")
        self.generator = Generator(options["seed"])

    def window(self, positions: int) -> list[int]:
        """The newest <= `positions` ids, oldest first (sample-context)."""
        return self.ids[-positions:]

    def take(self, rows, positions: int) -> None:
        """Sample the next id from the window's last row of `rows` (f16 logits, `positions` rows)."""
        last = min(len(self.ids), positions) - 1
        row = rows.reshape(positions, -1)[last, :self.vocab].astype("float64").tolist()
        self.ids.append(sample(row, self.options["temperature"], self.top_k, self.generator))

    def text(self) -> bytes:
        """The sample: its bytes for a byte-level model, else its ids in decimal, spaced, a newline at the end."""
        if self.byte_level:
            return bytes(self.ids)
        return (" ".join(str(i) for i in self.ids) + "\n").encode()
