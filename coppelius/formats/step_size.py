"""The step-size rule (docs/formats.md): AdamW's per-step numbers, exactly (the plan's) and in
binary64 (the host's).

The step size at step t is lr * sqrt(1 - beta2^t) / (1 - beta1^t). The plan rounds the exact
real number to the nearest binary32 (ties to even) with rational arithmetic only; the host
computes it in binary64 and rounds to binary32. Admission holds the two equal.
"""
import math
from fractions import Fraction

import numpy as np


def _f32_neighbours(g: np.float32) -> tuple[np.float32, np.float32]:
    return np.nextafter(g, np.float32(-np.inf)), np.nextafter(g, np.float32(np.inf))


def _nearest_f32(compare, guess: float) -> np.float32:
    """The binary32 nearest to a positive real x, given compare(m) = sign(x - m) for rational m."""
    g = np.float32(guess)
    while True:
        below, above = _f32_neighbours(g)
        if compare((Fraction(float(g)) + Fraction(float(above))) / 2) > 0:
            g = above
        elif compare((Fraction(float(below)) + Fraction(float(g))) / 2) < 0:
            g = below
        else:
            break
    below, above = _f32_neighbours(g)
    for a, b in ((below, g), (g, above)):  # exact ties go to the even significand
        if compare((Fraction(float(a)) + Fraction(float(b))) / 2) == 0:
            return a if int(np.float32(a).view(np.uint32)) % 2 == 0 else b
    return g


def nearest_f32(x: Fraction) -> np.float32:
    """The binary32 nearest to a rational (no double rounding through binary64)."""
    if x == 0:
        return np.float32(0)
    sign = -1 if x < 0 else 1
    ax = abs(x)
    return np.float32(sign * _nearest_f32(lambda m: (ax > m) - (ax < m), float(ax)))


def step_size_exact(lr: Fraction, beta1: Fraction, beta2: Fraction, t: int) -> np.float32:
    """Nearest binary32 to lr*sqrt(1-beta2^t)/(1-beta1^t), decided with rationals only."""
    r = lr / (1 - beta1 ** t)          # x = r * sqrt(s), r > 0, s > 0
    s = 1 - beta2 ** t
    square = r * r * s

    def compare(m: Fraction) -> int:
        if m <= 0:  # x > 0; squaring a negative m would walk the search down for ever (x below 2^-150 rounds to 0)
            return 1
        m2 = m * m
        return (square > m2) - (square < m2)
    return _nearest_f32(compare, float(r) * math.sqrt(float(s)))


def power(base: float, t: int) -> float:
    """base**t by repeated squaring in binary64: only IEEE multiplications, so every host (x86-64
    or AArch64) gets the same bits, unlike libm's pow, which admission could not vouch for."""
    result, square = 1.0, base
    while t:
        if t & 1:
            result *= square
        square *= square
        t >>= 1
    return result


def step_size_host(lr: float, beta1: float, beta2: float, t: int) -> np.float32:
    """What the host computes at run time: binary64, then rounded once to binary32."""
    return np.float32(lr * math.sqrt(1.0 - power(beta2, t)) / (1.0 - power(beta1, t)))


def f32_word(value: np.float32) -> str:
    """A binary32 as it is written into a parameter block: its bit pattern, in hex."""
    return f"0x{int(np.float32(value).view(np.uint32)):08x}"


def f32_from_word(word: str) -> np.float32:
    return np.uint32(int(word, 16)).view(np.float32)
