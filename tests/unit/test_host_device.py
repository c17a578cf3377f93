"""The C cpu device and host-program walker (coppelius/host: device_cpu.c, program.c, tables.c) on
tables packed here byte for byte as docs/formats.md lays them out, run as a real program
(tests/unit/host_device_driver.c). The walker must yield what the document's walker yields; the
device must compute what the numpy reference does and refuse any entry outside its arena in one line."""
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from admission_cases import base
from coppelius.admit.common import Realized, command_accesses
from coppelius.formats import tables
from coppelius.formats.elf import host_machine
from coppelius.host.build import HOST_DIR, compile_program
from coppelius.kernels import reference as ref
from coppelius.formats.step_size import step_size_host

OPS = {name: code for code, name in enumerate(
    ["submit", "reissue", "repeat", "read", "read-at-cursor", "cursor-from-checkpoint", "cursor-advance",
     "adamw-scalars", "write", "fill", "checkpoint-begin", "checkpoint-publish", "record-stat", "write-status",
     "write-timestamps", "operation", "end"], start=1)}
MAGICS = {"launches": b"COPLNCH\0", "relocations": b"COPRELO\0", "commands": b"COPCMDS\0", "ring": b"COPRING\0",
          "step_words": b"COPSTEP\0", "planes": b"COPPLAN\0", "buffers": b"COPBUFS\0", "program": b"COPHPRG\0"}
RECORDS = {"launches": "<I3I3IIIIIII", "relocations": "<IIQ", "commands": "<IIIIQQQII", "ring": "<III",
           "step_words": "<IIIIII", "planes": "<QQII", "buffers": "<QQ", "program": "<IIIIQQQII"}
KERNEL_IDS = {"adamw": 0, "residual_forward": 17}


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    out = tmp_path_factory.mktemp("device") / "driver"
    sources = [p for p in sorted(HOST_DIR.glob("*.c")) if p.name != "main.c"]
    compile_program(host_machine(), sources + [Path(__file__).with_name("host_device_driver.c")], out,
                    include_dirs=[HOST_DIR])
    return str(out)


def _table(kind: str, rows: list, blob: bytes = b"") -> bytes:
    record = struct.Struct(RECORDS[kind])
    header = struct.pack("<IIQ", tables.VERSION, len(rows), len(blob))
    return MAGICS[kind] + header + b"".join(record.pack(*r) for r in rows) + blob


def _step(op, ring=0, buffer=0, file=0, count=0, offset=0, bytes=0, value=0, body=0):
    return (OPS[op], ring, buffer, file, count, offset, bytes, value, body)


def _document_walk(program, predict):
    """docs/formats.md's walker, transcribed."""
    out = []

    def walk(pc, end):
        while pc < end:
            op, body, count = program[pc][0], program[pc][8], program[pc][4]
            if op == OPS["repeat"]:
                for _ in range(count):
                    if walk(pc + 1, pc + 1 + body):
                        return True
                pc += 1 + body
                continue
            if op == OPS["end"]:
                return True
            out.append(program[pc])
            pc += 1 + (body if op == OPS["operation"] and predict else 0)
        return False
    walk(0, len(program))
    return out


PROGRAM = [_step("fill", buffer=1, bytes=16), _step("submit", ring=0), _step("operation", body=11),
           _step("cursor-from-checkpoint"), _step("repeat", count=2, body=6), _step("repeat", count=3, body=3),
           _step("read-at-cursor", buffer=1, count=5), _step("adamw-scalars"), _step("submit", ring=1),
           _step("checkpoint-begin"), _step("write", buffer=0, bytes=64, offset=2 ** 64 - 1, file=1),
           _step("checkpoint-publish"), _step("write-status"), _step("end"),
           _step("repeat", count=2, body=2), _step("record-stat", value=3), _step("cursor-advance", count=7),
           _step("write-timestamps"), _step("end")]


@pytest.mark.parametrize("operation", ["train", "predict"])
def test_the_walker_yields_what_the_document_s_walker_yields(driver, tmp_path, operation):
    (tmp_path / "program.bin").write_bytes(_table("program", PROGRAM))
    run = subprocess.run([driver, "walk", str(tmp_path), operation, "2", "2"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    names = {code: name for name, code in OPS.items()}
    expected = [" ".join([names[s[0]], *map(str, s[1:])]) for s in _document_walk(PROGRAM, operation == "predict")]
    assert run.stdout.splitlines() == expected and len(expected) > 6


@pytest.mark.parametrize("bad, named", [(_step("submit", ring=2), "ring is 2"), (_step("fill", buffer=6),
        "buffer is 6"),
                                        (_step("repeat", count=1, body=5), "body is 5"), ((99, 0, 0, 0, 0, 0, 0, 0, 0),
                                                "op is 99"),
                                        (_step("record-stat", value=5), "stat kind"),
                                        (_step("record-stat", value=1, buffer=6), "buffer is 6")])
def test_a_malformed_program_is_refused_in_one_line(driver, tmp_path, bad, named):
    (tmp_path / "program.bin").write_bytes(_table("program", [_step("fill", buffer=1), bad, _step("end")]))
    run = subprocess.run([driver, "walk", str(tmp_path), "train", "2", "2"], capture_output=True, text=True)
    assert run.returncode == 1 and named in run.stderr and "step 1" in run.stderr and run.stderr.count("\n") == 1


# The arena: planes a, b, out (64 halves each), then adamw's params, m, v (f32), grads, half (f16), flag (i32).
N, M = 64, 16
PLANES = [(0, 128, 1, 1), (256, 128, 1, 1), (512, 128, 1, 1), (768, 64, 2, 0), (1024, 64, 2, 0), (1280, 64, 2, 0),
          (1536, 32, 1, 1), (1792, 32, 1, 0), (2048, 4, 3, 1)]
ARENA, HOST = 2304, 1024
BUFFERS = [(0, 512), (512, 512)]


def _tables(tmp_path, overrides=None):
    """Ring 0: copy a, b in, out = a + b (residual_forward), copy out back; ring 1: memset and a
    device copy; ring 2: adamw over M parameters with its step word; ring 3: params and grads in."""
    blob, launches, relocations = bytearray(), [], []

    def launch(kernel, pointers, scalars, words):
        start = len(blob)
        block = bytearray(b"".join(struct.pack("<Q", PLANES[p][0]) for p in pointers) + scalars)
        block += bytes(-len(block) % 8)
        for i, p in enumerate(pointers):
            relocations.append((start + 8 * i, p, 0))
        launches.append((KERNEL_IDS[kernel], 1, 1, 1, 1, 1, 1, 0, start, len(block), len(relocations) - len(pointers),
                         len(pointers), 1))
        blob.extend(block)
        return start + words
    launch("residual_forward", [2, 0, 1], struct.pack("<i", N), 0)
    step_size_at = launch("adamw", [3, 4, 5, 6, 7, 8], struct.pack("<iffff", M, 0.9, 0.95, 3e-4, 0.0) +
                          struct.pack("<f", 1e-5), 8 * 6 + 16)
    commands = [(2, 0, 0, 0, 0, 0, 128, 0, 0), (2, 0, 0, 1, 128, 0, 128, 0, 0), (0, 0, 0, 0, 0, 0, 0, 0, 0),
                (3, 0, 2, 0, 0, 256, 128, 0, 0),
                (1, 0, 0, 2, 0, 0, 128, 7, 0), (4, 0, 0, 2, 0, 16, 32, 0, 0), (3, 0, 2, 1, 0, 0, 128, 0, 0),
                (0, 1, 0, 0, 0, 0, 0, 0, 0),
                (2, 0, 0, 3, 0, 0, 4 * M, 0, 0), (2, 0, 0, 6, 4 * M, 0, 2 * M, 0, 0)]
    tables = {"launches": _table("launches", launches, bytes(blob)), "relocations": _table("relocations", relocations),
              "commands": _table("commands", commands), "ring": _table("ring", [(0, 0, 4), (1, 4, 3), (2, 7, 1), (3, 8,
                      2)]),
              "step_words": _table("step_words", [(1, step_size_at, step_size_at + 4, 0, 0, 0)]),
              "planes": _table("planes", PLANES), "buffers": _table("buffers", BUFFERS)}
    tables.update(overrides or {})
    for name, data in tables.items():
        (tmp_path / f"{name}.bin").write_bytes(data)


def _issue(driver, tmp_path, host: bytes, step_size: str, *rings, arena=ARENA):
    (tmp_path / "host.bin").write_bytes(host)
    return subprocess.run([driver, "issue", str(tmp_path), str(arena), str(HOST), step_size, *map(str, rings)],
                          capture_output=True, text=True)


def test_the_device_runs_copies_and_kernels(driver, tmp_path):
    _tables(tmp_path)
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal(N).astype(np.float16), rng.standard_normal(N).astype(np.float16)
    run = _issue(driver, tmp_path, a.tobytes() + b.tobytes() + bytes(HOST - 256), "-", 0, 1)
    assert run.returncode == 0, run.stderr
    host, arena = (tmp_path / "host.out").read_bytes(), (tmp_path / "arena.out").read_bytes()
    total = (a.astype(np.float32) + b.astype(np.float32)).astype(np.float16)
    assert np.frombuffer(host[256:384], np.float16).tobytes() == total.tobytes()  # ring 0's copy back
    expected = bytearray([7] * 128)
    expected[16:48] = a.tobytes()[:32]  # ring 1: memset 7, then a's first 32 bytes at offset 16
    assert host[512:640] == bytes(expected) and arena[512:640] == bytes(expected)


def test_the_step_word_is_patched_before_adamw(driver, tmp_path):
    _tables(tmp_path)
    rng = np.random.default_rng(4)
    params, grads = rng.standard_normal(M).astype(np.float32), rng.standard_normal(M).astype(np.float16)
    host = params.tobytes() + grads.tobytes() + bytes(HOST - 6 * M)
    for word in ("0.00125", "0.5"):
        run = _issue(driver, tmp_path, host, word, 3, 2)
        assert run.returncode == 0, run.stderr
        arena = (tmp_path / "arena.out").read_bytes()
        zero = np.zeros(M, np.float32)
        new, m, v = ref.adamw(params, zero, zero, grads.astype(np.float32), np.float32(word), np.float32(1e-5),
                              0.9, 0.95, 3e-4)
        assert np.frombuffer(arena[768:768 + 4 * M], np.float32).tobytes() == new.tobytes()
        assert np.frombuffer(arena[1024:1024 + 4 * M], np.float32).tobytes() == m.tobytes()
        assert np.frombuffer(arena[1792:1792 + 2 * M], np.float16).tobytes() == new.astype(np.float16).tobytes()


@pytest.mark.parametrize("table, rows, named", [
    ("relocations", [(0, 9, 0)], "relocation 0"),
    ("relocations", [(4000, 0, 0)], "relocation 0"),
    ("commands", [(2, 0, 0, 0, 0, 0, 4096, 0, 0)], "command 0"),
    ("commands", [(1, 0, 0, 12, 0, 0, 8, 0, 0)], "command 0"),
    ("commands", [(0, 5, 0, 0, 0, 0, 0, 0, 0)], "command 0"),
    ("commands", [(3, 0, 2, 1, 0, 500, 128, 0, 0)], "command 0"),
    ("commands", [(1, 0, 0, 2, 0, 0, 8, 0, 1)], "command 0 (op 1) has flags 0x1"),
    ("commands", [(0, 0, 0, 0, 0, 0, 0, 0, 2)], "command 0 (op 0) has flags 0x2"),
    ("ring", [(0, 0, 99)], "ring entry 0"),
    ("planes", PLANES[:-1] + [(2048, 4096, 3, 1)], "plane 8"),
    ("step_words", [(1, 10 ** 6, 0, 0, 0, 0)], "step word 0"),
])
def test_entries_outside_the_arena_or_tables_are_refused_at_load(driver, tmp_path, table, rows, named):
    _tables(tmp_path, {table: _table(table, rows)})
    run = _issue(driver, tmp_path, bytes(HOST), "-")
    assert run.returncode == 1 and named in run.stderr and run.stderr.count("\n") == 1, run.stderr


def test_a_programmatic_launch_must_follow_a_launch_in_its_ring_entry(driver, tmp_path):
    """The kernel of a programmatic launch waits for the launch before it (launch.cuh), so the tables may mark only a
    launch that follows a launch; ring 0's launch follows two copies."""
    _tables(tmp_path)
    commands, _ = tables.unpack("commands", (tmp_path / "commands.bin").read_bytes())
    commands = commands.copy()
    commands["flags"][2] = tables.COMMAND_PROGRAMMATIC
    (tmp_path / "commands.bin").write_bytes(tables.pack("commands", commands))
    run = _issue(driver, tmp_path, bytes(HOST), "-")
    assert run.returncode == 1 and run.stderr.count("\n") == 1, run.stderr
    assert "command 2 is a programmatic launch, but after a copy or memset in ring entry 0" in run.stderr


def test_a_launch_whose_buffers_leave_the_arena_or_clusters_the_grid_badly_is_refused_at_load(driver, tmp_path):
    _tables(tmp_path)
    run = _issue(driver, tmp_path, bytes(HOST), "-", arena=1100)  # planes past 1100 bytes
    assert run.returncode == 1 and "outside the" in run.stderr and run.stderr.count("\n") == 1
    bad = bytearray((tmp_path / "launches.bin").read_bytes())
    for cluster, grid in ((3, 1), (17, 17)):  # a cluster must divide the grid and hold at most 16 blocks
        clustered = bytearray(bad)
        struct.pack_into("<I", clustered, 24 + 4, grid)
        struct.pack_into("<I", clustered, 24 + 48, cluster)
        (tmp_path / "launches.bin").write_bytes(clustered)
        run = _issue(driver, tmp_path, bytes(HOST), "-")
        assert run.returncode == 1 and run.stderr.count("\n") == 1, run.stderr
        assert f"launch 0 (residual_forward) has clusters of {cluster} blocks over a grid of {grid}" in run.stderr
    bad[:8] = b"COPLNCX\0"
    (tmp_path / "launches.bin").write_bytes(bad)
    run = _issue(driver, tmp_path, bytes(HOST), "-")
    assert run.returncode == 1 and "table magic" in run.stderr


@pytest.mark.parametrize("lr, beta1, beta2", [("3/1000", "9/10", "95/100"), ("6/10000", "9/10", "999/1000")])
def test_the_step_size_rule_gives_the_python_host_s_bits(driver, lr, beta1, beta2):
    from fractions import Fraction
    lr, beta1, beta2 = (float(Fraction(x)) for x in (lr, beta1, beta2))
    steps = [1, 2, 3, 10, 99, 1000, 4097, 10 ** 6]
    run = subprocess.run([driver, "step-size", repr(lr), repr(beta1), repr(beta2), *map(str, steps)],
                         capture_output=True, text=True, check=True)
    assert run.stdout.split() == [f"{int(step_size_host(lr, beta1, beta2, t).view(np.uint32)):08x}" for t in steps]


def _waits(driver, tmp_path, arena=ARENA, host=HOST) -> dict[int, list[list[int]]]:
    run = subprocess.run([driver, "waits", str(tmp_path), str(arena), str(host)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    entries: dict[int, list[list[int]]] = {}
    for line in run.stdout.splitlines():
        head, _, waits = line.partition(":")
        entry, command = map(int, head.split())
        assert command == len(entries.setdefault(entry, []))
        entries[entry].append([int(w) for w in waits.split()])
    return entries


def test_each_command_waits_for_the_commands_whose_bytes_it_shares(driver, tmp_path):
    _tables(tmp_path)
    assert _waits(driver, tmp_path) == {
        0: [[], [], [0, 1], [2]],  # a and b in side by side; the add after both; out back after the add
        1: [[], [0], [1]],  # the memset, the device copy over part of it, the copy of the plane back
        2: [[]],
        3: [[], []],  # two copies to two planes from two host ranges
    }


def _brute_force_waits(ranges: list[list[tuple]]) -> list[list[int]]:
    """Each command's waits as waits.h defines them, by brute force: the pairs that share a byte one of them writes,
    less those a path through other such pairs implies. ranges: per command (space, start, end, writes)."""
    n = len(ranges)
    share = np.zeros((n, n), bool)  # share[j, i]: j < i and they share a written byte
    for i in range(n):
        for j in range(i):
            share[j, i] = any(a[0] == b[0] and (a[3] or b[3]) and a[1] < b[2] and b[1] < a[2]
                              for a in ranges[j] for b in ranges[i])
    reach = share.copy()  # reach[j, i]: a path of shared bytes from j to i
    waits = []
    for i in range(n):
        implied = (reach[:, :i].astype(np.int64) @ share[:i, i].astype(np.int64)) > 0
        reach[:, i] |= implied
        waits.append([j for j in range(i) if share[j, i] and not implied[j]])
    return waits


def test_the_waits_of_a_real_h200_plan_are_the_shared_bytes_transitive_reduction(driver, tmp_path):
    """tiny on the h200 target as the workflow plans it: the C waits against a brute force over admission's own
    reading of each command's accesses (admit/common.py), plus each copy's host side."""
    case = base("h200")
    r = Realized(case.plan, case.realization)
    for name in ("launches", "relocations", "commands", "ring", "planes", "buffers"):
        (tmp_path / f"{name}.bin").write_bytes(case.realization[name])
    (tmp_path / "step_words.bin").write_bytes(case.realized["step_words"])
    planes = {p["name"]: p["offset"] for p in case.plan["arena"]["planes"]}
    buffers = case.plan["host"]["buffers"]

    def ranges(c: dict) -> list[tuple]:
        out = [("d", planes[ref["plane"]] + ref["offset"], planes[ref["plane"]] + ref["offset"] + n, mode != "r")
               for _, mode, ref, n in command_accesses(c) if n]
        for side, writes in (("src", False), ("dst", True)):
            ref = c.get(side)
            if isinstance(ref, dict) and "buffer" in ref and c["bytes"]:
                at = buffers[ref["buffer"]]["offset"] + ref["offset"]
                out.append(("h", at, at + c["bytes"], writes))
        return out
    got = _waits(driver, tmp_path, case.plan["arena"]["bytes"], case.plan["host"]["bytes"])
    side_by_side = 0
    for e, entry in enumerate(r.ring):
        commands = [r.command(int(entry["offset"]) + k) for k in range(int(entry["length"]))]
        assert got[e] == _brute_force_waits([ranges(c) for c in commands]), f"ring entry {e}"
        for k in range(1, len(commands)):
            weight_gradient_then_input_gradient = (commands[k - 1].get("kernel") == "matmul_backward_weight" and
                                                   commands[k].get("kernel", "").startswith("matmul_backward_input"))
            side_by_side += weight_gradient_then_input_gradient and k - 1 not in got[e][k]
        # the launches that share the tile counter (formats/kernels.py) never run side by side: each waits, through
        # the waits' chain, for every one before it
        before = []
        for k in range(len(commands)):
            before.append(set(got[e][k]).union(*(before[j] for j in got[e][k])))
        counted = [k for k, c in enumerate(commands) if c.get("kernel", "").startswith("matmul_backward_input")]
        for a, b in zip(counted, counted[1:]):
            assert a in before[b], f"ring entry {e}: command {b} may run beside command {a}, which shares its counter"
    assert side_by_side > 0, "no input gradient runs beside the weight gradient before it"
