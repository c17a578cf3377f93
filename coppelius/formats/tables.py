"""Binary tables shared by build and run: a fixed header, records of one numpy dtype, a blob.

Layout: 8-byte magic, uint32 version, uint32 record count, uint64 blob bytes, then the records
(little-endian, packed), then the blob. Each table kind below fixes its magic and record dtype.
"""
import numpy as np

from ..errors import CoppeliusError

VERSION = 1

LAUNCH = np.dtype([("kernel", "<u4"), ("grid", "<u4", 3), ("block", "<u4", 3), ("shared", "<u4"),
                   ("param_offset", "<u4"), ("param_bytes", "<u4"), ("reloc_start", "<u4"), ("reloc_count", "<u4")])
RELOCATION = np.dtype([("param_offset", "<u4"), ("plane", "<u4"), ("plane_offset", "<u8")])
# op: 0 launch (a = launch index), 1 memset, 2 host->device, 3 device->host, 4 device->device.
# src/dst are plane indices for device sides, host buffer indices for host sides.
COMMAND = np.dtype([("op", "<u4"), ("a", "<u4"), ("src", "<u4"), ("dst", "<u4"),
                    ("src_offset", "<u8"), ("dst_offset", "<u8"), ("bytes", "<u8"), ("value", "<u4"), ("pad", "<u4")])
RING = np.dtype([("piece", "<u4"), ("offset", "<u4"), ("length", "<u4")])
PARAM_ADDRESS = np.dtype([("launch", "<u4"), ("offset", "<u4"), ("bytes", "<u4")])
STEP_WORD = np.dtype([("launch", "<u4"), ("step_size_offset", "<u4"), ("eps_offset", "<u4"),
                      ("step_size", "<u4"), ("eps", "<u4")])

KINDS = {
    "launches": (b"COPLNCH\0", LAUNCH), "relocations": (b"COPRELO\0", RELOCATION),
    "commands": (b"COPCMDS\0", COMMAND), "ring": (b"COPRING\0", RING),
    "param_addresses": (b"COPPADR\0", PARAM_ADDRESS), "step_words": (b"COPSTEP\0", STEP_WORD),
}
OPS = {"launch": 0, "memset": 1, "h2d": 2, "d2h": 3, "d2d": 4}


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
