"""One canonical encoding for everything that is digested or stored as JSON.

Sorted keys, no whitespace, UTF-8, integers as integers, Fractions as "p/q" strings, floats
refused (a float in a key would make digests depend on formatting). Two equal values always
encode to the same bytes, on any machine.
"""
import hashlib
import json
from fractions import Fraction
from pathlib import Path

from .errors import CoppeliusError


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


def file_sha256(path) -> str:
    """The sha256 of a file's bytes, read in blocks (OSError if it cannot be read)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def digest(value) -> str:
    """The sha256 of a value's canonical encoding."""
    return sha256(encode(value))


def read_json(path, what: str, todo: str, keys: tuple[str, ...] = ()) -> dict:
    """A JSON object a user handed in (a plan, a certificate), or a one-line refusal naming the file."""
    try:
        value = json.loads(Path(path).read_bytes())
    except OSError as e:
        raise CoppeliusError(f"{path}: cannot read the {what} ({e.strerror}); {todo}")
    except ValueError as e:
        raise CoppeliusError(f"{path}: the {what} is not JSON ({str(e)[:80]}); {todo}")
    if not isinstance(value, dict):
        raise CoppeliusError(f"{path}: the {what} is a JSON {type(value).__name__}, not an object; {todo}")
    missing = [k for k in keys if k not in value]
    if missing:
        raise CoppeliusError(f"{path}: the {what} has no key {missing[0]!r}; {todo}")
    return value
