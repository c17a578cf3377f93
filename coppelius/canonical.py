"""One canonical encoding for everything that is digested or stored as JSON.

Sorted keys, no whitespace, UTF-8, integers as integers, Fractions as "p/q" strings, floats
refused (a float in a key would make digests depend on formatting). Two equal values always
encode to the same bytes, on any machine.
"""
import hashlib
import json
from fractions import Fraction


def _prepare(value):
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, Fraction):
        return f"{value.numerator}/{value.denominator}"
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("canonical JSON keys must be strings")
        return {k: _prepare(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_prepare(v) for v in value]
    if isinstance(value, float):
        raise TypeError(f"canonical JSON holds no floats (got {value!r}); use a Fraction")
    raise TypeError(f"canonical JSON cannot encode {type(value).__name__}")


def encode(value) -> bytes:
    return json.dumps(_prepare(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest(value) -> str:
    """The sha256 of a value's canonical encoding."""
    return sha256(encode(value))
