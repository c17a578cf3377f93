"""Binary tables shared by build and run: a fixed header, records of one numpy dtype, a blob.

Layout: 8-byte magic, uint32 version, uint32 record count, uint64 blob bytes, then the records
(little-endian, packed), then the blob. Each table kind below fixes its magic and record dtype;
docs/formats.md gives every field, and tests/unit/test_formats.py holds the two equal.
"""
from fractions import Fraction

import numpy as np

from .. import canonical
from ..errors import CoppeliusError

VERSION = 5  # 2: the launch record's cluster field; 3: the command record's flags; 4: two update buffers each,
#             record-stat's buffer; 5: several steps an update piece (the step word's slot; read-at-cursor's and
#             record-stat's offset, adamw-scalars' slot)

LAUNCH = np.dtype([("kernel", "<u4"), ("grid", "<u4", 3), ("block", "<u4", 3), ("shared", "<u4"),
                   ("param_offset", "<u4"), ("param_bytes", "<u4"), ("reloc_start", "<u4"), ("reloc_count", "<u4"),
                   ("cluster", "<u4")])
RELOCATION = np.dtype([("param_offset", "<u4"), ("plane", "<u4"), ("plane_offset", "<u8")])
# op: 0 launch (a = launch index), 1 memset, 2 host->device, 3 device->host, 4 device->device.
# src/dst are plane indices for device sides, host buffer indices for host sides.
# flags: COMMAND_PROGRAMMATIC on a launch that may start while the launch before it finishes (formats/geometry.py).
COMMAND = np.dtype([("op", "<u4"), ("a", "<u4"), ("src", "<u4"), ("dst", "<u4"),
                    ("src_offset", "<u8"), ("dst_offset", "<u8"), ("bytes", "<u8"), ("value", "<u4"), ("flags", "<u4")])
COMMAND_PROGRAMMATIC = 1
RING = np.dtype([("piece", "<u4"), ("offset", "<u4"), ("length", "<u4")])
# slot: which of its update piece's steps the AdamW launch belongs to (its ring entry's h2d copies before it, less 1)
STEP_WORD = np.dtype([("launch", "<u4"), ("step_size_offset", "<u4"), ("eps_offset", "<u4"),
                      ("step_size", "<u4"), ("eps", "<u4"), ("slot", "<u4")])
# The host program, flattened in pre-order (formats/program.py).
HOST_STEP = np.dtype([("op", "<u4"), ("ring", "<u4"), ("buffer", "<u4"), ("file", "<u4"), ("count", "<u8"),
                      ("offset", "<u8"), ("bytes", "<u8"), ("value", "<u4"), ("body", "<u4")])
PLANE = np.dtype([("offset", "<u8"), ("bytes", "<u8"), ("dtype", "<u4"), ("lifetime", "<u4")])
BUFFER = np.dtype([("offset", "<u8"), ("bytes", "<u8")])
# One record; the blob is the canonical JSON of the checkpoint contract's model, then its learner.
RUN = np.dtype([("arena_bytes", "<u8"), ("host_bytes", "<u8"), ("payload_bytes", "<u8"),
                ("lr", "<f8"), ("beta1", "<f8"), ("beta2", "<f8"),
                ("tokens_per_step", "<u4"), ("steps", "<u4"), ("interval", "<u4"), ("keep", "<u4"),
                ("max_skips", "<u4"), ("eval_contexts", "<u4"), ("vocab", "<u4"), ("context_tokens", "<u4"),
                ("model_json_bytes", "<u4"), ("learner_json_bytes", "<u4")])

KINDS = {
    "launches": (b"COPLNCH\0", LAUNCH), "relocations": (b"COPRELO\0", RELOCATION),
    "commands": (b"COPCMDS\0", COMMAND), "ring": (b"COPRING\0", RING), "step_words": (b"COPSTEP\0", STEP_WORD),
    "program": (b"COPHPRG\0", HOST_STEP), "planes": (b"COPPLAN\0", PLANE), "buffers": (b"COPBUFS\0", BUFFER),
    "run": (b"COPRUN\0\0", RUN),
}
OPS = {"launch": 0, "memset": 1, "h2d": 2, "d2h": 3, "d2d": 4}
OP_NAMES = {code: name for name, code in OPS.items()}
DTYPES = {"u8": (0, 1), "f16": (1, 2), "f32": (2, 4), "i32": (3, 4)}  # name: (code, bytes)
DTYPE_BYTES = {name: size for name, (_, size) in DTYPES.items()}
LIFETIMES = ("persistent", "step", "transfer")  # code = index
# The pinned host block's buffers, in this order: a buffer's index in commands and the host program.
HOST_BUFFERS = ("staging", "context", "context_1", "step_losses", "step_losses_1", "report_losses",
                "report_predictions", "sample_logits")
# The two update pieces, (name, the host buffer it takes its context from, the one it copies its losses and then its
# non-finite flag to): the same commands but for these, so that the host fills one's buffers while the card runs
# the other (plan/program.py alternates them, ending on the first, in every interval)
UPDATE_PIECES = (("update", "context", "step_losses"), ("update_1", "context_1", "step_losses_1"))


def plane_rows(plan: dict) -> list[tuple]:
    """The planes table's records for a plan: (offset, bytes, dtype code, lifetime code)."""
    return [(p["offset"], p["bytes"], DTYPES[p["dtype"]][0], LIFETIMES.index(p["lifetime"]))
            for p in plan["arena"]["planes"]]


def buffer_rows(plan: dict) -> list[tuple]:
    """The buffers table's records for a plan: (offset, bytes) in HOST_BUFFERS order."""
    return [(plan["host"]["buffers"][n]["offset"], plan["host"]["buffers"][n]["bytes"]) for n in HOST_BUFFERS]


def run_record(plan: dict) -> tuple[dict, bytes]:
    """The run table's one record for a plan, by field, and its blob (the checkpoint contract's
    model and learner, canonical JSON)."""
    run, tokens, contract = plan["run"], plan["contracts"]["tokens"], plan["contracts"]["checkpoint"]
    model, learner = canonical.encode(contract["model"]), canonical.encode(contract["learner"])
    record = {"arena_bytes": plan["arena"]["bytes"], "host_bytes": plan["host"]["bytes"],
              "payload_bytes": contract["payload_bytes"], "tokens_per_step": run["tokens_per_step"],
              "context_tokens": tokens["context_tokens"], "vocab": tokens["vocab"],
              "model_json_bytes": len(model), "learner_json_bytes": len(learner),
              **{k: float(Fraction(plan["learner"][k])) for k in ("lr", "beta1", "beta2")},
              **{k: run[k] for k in ("steps", "interval", "keep", "max_skips", "eval_contexts")}}
    return record, model + learner


def lifetimes_meet(a: str, b: str) -> bool:
    """Persistent planes are live with every plane; step and transfer planes only with their own kind,
    so the arena overlays the two (plan/arena.py)."""
    return a == "persistent" or b == "persistent" or a == b


def pack(kind: str, records: np.ndarray, blob: bytes = b"") -> bytes:
    magic, dtype = KINDS[kind]
    records = np.asarray(records, dtype=dtype)
    head = magic + np.array([VERSION, len(records)], "<u4").tobytes() + np.array([len(blob)], "<u8").tobytes()
    return head + records.tobytes() + blob


def unpack(kind: str, data: bytes, where: str = "") -> tuple[np.ndarray, bytes]:
    magic, dtype = KINDS[kind]
    where = where or kind
    if len(data) < 24 or data[:8] != magic:
        raise CoppeliusError(f"{where}: table magic is {data[:8]!r}, not {magic!r}; rebuild it with `snakemake`")
    version, count = np.frombuffer(data[8:16], "<u4")
    (blob_bytes,) = np.frombuffer(data[16:24], "<u8")
    if version != VERSION:
        raise CoppeliusError(f"{where}: table version is {int(version)}, not {VERSION}; rebuild it with `snakemake`")
    end = 24 + int(count) * dtype.itemsize
    if len(data) != end + int(blob_bytes):
        raise CoppeliusError(f"{where}: {len(data)} bytes for {int(count)} records and a {int(blob_bytes)}-byte blob; "
                             f"the table is truncated or corrupt: rebuild it with `snakemake`")
    return np.frombuffer(data[24:end], dtype=dtype), data[end:]
