"""Readers and writers of docs/formats.md's formats, written from that document alone.

Deliberately independent of the product: nothing here imports `coppelius` or reads coppelius/formats/*.py or
coppelius/host/*.c; plain struct, hashlib, json, numpy and pyelftools, as an outside implementer would write
them. tests/unit/test_formats_conformance.py and tests/cpu/test_formats_conformance_run.py hold Coppelius's
files to them and feed theirs to Coppelius. A duplicate of product code on purpose: agreement between two
implementations of one document is what they test.
"""
import hashlib
import json
import math
import re
import struct
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "formats.md"
ONCE_PER_TOKEN = APPEND = 2**64 - 1


class Refused(ValueError):
    """What a reader written from the document refuses."""


def canonical(value) -> bytes:
    """Canonical JSON, as formats.md defines it."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


# ---- table framing ---------------------------------------------------------------------------------------------
TABLES = {  # section: (magic, record struct, field names), from the document's tables
    "launches": (b"COPLNCH\0", "<I3I3IIIIIII", ("kernel", "grid", "block", "shared", "param_offset", "param_bytes",
                                                "reloc_start", "reloc_count", "cluster")),
    "relocations": (b"COPRELO\0", "<IIQ", ("param_offset", "plane", "plane_offset")),
    "commands": (b"COPCMDS\0", "<IIIIQQQII", ("op", "a", "src", "dst", "src_offset", "dst_offset", "bytes", "value",
                                              "flags")),
    "ring": (b"COPRING\0", "<III", ("piece", "offset", "length")),
    "step_words": (b"COPSTEP\0", "<6I", ("launch", "step_size_offset", "eps_offset", "step_size", "eps", "slot")),
    "program": (b"COPHPRG\0", "<IIIIQQQII", ("op", "ring", "buffer", "file", "count", "offset", "bytes", "value",
                                             "body")),
    "planes": (b"COPPLAN\0", "<QQII", ("offset", "bytes", "dtype", "lifetime")),
    "buffers": (b"COPBUFS\0", "<QQ", ("offset", "bytes")),
    "run": (b"COPRUN\0\0", "<QQQdddIIIIIIIIII", ("arena_bytes", "host_bytes", "payload_bytes", "lr", "beta1", "beta2",
                                                 "tokens_per_step", "steps", "interval", "keep", "max_skips",
                                                 "eval_contexts", "vocab", "context_tokens", "model_json_bytes",
                                                 "learner_json_bytes")),
}
RECORD_BYTES = {"launches": 52, "relocations": 16, "commands": 48, "ring": 12, "step_words": 24, "program": 48,
                "planes": 24, "buffers": 16, "run": 88}


def read_table(name: str, data: bytes) -> tuple[list[dict], bytes]:
    """A table's records (dicts, array fields as tuples) and its blob; refuses what the framing section refuses."""
    magic, layout, names = TABLES[name]
    size = struct.calcsize(layout)
    if len(data) < 24:
        raise Refused(f"{name}: {len(data)} bytes, shorter than the 24-byte header")
    got_magic, version, count, blob_bytes = struct.unpack_from("<8sIIQ", data, 0)
    if got_magic != magic:
        raise Refused(f"{name}: magic {got_magic!r}, not {magic!r}")
    if version != 5:
        raise Refused(f"{name}: version {version}, not 5")
    if len(data) != 24 + count * size + blob_bytes:
        raise Refused(f"{name}: {len(data)} bytes, not 24 + {count} x {size} + {blob_bytes}")
    records = []
    for i in range(count):
        values = list(struct.unpack_from(layout, data, 24 + i * size))
        record = {}
        for field in names:
            n = 3 if field in ("grid", "block") else 1
            record[field] = tuple(values[:n]) if n > 1 else values[0]
            del values[:n]
        records.append(record)
    return records, data[24 + count * size:]


def write_table(name: str, records: list[tuple], blob: bytes = b"") -> bytes:
    magic, layout, _ = TABLES[name]
    return struct.pack("<8sIIQ", magic, 5, len(records), len(blob)) + b"".join(
        struct.pack(layout, *r) for r in records) + blob


def u64_fields_aligned(layout: str) -> bool:
    """Every u64 (and f64) field of a record at an 8-aligned offset, the record a multiple of 4 bytes."""
    offset = 0
    for count, code in re.findall(r"(\d*)([IQd])", layout[1:]):
        for _ in range(int(count or 1)):
            if code in "Qd" and offset % 8:
                return False
            offset += 4 if code == "I" else 8
    return offset % 4 == 0


# ---- the kernel catalog, read from the document's own table ---------------------------------------------------
def catalog() -> dict[int, dict]:
    text = DOC.read_text()
    table = text[text.index("<!-- catalog:begin -->"):text.index("<!-- catalog:end -->")]
    kernels = {}
    for row in re.findall(r"^\| (\d+) \| `(\w+)` \| (\d+) \| (.*) \|$", table, re.M):
        params = []
        for p in row[3].split(", "):
            pname, kind, offset, *access = p.split()
            params.append({"name": pname, "kind": kind, "offset": int(offset.lstrip("@")),
                           "access": access[0] if access else None})
        kernels[int(row[0])] = {"name": row[1], "block_bytes": int(row[2]), "params": params}
    return kernels


# ---- the host program -----------------------------------------------------------------------------------------
OPS = {1: "submit", 2: "reissue", 3: "repeat", 4: "read", 5: "read-at-cursor", 6: "cursor-from-checkpoint",
       7: "cursor-advance", 8: "adamw-scalars", 9: "write", 10: "fill", 11: "checkpoint-begin",
       12: "checkpoint-publish", 13: "record-stat", 14: "write-status", 15: "write-timestamps", 16: "operation",
       17: "end", 18: "sample-context", 19: "sample-token", 20: "write-sample", 21: "cursor-wrap",
       22: "validation-begin", 23: "validation-end"}
OP_FIELDS = {  # the op table's "fields" column: every other field is 0 ("Unused fields are 0")
    "submit": {"ring"}, "reissue": {"ring"}, "repeat": {"count", "body"},
    "read": {"file", "offset", "buffer", "bytes"}, "read-at-cursor": {"buffer", "count", "offset"},
    "cursor-advance": {"count"}, "write": {"file", "offset", "buffer", "bytes"},
    "fill": {"buffer", "offset", "bytes", "value"}, "record-stat": {"value", "buffer", "offset"}, "adamw-scalars": {"value"}, "operation": {"body", "count"},
    "sample-context": {"buffer", "count"}, "sample-token": {"buffer", "count", "bytes"}, "cursor-wrap": {"count"},
}


def walk(program: list[dict], operation: str, new_tokens: int = 0, validate: bool = True) -> list[int]:
    """The document's walker: the indices of the records a run executes, in order."""
    out = []

    def go(pc, end):
        while pc < end:
            r = program[pc]
            op = OPS[r["op"]]
            if op == "repeat":
                for _ in range(new_tokens if r["count"] == ONCE_PER_TOKEN else r["count"]):
                    if go(pc + 1, pc + 1 + r["body"]):
                        return True
                pc += 1 + r["body"]
                continue
            if op == "end":
                return True
            if op == "validation-begin" and not validate:
                pc = 1 + next(i for i in range(pc, len(program)) if OPS[program[i]["op"]] == "validation-end")
                continue
            out.append(pc)
            skip = 0
            if op == "operation" and operation == "predict":
                skip = r["body"]
            elif op == "operation" and operation == "generate":
                skip = r["count"]
            pc += 1 + skip
        return False

    go(0, len(program))
    return out


# ---- the step-size rule ---------------------------------------------------------------------------------------
def power(beta: float, t: int) -> float:
    result, square = 1.0, beta
    while t:
        if t & 1:
            result *= square
        square *= square
        t >>= 1
    return result


def f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def step_word(lr: float, beta1: float, beta2: float, t: int) -> int:
    return f32_bits(lr * math.sqrt(1 - power(beta2, t)) / (1 - power(beta1, t)))


# ---- checkpoint -----------------------------------------------------------------------------------------------
def read_checkpoint(data: bytes) -> dict:
    if len(data) < 4096:
        raise Refused(f"checkpoint: {len(data)} bytes, shorter than its 4096-byte header")
    magic, version, n, step, cursor, payload_bytes = struct.unpack_from("<8sIIQQQ", data, 0)
    if magic != b"COPPCKPT":
        raise Refused(f"checkpoint: magic {magic!r}")
    if version != 3:
        raise Refused(f"checkpoint: version {version}, not 3")
    header = bytearray(data[:4096])
    header_digest = bytes(header[72:104])
    header[72:104] = bytes(32)
    if hashlib.sha256(header).digest() != header_digest:
        raise Refused("checkpoint: the header digest does not match")
    if len(data) != 4096 + payload_bytes:
        raise Refused(f"checkpoint: {len(data)} bytes, not 4096 + {payload_bytes}")
    if hashlib.sha256(data[4096:]).digest() != data[40:72]:
        raise Refused("checkpoint: the payload digest does not match")
    if 112 + n > 4096:
        raise Refused(f"checkpoint: a {n}-byte description does not fit the header")
    description = data[112:112 + n]
    if any(data[112 + n:4096]):
        raise Refused("checkpoint: a nonzero byte after the description")
    parsed = json.loads(description)
    if canonical(parsed) != description:
        raise Refused("checkpoint: the description is not canonical JSON")
    (epoch,) = struct.unpack_from("<Q", data, 104)
    return {"step": step, "cursor": cursor, "epoch": epoch, "payload_bytes": payload_bytes, "description": parsed,
            "payload": data[4096:]}


def write_checkpoint(description: dict, payload: bytes, step: int = 0, cursor: int = 0, epoch: int = 0) -> bytes:
    text = canonical(description)
    header = bytearray(4096)
    struct.pack_into("<8sIIQQQ", header, 0, b"COPPCKPT", 3, len(text), step, cursor, len(payload))
    header[40:72] = hashlib.sha256(payload).digest()
    struct.pack_into("<Q", header, 104, epoch)
    header[112:112 + len(text)] = text
    header[72:104] = hashlib.sha256(header).digest()
    return bytes(header) + payload


def redigest_header(data: bytes) -> bytes:
    """The checkpoint with its header digest recomputed (after a deliberate change to a field)."""
    header = bytearray(data[:4096])
    header[72:104] = bytes(32)
    header[72:104] = hashlib.sha256(header).digest()
    return bytes(header) + data[4096:]


# ---- token stream ---------------------------------------------------------------------------------------------
def read_tokens(data: bytes):
    import numpy as np
    if len(data) < 1024:
        raise Refused("tokens: shorter than the 1024-byte header")
    magic, version, count = struct.unpack_from("<3i", data, 0)
    if magic != 20240520 or version != 1:
        raise Refused(f"tokens: magic {magic} version {version}")
    if len(data) != 1024 + 2 * count:
        raise Refused(f"tokens: {len(data)} bytes, not 1024 + 2 x {count}")
    return np.frombuffer(data, "<u2", offset=1024)


def write_tokens(ids) -> bytes:
    import numpy as np
    header = np.zeros(256, "<i4")
    header[:3] = 20240520, 1, len(ids)
    return header.tobytes() + np.asarray(ids, "<u2").tobytes()


# ---- the host ELF ---------------------------------------------------------------------------------------------
REALIZED = ("image", "kernel_info", "launches", "relocations", "commands", "ring", "program", "planes", "buffers",
            "run")  # the sections the realize stage writes
SECTIONS = ("plan", "image", "kernel_info", "launches", "relocations", "commands", "ring", "program", "planes",
            "buffers", "run", "step_words", "certificate")


def read_host_elf(path) -> dict:
    """Sections (name -> bytes, their file offsets), the identity note's entries, and the whole file."""
    from elftools.elf.elffile import ELFFile
    data = Path(path).read_bytes()
    with open(path, "rb") as f:
        elf = ELFFile(f)
        if elf.elfclass != 64 or not elf.little_endian:
            raise Refused("host ELF: not ELF64 little-endian")
        sections, offsets, notes, file_digest = {}, {}, [], None
        for s in elf.iter_sections():
            if s.name.startswith(".coppelius.") and s.name != ".coppelius_sha256":
                sections[s.name[len(".coppelius."):]] = s.data()
                offsets[s.name[len(".coppelius."):]] = s["sh_offset"]
            elif s.name == ".coppelius_sha256":
                file_digest = (s["sh_offset"], s.data())
            elif s.name == ".note.coppelius":
                raw = s.data()
                pos = 0
                while pos < len(raw):
                    namesz, descsz, kind = struct.unpack_from("<3I", raw, pos)
                    name = raw[pos + 12:pos + 12 + namesz]
                    start = pos + 12 + (namesz + 3) // 4 * 4
                    notes.append({"name": name, "type": kind, "desc": raw[start:start + descsz]})
                    pos = start + (descsz + 3) // 4 * 4
        machine = elf["e_machine"]
    return {"sections": sections, "offsets": offsets, "notes": notes, "file_digest": file_digest, "data": data,
            "machine": machine}


# ---- sampling -------------------------------------------------------------------------------------------------
MASK = 2**64 - 1
INV_LN2 = float.fromhex("0x1.71547652b82fep+0")
LN2_HI = float.fromhex("0x1.62e42fee00000p-1")
LN2_LO = float.fromhex("0x1.a39ef35793c76p-33")


class SplitMix64:
    def __init__(self, seed: int):
        self.state = seed & MASK

    def draw(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def uniform(self) -> float:
        return (self.draw() >> 40) * 2.0**-24


def exp64(x: float) -> float:
    if x < -700:
        return 0.0
    k = math.floor(x * INV_LN2 + 0.5)
    r = (x - k * LN2_HI) - k * LN2_LO
    q = 1.0
    for n in range(13, 0, -1):
        q = 1 + (r / n) * q
    return math.ldexp(q, int(k))


def sample_row(row_f16, vocab: int, temperature: float, top_k: int, generator: SplitMix64) -> int:
    """One id from a row of f16 logits (numpy float16, Vp of them), by the document's rules."""
    values = [float(v) for v in row_f16[:vocab]]
    if not all(math.isfinite(v) for v in values):
        raise Refused("sampling: a value that is not finite")
    if temperature == 0:
        best = max(values)
        return values.index(best)
    order = sorted(range(vocab), key=lambda i: (-values[i], i))[:top_k]
    m = values[order[0]]
    weights = [exp64((values[i] - m) / temperature) for i in order]
    total = 0.0
    for w in weights:
        total += w
    target = generator.uniform() * total
    running = 0.0
    for i, w in zip(order, weights):
        running += w
        if running > target:
            return i
    return order[-1]
