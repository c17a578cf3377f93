"""Sampling the next token, exactly: the generator and the arithmetic both hosts share.

The C host (coppelius/host/sample.c) and the Python interpreter give the same token for the same
logits row, options and seed, because every number below is binary64 arithmetic in a fixed order
with no library function whose last bit may differ between machines (no libm exp, no numpy
reduction). docs/formats.md, "Sampling", is the definition; this module is its Python side.

  generator   splitmix64 on a 64-bit state that starts at the seed; a uniform in [0, 1) is the
              top 24 bits of the next output times 2^-24 (exact in binary64)
  greedy      temperature 0: the largest logit, ties to the lowest id; no number is drawn
  top-k       the k largest logits, ties to the lower id, in that order (largest first)
  weights     w_i = exp64((l_i - l_max) / temperature), exp64 below; total = w_1 + w_2 + ... left to
              right; target = u * total; the first candidate whose running sum exceeds the target
              (the last one if rounding leaves none)
"""
import math

from ..errors import CoppeliusError

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
INV_LN2 = float.fromhex("0x1.71547652b82fep+0")
LN2_HI = float.fromhex("0x1.62e42fee00000p-1")  # ln 2 in two parts: k * LN2_HI is exact for |k| < 2^11
LN2_LO = float.fromhex("0x1.a39ef35793c76p-33")
EXP_CUTOFF = -700.0  # exp64 is 0 below it (no subnormal results)
TAYLOR_TERMS = 13


class Generator:
    """splitmix64 (Steele, Lea and Flood 2014), the seed as the starting state."""

    def __init__(self, seed: int):
        self.state = seed & MASK

    def next(self) -> int:
        self.state = (self.state + GOLDEN) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def uniform(self) -> float:
        return (self.next() >> 40) * 2.0 ** -24


def exp64(x: float) -> float:
    """e^x for x <= 0, in binary64 operations only: x = k ln2 + r, |r| <= ln2/2; e^r by its Taylor
    series to r^13 in Horner form q = 1 + (r / n) q, n = 13 .. 1; times 2^k (exact)."""
    if x < EXP_CUTOFF:
        return 0.0
    k = float(math.floor(x * INV_LN2 + 0.5))
    r = (x - k * LN2_HI) - k * LN2_LO
    q = 1.0
    for n in range(TAYLOR_TERMS, 0, -1):
        q = 1.0 + (r / float(n)) * q
    return math.ldexp(q, int(k))


def sample(logits: list[float], temperature: float, top_k: int, generator: Generator) -> int:
    """The next token id from one row of logits (the first `vocab` values, each an f16 as binary64)."""
    if not all(math.isfinite(v) for v in logits):
        raise CoppeliusError("sampling: the logits row holds a value that is not finite")
    if temperature == 0.0:
        best = 0
        for i, v in enumerate(logits):
            if v > logits[best]:
                best = i
        return best
    candidates = sorted(range(len(logits)), key=lambda i: (-logits[i], i))[:top_k]
    top = logits[candidates[0]]
    weights = [exp64((logits[i] - top) / temperature) for i in candidates]
    total = 0.0
    for w in weights:
        total += w
    target = generator.uniform() * total
    running = 0.0
    for i, w in zip(candidates, weights):
        running += w
        if target < running:
            return i
    return candidates[-1]
