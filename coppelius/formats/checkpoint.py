"""The checkpoint: a 4096-byte header, then the payload (fp32 master weights, AdamW m, AdamW v).

Header, version 3, little-endian, every field at a fixed offset so that the C host runtime reads
it without a JSON parser:

    offset  bytes  field
         0      8  magic b"COPPCKPT"
         8      4  uint32 version (3; older versions are refused)
        12      4  uint32 length of the description JSON at offset 112
        16      8  uint64 step: AdamW steps already taken (t)
        24      8  uint64 cursor: token offset of the next training context
        32      8  uint64 payload bytes
        40     32  sha256 of the payload
        72     32  sha256 of the whole 4096-byte header with these 32 bytes zeroed
       104      8  uint64 epoch: times the cursor has gone round the train stream (new in version 3)
       112      n  description: canonical JSON {"format", "learner", "model", "parts"}
     112+n          zero padding to 4096

The header digest covers every header byte (padding too), so a flipped digit of step or cursor
is refused, not trained from. The learner holds exact ratios and the loss scale (the moments are
stored scaled by it). Each payload part is the parameter tensors in llm.c's order, float32.
"""
import hashlib
import json
import struct
from pathlib import Path

import numpy as np

from .. import canonical
from ..errors import CoppeliusError
from .head import read_head
from .publish import Publication

MAGIC = b"COPPCKPT"
VERSION = 3
HEADER_BYTES = 4096
PARTS = ("params", "m", "v")
FIXED = struct.Struct("<8sIIQQQ32s32sQ")  # magic .. header digest, epoch; the description follows
DIGEST_AT = 72  # offset of the header digest
CORRUPT = "the checkpoint is corrupt: use an earlier published checkpoint"


def header_for(model: dict, learner: dict, step: int, cursor: int, payload: bytes | None = None,
               payload_bytes: int = 0, payload_sha256: str = "", epoch: int = 0) -> dict:
    if payload is not None:
        payload_bytes, payload_sha256 = len(payload), hashlib.sha256(payload).hexdigest()
    return {"format": "coppelius-checkpoint", "model": model, "learner": learner, "step": step,
            "cursor": cursor, "epoch": epoch, "parts": list(PARTS), "payload_bytes": payload_bytes,
            "payload_sha256": payload_sha256}


def description(header: dict) -> bytes:
    return canonical.encode({k: header[k] for k in ("format", "learner", "model", "parts")})


def encode_header(header: dict) -> bytes:
    body = description(header)
    if FIXED.size + len(body) > HEADER_BYTES:
        raise ValueError("checkpoint header too large")
    fixed = FIXED.pack(MAGIC, VERSION, len(body), header["step"], header["cursor"], header["payload_bytes"],
                       bytes.fromhex(header["payload_sha256"]), b"\0" * 32, header.get("epoch", 0))
    data = bytearray((fixed + body).ljust(HEADER_BYTES, b"\0"))
    data[DIGEST_AT:DIGEST_AT + 32] = hashlib.sha256(data).digest()
    return bytes(data)


def write(path: str | Path, header: dict, payload: bytes) -> None:
    with Publication(path) as out:
        out.file.write(encode_header(header_for(header["model"], header["learner"], header["step"],
                                                header["cursor"], payload, epoch=header.get("epoch", 0))))
        out.file.write(payload)


def decode_header(path, head: bytes) -> dict:
    """The header's fields, once its magic, version and digest have been checked."""
    if len(head) < 16:
        raise CoppeliusError(f"{path}: {len(head)} bytes is too short for a checkpoint header; "
                             f"the file is truncated: use an earlier published checkpoint")
    if head[:8] != MAGIC:
        raise CoppeliusError(f"{path}: magic is {head[:8]!r}, not {MAGIC!r}; this is not a Coppelius checkpoint")
    version = int.from_bytes(head[8:12], "little")
    if version != VERSION:
        raise CoppeliusError(f"{path}: checkpoint version is {version}, not {VERSION}; "
                             f"start from a checkpoint of this Coppelius (`snakemake` writes init.ckpt)")
    if len(head) < HEADER_BYTES:
        raise CoppeliusError(f"{path}: the header is {len(head)} bytes, not {HEADER_BYTES}; "
                             f"the file is truncated: use an earlier published checkpoint")
    _, _, length, step, cursor, payload_bytes, payload_sha, stored, epoch = FIXED.unpack_from(head)
    zeroed = head[:DIGEST_AT] + b"\0" * 32 + head[DIGEST_AT + 32:HEADER_BYTES]
    actual = hashlib.sha256(zeroed).digest()
    if actual != stored:
        raise CoppeliusError(f"{path}: header sha256 is {actual.hex()[:16]}..., the header says "
                             f"{stored.hex()[:16]}...; the header was changed: use an earlier published checkpoint")
    try:
        if FIXED.size + length > HEADER_BYTES:
            raise ValueError("description runs past the header")
        header = json.loads(head[FIXED.size:FIXED.size + length])
        if not (isinstance(header, dict) and isinstance(header.get("model"), dict)
                and isinstance(header.get("learner"), dict)):
            raise ValueError("model and learner must be mappings")
    except ValueError:
        raise CoppeliusError(f"{path}: the header's description is unreadable; {CORRUPT}")
    return header | {"step": step, "cursor": cursor, "epoch": epoch, "payload_bytes": payload_bytes,
                     "payload_sha256": payload_sha.hex(), "header_sha256": stored.hex()}


def read_header(path: str | Path) -> dict:
    """Parse and check a checkpoint's header (its digest included) and size; not the payload's digest."""
    path = Path(path)
    size, head = read_head(path, HEADER_BYTES, "the checkpoint", "an existing checkpoint file")
    header = decode_header(path, head)
    expected = header["payload_bytes"]
    if size != HEADER_BYTES + expected:
        how = "truncated" if size < HEADER_BYTES + expected else "longer than written"
        raise CoppeliusError(f"{path}: size is {size} bytes but the header's payload_bytes {expected} needs "
                             f"{HEADER_BYTES + expected}; the file is {how}: use an earlier published checkpoint")
    return header


def verify_payload(path: str | Path, header: dict) -> None:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(HEADER_BYTES)
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    if h.hexdigest() != header["payload_sha256"]:
        raise CoppeliusError(f"{path}: payload sha256 is {h.hexdigest()[:16]}..., the header says "
                             f"{header['payload_sha256'][:16]}...; {CORRUPT}")


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
            raise CoppeliusError(f"{path}: header {field}.{k} is {header[field].get(k)!r} but the plan's is "
                                 f"{planned.get(k)!r}; use a checkpoint of this {field} "
                                 f"or rebuild with a matching config")
