"""The host ELF: the admitted artifacts of one build, in one ELF64 container (stage 7, `elf`).

Written here by struct packing (no external writer), read back with pyelftools, and listed
cleanly by `readelf -h -S -n`. Layout, byte for byte (ELF64, little-endian, ELFOSABI_NONE,
ET_REL: a data container, no code, no program headers):

    ELF header (64 bytes)
    .note.coppelius   SHT_NOTE, align 4, two note records, both named "Coppelius\\0":
                      type 1: canonical JSON {"format": "coppelius-host-elf", "version": 1,
                              "identity": {...}, "sections": {name: sha256 hex}}
                      type 2: the 32-byte sha256 of the type-1 descriptor, so that a changed
                              byte in the note itself is refused too
    .coppelius.NAME   SHT_PROGBITS, align 256 (file offset a multiple of 256), sorted by NAME
    .shstrtab         SHT_STRTAB, align 1
    section header table (8-aligned): null, note, data sections, .shstrtab

Every padding byte is zero, and there are no timestamps: the same inputs give the same bytes.
The reader accepts only that exact layout: after its own checks it rebuilds the file from
what it read and refuses any difference, so a changed byte anywhere is refused.

The native form (coppelius/host/build.py: link_host_executable) is the C host runtime linked by
zig cc around the same note and sections (ET_EXEC, with program headers). The reader finds them
by name there and checks every section against the note's digest; the code is the linker's. Its
section .coppelius_sha256 (32 bytes, not loaded) holds the sha256 of the whole file with those 32
bytes zero, written after the link: a changed byte of the code, the headers or the length is
refused too (by this reader, and by the runtime itself before it uses anything).
"""
import hashlib
import io
import json
import os
import platform
import re
import struct
import dataclasses
from dataclasses import dataclass

from elftools.elf.elffile import ELFFile

from coppelius.canonical import encode, sha256
from coppelius.errors import CoppeliusError, refuse
from coppelius.formats.publish import publish_bytes

MACHINES = {"x86_64": 62, "aarch64": 183}  # EM_X86_64, EM_AARCH64
_EM_NAMES = {"EM_X86_64": "x86_64", "EM_AARCH64": "aarch64"}  # pyelftools' names
FORMAT, VERSION = "coppelius-host-elf", 1
NOTE_SECTION, SECTION_PREFIX, NOTE_NAME = ".note.coppelius", ".coppelius.", b"Coppelius\0"
NT_IDENTITY, NT_IDENTITY_SHA256 = 1, 2
FILE_SECTION = ".coppelius_sha256"  # the native form's whole-file digest (not a .coppelius.NAME section)
DATA_ALIGN = 256
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}\Z")
_HEX = re.compile(r"[0-9a-f]{64}\Z")
_REBUILD = "rebuild it with `snakemake`"
_SHT = {"SHT_NULL": 0, "SHT_PROGBITS": 1, "SHT_STRTAB": 3, "SHT_NOTE": 7}


@dataclass(frozen=True)
class HostElf:
    machine: str                # a key of MACHINES
    identity: dict
    sections: dict              # name (without ".coppelius.") -> bytes
    digests: dict               # name -> sha256 hex, as recorded in the note
    sha256: str = ""            # of the whole file


def host_machine() -> str:
    """The MACHINES name of the host this runs on."""
    raw = platform.machine()
    name = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}.get(raw.lower())
    if name is None:
        raise refuse("platform.machine()", "host machine", raw, "run on an x86-64 or AArch64 host")
    return name


def _align(n: int, a: int) -> int:
    return -(-n // a) * a


def _pad4(b: bytes) -> bytes:
    return b + bytes(-len(b) % 4)


def _note(ntype: int, desc: bytes) -> bytes:
    return struct.pack("<III", len(NOTE_NAME), len(desc), ntype) + _pad4(NOTE_NAME) + _pad4(desc)


def identity_note(identity: dict, sections: dict) -> tuple[bytes, dict]:
    """The .note.coppelius bytes of these inputs and the sections as name -> bytes, sorted by name.

    The same note in both forms of the host ELF: the ET_REL container below and the native
    executable that coppelius/host/build.py links around it.
    """
    if not isinstance(identity, dict):
        raise refuse("host ELF", "identity", type(identity).__name__, "pass a dict")
    blobs = {}
    for name in sorted(sections):
        if not isinstance(name, str) or not _NAME.match(name):
            raise refuse("host ELF", "section name", name, "use letters, digits, '_', '.', '-'")
        if not isinstance(sections[name], (bytes, bytearray, memoryview)):
            raise refuse("host ELF", f"section {name}", type(sections[name]).__name__, "pass bytes")
        blobs[name] = bytes(sections[name])
    doc = {"format": FORMAT, "version": VERSION, "identity": identity,
           "sections": {n: sha256(b) for n, b in blobs.items()}}
    try:
        desc = encode(doc)
    except TypeError as e:
        raise refuse("host ELF", "identity", identity, f"{e}") from None
    return _note(NT_IDENTITY, desc) + _note(NT_IDENTITY_SHA256, hashlib.sha256(desc).digest()), blobs


def build_host_elf(machine: str, identity: dict, sections: dict) -> bytes:
    """The bytes of the host ELF for these inputs (what write_host_elf publishes)."""
    if machine not in MACHINES:
        raise refuse("host ELF", "machine", machine, f"use one of {sorted(MACHINES)}")
    note, blobs = identity_note(identity, sections)
    names = [NOTE_SECTION] + [SECTION_PREFIX + n for n in blobs] + [".shstrtab"]
    shstrtab, name_off = b"\0", []
    for n in names:
        name_off.append(len(shstrtab))
        shstrtab += n.encode() + b"\0"
    out = bytearray(64)
    headers = [bytes(64)]  # the null section

    def add(name_index, sh_type, payload, addralign):
        out.extend(bytes(_align(len(out), addralign) - len(out)))
        headers.append(struct.pack("<IIQQQQIIQQ", name_off[name_index], sh_type, 0, 0, len(out),
                                   len(payload), 0, 0, addralign, 0))
        out.extend(payload)

    add(0, _SHT["SHT_NOTE"], note, 4)
    for i, blob in enumerate(blobs.values(), 1):
        add(i, _SHT["SHT_PROGBITS"], blob, DATA_ALIGN)
    add(len(names) - 1, _SHT["SHT_STRTAB"], shstrtab, 1)
    shoff = _align(len(out), 8)
    out.extend(bytes(shoff - len(out)))
    for h in headers:
        out.extend(h)
    ident = b"\x7fELF" + bytes([2, 1, 1, 0, 0]) + bytes(7)  # ELF64, LSB, EV_CURRENT, SysV ABI
    out[0:64] = ident + struct.pack("<HHIQQQIHHHHHH", 1, MACHINES[machine], 1, 0, 0, shoff, 0,
                                    64, 0, 0, 64, len(headers), len(headers) - 1)
    return bytes(out)


def write_host_elf(path, machine: str, identity: dict, sections: dict) -> None:
    """Publish the host ELF at `path` atomically (temporary, fsync, rename, fsync directory)."""
    publish_bytes(path, build_host_elf(machine, identity, sections))


def read_host_elf(path) -> HostElf:
    """Read and verify a host ELF; anything malformed is a CoppeliusError naming what and where."""
    where = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise CoppeliusError(f"{where}: cannot read the host ELF ({e.strerror or e}); "
                             f"check the path, or {_REBUILD}") from None
    if data[:4] != b"\x7fELF":
        raise refuse(where, "ELF magic (first 4 bytes)", data[:4], f"this is not a host ELF; {_REBUILD}")
    try:
        return dataclasses.replace(_parse(where, data), sha256=sha256(data))
    except CoppeliusError:
        raise
    except Exception as e:  # pyelftools, struct, decoding: all are a malformed file
        raise refuse(where, "ELF structure", f"{type(e).__name__}: {e}"[:160], _REBUILD) from None


def _parse(where: str, data: bytes) -> HostElf:
    def bad(what, value, todo=_REBUILD):
        return refuse(where, what, value, todo)

    if len(data) < 64:
        raise bad("file length", len(data), f"shorter than an ELF header, so it is truncated; {_REBUILD}")
    if data[4] != 2:
        raise bad("ELF class (EI_CLASS)", data[4], f"a host ELF is ELF64 (2); {_REBUILD}")
    if data[5] != 1:
        raise bad("ELF data encoding (EI_DATA)", data[5], f"a host ELF is little-endian (1); {_REBUILD}")
    shoff, shentsize, count, shstrndx = struct.unpack_from("<Q10xHHH", data, 40)
    if shentsize != 64 or count < 3 or shoff + 64 * count > len(data):
        raise bad("section header table (e_shoff, e_shnum, e_shentsize)", (shoff, count, shentsize),
                  f"the file has {len(data)} bytes, so it is truncated or damaged; {_REBUILD}")
    try:
        elf = ELFFile(io.BytesIO(data))  # also reads the .shstrtab header (section e_shstrndx)
    except Exception as e:
        raise bad(f"section {shstrndx} (.shstrtab) header", f"{type(e).__name__}: {e}"[:120], _REBUILD) from None
    machine = _EM_NAMES.get(elf["e_machine"])
    if machine is None:
        raise bad("e_machine", elf["e_machine"], f"expected one of {sorted(_EM_NAMES)}; {_REBUILD}")
    if elf["e_type"] in ("ET_EXEC", "ET_DYN"):
        return _parse_executable(bad, elf, data, machine)
    if elf["e_type"] != "ET_REL":
        raise bad("e_type", elf["e_type"], f"a host ELF is ET_REL, ET_EXEC or ET_DYN; {_REBUILD}")
    if shstrndx != count - 1:
        raise bad("e_shstrndx", shstrndx, f"expected {count - 1}; {_REBUILD}")
    secs = []
    for i in range(count):
        try:
            secs.append(elf.get_section(i))
        except Exception as e:  # pyelftools follows links and names of a damaged header
            raise bad(f"section {i} header", f"{type(e).__name__}: {e}"[:120], _REBUILD) from None
    expect = [("SHT_NULL", "", 0)] + [("SHT_NOTE", NOTE_SECTION, 4)] + \
        [("SHT_PROGBITS", None, DATA_ALIGN)] * (count - 3) + [("SHT_STRTAB", ".shstrtab", 1)]
    for i, (s, (sh_type, name, addralign)) in enumerate(zip(secs, expect)):
        label = f"section {i} ({s.name!r})"
        if s["sh_type"] != sh_type:
            raise bad(f"{label} sh_type", s["sh_type"], f"expected {sh_type}; {_REBUILD}")
        if name is None:
            ok = s.name.startswith(SECTION_PREFIX) and _NAME.match(s.name[len(SECTION_PREFIX):])
        else:
            ok = s.name == name
        if not ok:
            raise bad(f"section {i} name in .shstrtab", s.name,
                      f"expected {SECTION_PREFIX + 'NAME' if name is None else repr(name)}; {_REBUILD}")
        for field in ("sh_flags", "sh_addr", "sh_link", "sh_info", "sh_entsize"):
            if s[field] != 0:
                raise bad(f"{label} {field}", s[field], f"expected 0; {_REBUILD}")
        if i and (s["sh_addralign"] != addralign or s["sh_offset"] % addralign):
            raise bad(f"{label} alignment (sh_addralign, sh_offset)", (s["sh_addralign"], s["sh_offset"]),
                      f"expected offsets aligned to {addralign}; {_REBUILD}")
        if s["sh_offset"] + s["sh_size"] > len(data):
            raise bad(f"{label} extent (sh_offset + sh_size)", s["sh_offset"] + s["sh_size"],
                      f"the file has {len(data)} bytes, so it is truncated; {_REBUILD}")
    doc = _read_note(bad, secs[1].data())
    names = [s.name[len(SECTION_PREFIX):] for s in secs[2:-1]]
    if names != sorted(set(names)) or set(names) != set(doc["sections"]):
        raise bad(".shstrtab section names", names, f"expected the sorted names {sorted(doc['sections'])} "
                  f"listed in {NOTE_SECTION}; {_REBUILD}")
    sections = _checked_sections(bad, doc, {name: (s.data(), s["sh_size"]) for name, s in zip(names, secs[2:-1])})
    rebuilt = build_host_elf(machine, doc["identity"], sections)
    if rebuilt != data:
        at = next((i for i, (a, b) in enumerate(zip(data, rebuilt)) if a != b), min(len(data), len(rebuilt)))
        region = "the ELF header" if at < 64 else "padding"
        for s in secs[1:]:
            if s["sh_offset"] <= at < s["sh_offset"] + s["sh_size"]:
                region = f"section {s.name}"
        if shoff <= at < shoff + 64 * count:
            region = f"the section header table (entry {(at - shoff) // 64})"
        raise bad(f"byte at offset {at} (in {region})", data[at:at + 1],
                  f"expected {rebuilt[at:at + 1]!r} by the canonical layout of {len(rebuilt)} bytes; {_REBUILD}")
    return HostElf(machine, doc["identity"], sections, dict(doc["sections"]))


def _checked_sections(bad, doc: dict, found: dict) -> dict:
    """name -> bytes of the sections found (name -> (data, sh_size)), each equal to the note's digest."""
    sections = {}
    for name, (blob, size) in found.items():
        if len(blob) != size or sha256(blob) != doc["sections"][name]:
            raise bad(f"section {SECTION_PREFIX}{name} sha256", sha256(blob)[:16], f"{NOTE_SECTION} "
                      f"records {doc['sections'][name][:16]}: the section or the note is damaged; {_REBUILD}")
        sections[name] = blob
    return sections


def _parse_executable(bad, elf, data: bytes, machine: str) -> HostElf:
    """A native host ELF (coppelius/host/build.py: the C runtime linked around the same note and
    sections): the note and each .coppelius.NAME section found by name and checked against its digest.
    The runtime's code is not covered by the note; the runtime verifies the same digests itself."""
    if elf["e_phnum"] == 0 or elf["e_entry"] == 0:
        raise bad("e_type", elf["e_type"], f"an executable host ELF has program headers and an entry point; {_REBUILD}")
    note, found = None, {}
    for i in range(elf.num_sections()):
        try:
            s = elf.get_section(i)
            name = s.name
        except Exception as e:  # pyelftools follows links and names of a damaged header
            raise bad(f"section {i} header", f"{type(e).__name__}: {e}"[:120], _REBUILD) from None
        if name != NOTE_SECTION and not name.startswith(SECTION_PREFIX):
            continue
        if s["sh_type"] != ("SHT_NOTE" if name == NOTE_SECTION else "SHT_PROGBITS"):
            raise bad(f"section {i} ({name!r}) sh_type", s["sh_type"], _REBUILD)
        if s["sh_offset"] + s["sh_size"] > len(data):
            raise bad(f"section {i} ({name!r}) extent (sh_offset + sh_size)", s["sh_offset"] + s["sh_size"],
                      f"the file has {len(data)} bytes, so it is truncated; {_REBUILD}")
        short = name[len(SECTION_PREFIX):]
        if name == NOTE_SECTION and note is None:
            note = s.data()
        elif name != NOTE_SECTION and _NAME.match(short) and short not in found:
            found[short] = (s.data(), s["sh_size"])
        else:
            raise bad(f"section {i} name", name, f"a host ELF has one {NOTE_SECTION} and one section of each name; "
                      f"{_REBUILD}")
    if note is None:
        raise bad(NOTE_SECTION, "missing", f"this is not a host ELF; {_REBUILD}")
    doc = _read_note(bad, note)
    if set(found) != set(doc["sections"]):
        raise bad(".coppelius sections", sorted(found), f"expected {sorted(doc['sections'])} as listed in "
                  f"{NOTE_SECTION}; {_REBUILD}")
    checked = _checked_sections(bad, doc, found)
    _check_file_digest(bad, elf, data)
    return HostElf(machine, doc["identity"], checked, dict(doc["sections"]))


def file_digest_extent(elf: ELFFile) -> tuple[int, int] | None:
    """(file offset, size) of the native host ELF's .coppelius_sha256 section, or None."""
    section = elf.get_section_by_name(FILE_SECTION)
    return None if section is None else (section["sh_offset"], section["sh_size"])


def file_digest(data: bytes, offset: int) -> bytes:
    """The sha256 of the file with its 32 digest bytes at `offset` taken as zero."""
    view = memoryview(data)
    digest = hashlib.sha256(view[:offset])
    digest.update(bytes(32))
    digest.update(view[offset + 32:])
    return digest.digest()


def _check_file_digest(bad, elf, data: bytes) -> None:
    extent = file_digest_extent(elf)
    if extent is None or extent[1] != 32 or extent[0] + 32 > len(data):
        raise bad(FILE_SECTION, "missing" if extent is None else extent,
                  f"a native host ELF records its whole file's sha256 in 32 bytes there; {_REBUILD}")
    recorded, got = data[extent[0]:extent[0] + 32], file_digest(data, extent[0])
    if recorded != got:
        raise bad(f"whole-file sha256 ({FILE_SECTION} taken as zero)", got.hex()[:16],
                  f"{FILE_SECTION} records {recorded.hex()[:16]}: the file is damaged (its code, headers or length "
                  f"changed since the build); copy it again, or {_REBUILD}")


def _read_note(bad, raw: bytes) -> dict:
    records, pos = [], 0
    while pos < len(raw):
        if pos + 12 > len(raw):
            raise bad(f"{NOTE_SECTION} record header at byte {pos}", raw[pos:], f"the note is truncated; {_REBUILD}")
        namesz, descsz, ntype = struct.unpack_from("<III", raw, pos)
        name_end = pos + 12 + _align(namesz, 4)
        end = name_end + _align(descsz, 4)
        if end > len(raw):
            raise bad(f"{NOTE_SECTION} record size (namesz, descsz)", (namesz, descsz),
                      f"the note is damaged; {_REBUILD}")
        records.append((raw[pos + 12:pos + 12 + namesz], ntype, raw[name_end:name_end + descsz]))
        pos = end
    if [(n, t) for n, t, _ in records] != [(NOTE_NAME, NT_IDENTITY), (NOTE_NAME, NT_IDENTITY_SHA256)]:
        raise bad(f"{NOTE_SECTION} records (name, type)", [(n, t) for n, t, _ in records],
                  f"expected {NOTE_NAME!r} types 1 and 2; {_REBUILD}")
    desc, recorded = records[0][2], records[1][2]
    if hashlib.sha256(desc).digest() != recorded:
        raise bad(f"{NOTE_SECTION} descriptor sha256", sha256(desc)[:16],
                  f"the note records {recorded.hex()[:16]}: the note is damaged; {_REBUILD}")
    try:
        doc = json.loads(desc.decode("utf-8"))
        canonical = isinstance(doc, dict) and encode(doc) == desc
    except (ValueError, TypeError, RecursionError) as e:
        raise bad(f"{NOTE_SECTION} JSON", f"{type(e).__name__}: {e}"[:120], _REBUILD) from None
    if not canonical or sorted(doc) != ["format", "identity", "sections", "version"]:
        raise bad(f"{NOTE_SECTION} JSON", desc[:80], f"expected the canonical identity note; {_REBUILD}")
    if doc["format"] != FORMAT or type(doc["version"]) is not int or doc["version"] != VERSION:
        raise bad(f"{NOTE_SECTION} format and version", (doc["format"], doc["version"]),
                  f"this Coppelius reads {FORMAT} version {VERSION}; {_REBUILD}")
    if not isinstance(doc["identity"], dict) or not isinstance(doc["sections"], dict) or not all(
            _NAME.match(k) and isinstance(v, str) and _HEX.match(v) for k, v in doc["sections"].items()):
        raise bad(f"{NOTE_SECTION} identity and sections", desc[:80], f"expected dicts of names; {_REBUILD}")
    return doc


def describe(path) -> list:
    """Lines for `coppelius inspect`: machine, identity fields, one line per section."""
    elf = read_host_elf(path)
    lines = [f"machine: {elf.machine} (e_machine {MACHINES[elf.machine]})"]
    for key in sorted(elf.identity):
        value = elf.identity[key]
        lines.append(f"identity.{key}: {value if isinstance(value, str) else encode(value).decode()}")
    for name in sorted(elf.sections):
        lines.append(f"section {SECTION_PREFIX}{name}: {len(elf.sections[name])} bytes, "
                     f"sha256 {elf.digests[name][:16]}")
    return lines
