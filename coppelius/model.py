"""The GPT-2 model as llm.c lays it out: dimensions, parameter tensors in order, counts, FLOPs."""
from dataclasses import dataclass
from pathlib import Path

import yaml

from .errors import CoppeliusError

MODELS_DIR = Path(__file__).resolve().parent.parent / "config" / "models"
DIMENSIONS = ("vocab", "context", "width", "layers", "heads")


@dataclass(frozen=True)
class Model:
    vocab: int
    context: int
    width: int
    layers: int
    heads: int

    @property
    def vocab_padded(self) -> int:
        """llm.c pads the vocabulary to a multiple of 128 so the head matmul tiles evenly."""
        return -(-self.vocab // 128) * 128

    @property
    def head_size(self) -> int:
        return self.width // self.heads

    def tensors(self) -> list[tuple[str, tuple[int, ...], bool]]:
        """(name, shape, decayed) for every parameter tensor, in llm.c's order.

        Layer tensors are stacked on a leading `layers` axis. Weight decay applies to
        matrices only (two or more dimensions per layer), as nanoGPT does.
        """
        V, T, C, L = self.vocab_padded, self.context, self.width, self.layers
        return [
            ("wte", (V, C), True), ("wpe", (T, C), True),
            ("ln1w", (L, C), False), ("ln1b", (L, C), False),
            ("qkvw", (L, 3 * C, C), True), ("qkvb", (L, 3 * C), False),
            ("attprojw", (L, C, C), True), ("attprojb", (L, C), False),
            ("ln2w", (L, C), False), ("ln2b", (L, C), False),
            ("fcw", (L, 4 * C, C), True), ("fcb", (L, 4 * C), False),
            ("fcprojw", (L, C, 4 * C), True), ("fcprojb", (L, C), False),
            ("lnfw", (C,), False), ("lnfb", (C,), False),
        ]

    @property
    def parameter_count(self) -> int:
        total = 0
        for _, shape, _ in self.tensors():
            count = 1
            for d in shape:
                count *= d
            total += count
        return total

    def flops_per_token(self) -> int:
        """Training FLOPs per token, as PaLM's appendix counts them: 6N + 12 L T C."""
        return 6 * self.parameter_count + 12 * self.layers * self.context * self.width

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in DIMENSIONS} | {"vocab_padded": self.vocab_padded}


def preset(name: str) -> dict:
    path = MODELS_DIR / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in MODELS_DIR.glob("*.yaml"))
        raise CoppeliusError(f"config: key 'model' is {name!r}; choose one of {', '.join(known)}")
    return yaml.safe_load(path.read_text())
