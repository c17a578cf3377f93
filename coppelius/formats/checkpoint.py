"""The checkpoint: a 4096-byte header, then the payload (fp32 master weights, AdamW m, AdamW v).

Header: b"COPPCKPT", uint32 version, uint32 length of the JSON that follows (canonical
encoding), zero padding to 4096 bytes. The JSON holds the model's dimensions, the learner
(exact ratios and the loss scale: the moments are stored scaled by it), the step count t
already taken, the token cursor of the next context, and the payload's size and sha256.
Each of the three payload parts is the parameter tensors in llm.c's order, float32 little-endian.
"""
import hashlib
import json
import os
from pathlib import Path

import numpy as np

from .. import canonical
from ..errors import CoppeliusError
from .publish import Publication

MAGIC = b"COPPCKPT"
VERSION = 1
HEADER_BYTES = 4096
PARTS = ("params", "m", "v")


def header_for(model: dict, learner: dict, step: int, cursor: int, payload: bytes | None = None,
               payload_bytes: int = 0, payload_sha256: str = "") -> dict:
    if payload is not None:
        payload_bytes, payload_sha256 = len(payload), hashlib.sha256(payload).hexdigest()
    return {"format": "coppelius-checkpoint", "model": model, "learner": learner, "step": step,
            "cursor": cursor, "parts": list(PARTS), "payload_bytes": payload_bytes, "payload_sha256": payload_sha256}


def encode_header(header: dict) -> bytes:
    body = canonical.encode(header)
    if 16 + len(body) > HEADER_BYTES:
        raise ValueError("checkpoint header too large")
    return (MAGIC + np.array([VERSION, len(body)], "<u4").tobytes() + body).ljust(HEADER_BYTES, b"\0")


def write(path: str | Path, header: dict, payload: bytes) -> None:
    with Publication(path) as out:
        out.file.write(encode_header(header_for(header["model"], header["learner"], header["step"],
                                                header["cursor"], payload)))
        out.file.write(payload)


def read_header(path: str | Path) -> dict:
    """Parse and check a checkpoint's header and size (not its payload digest)."""
    path = Path(path)
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(HEADER_BYTES)
    except OSError as e:
        raise CoppeliusError(f"{path}: cannot read the checkpoint ({e.strerror}); give an existing checkpoint file")
    if len(head) < 16:
        raise CoppeliusError(f"{path}: {len(head)} bytes is too short for a checkpoint header; the file is truncated: use an earlier published checkpoint")
    if head[:8] != MAGIC:
        raise CoppeliusError(f"{path}: magic is {head[:8]!r}, not {MAGIC!r}; this is not a Coppelius checkpoint")
    version, length = np.frombuffer(head[8:16], "<u4")
    if version != VERSION:
        raise CoppeliusError(f"{path}: checkpoint version is {int(version)}, not {VERSION}; convert it or start from `coppelius init`")
    if len(head) < HEADER_BYTES or 16 + int(length) > HEADER_BYTES:
        raise CoppeliusError(f"{path}: header length is {int(length)} in a {len(head)}-byte header; the file is truncated or corrupt: use an earlier published checkpoint")
    try:
        header = json.loads(head[16:16 + int(length)])
        expected = header["payload_bytes"]
        assert isinstance(header, dict) and isinstance(expected, int) and isinstance(header["step"], int) \
            and isinstance(header["cursor"], int) and isinstance(header["model"], dict) and isinstance(header["learner"], dict) \
            and isinstance(header["payload_sha256"], str)
    except (ValueError, KeyError, TypeError, AssertionError):
        raise CoppeliusError(f"{path}: the header JSON is unreadable; the file is corrupt: use an earlier published checkpoint")
    if size != HEADER_BYTES + expected:
        raise CoppeliusError(f"{path}: size is {size} bytes but the header's payload_bytes {expected} needs {HEADER_BYTES + expected}; "
                             f"the file is truncated: use an earlier published checkpoint")
    return header


def verify_payload(path: str | Path, header: dict) -> None:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(HEADER_BYTES)
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    if h.hexdigest() != header["payload_sha256"]:
        raise CoppeliusError(f"{path}: payload sha256 is {h.hexdigest()[:16]}..., the header says {header['payload_sha256'][:16]}...; "
                             f"the checkpoint is corrupt: use an earlier published checkpoint")


def read(path: str | Path) -> tuple[dict, dict[str, np.ndarray]]:
    """Header and the three payload parts as float32 arrays (checked against the digest)."""
    header = read_header(path)
    verify_payload(path, header)
    data = np.fromfile(path, dtype="<f4", offset=HEADER_BYTES)
    count = len(data) // len(PARTS)
    return header, {part: data[i * count:(i + 1) * count] for i, part in enumerate(PARTS)}


def check_matches(path, header: dict, model: dict, learner: dict) -> None:
    """Refuse a checkpoint of another model or learner than the plan's."""
    for field, planned in (("model", model), ("learner", learner)):
        if header[field] != planned:
            differing = sorted(k for k in set(planned) | set(header[field]) if header[field].get(k) != planned.get(k))
            k = differing[0]
            raise CoppeliusError(f"{path}: header {field}.{k} is {header[field].get(k)!r} but the plan's is {planned.get(k)!r}; "
                                 f"use a checkpoint of this {field} or rebuild with a matching config")
