"""What the admission checks share: the refusal, byte-interval sets, the plan's planes, pieces and
launches indexed, the realization's tables decoded back into the plan's command vocabulary, and
the host program expanded exactly as the interpreter (tests/reference_host/interpreter.py) runs it.
"""
import math

import numpy as np

from ..errors import CoppeliusError
from ..formats import tables
from ..formats.kernels import KERNEL_NAMES, KERNELS, PTR_KINDS, access, extents, param_layout
from ..formats.program import OPERATIONS, check_program, walk
from ..model import DIMENSIONS, Model

OP_NAMES = tables.OP_NAMES
COMMAND_PROGRAMMATIC = tables.COMMAND_PROGRAMMATIC
# generate repeats its body once per new token, a number the run is given: admission traces two,
# the least that shows one token's steps following another's (every later one repeats the second)
TRACED_NEW_TOKENS = 2


class Refusal(Exception):
    """A check failed; the message names the item (launch, plane, step, offset)."""


# ---------------------------------------------------------------------------- byte intervals
# A set of bytes is a sorted tuple of disjoint, non-adjacent half-open (start, end) pairs.

def iv_add(s: tuple, a: int, b: int) -> tuple:
    if a >= b:
        return s
    out, placed = [], False
    for x, y in s:
        if y < a:
            out.append((x, y))
        elif b < x:
            if not placed:
                out.append((a, b))
                placed = True
            out.append((x, y))
        else:
            a, b = min(a, x), max(b, y)
    if not placed:
        out.append((a, b))
    return tuple(out)


def iv_remove(s: tuple, a: int, b: int) -> tuple:
    if a >= b:
        return s
    out = []
    for x, y in s:
        if y <= a or b <= x:
            out.append((x, y))
            continue
        if x < a:
            out.append((x, a))
        if b < y:
            out.append((b, y))
    return tuple(out)


def iv_gap(s: tuple, a: int, b: int) -> tuple[int, int] | None:
    """The first sub-range of [a, b) not in s, or None when s covers it."""
    at = a
    for x, y in s:
        if y <= at:
            continue
        if x > at:
            return at, min(x, b)
        at = y
        if at >= b:
            return None
    return (at, b) if at < b else None


def iv_overlap(s: tuple, a: int, b: int) -> tuple[int, int] | None:
    """The first sub-range of [a, b) that is in s, or None."""
    for x, y in s:
        lo, hi = max(x, a), min(y, b)
        if lo < hi:
            return lo, hi
    return None


# ---------------------------------------------------------------------------- the plan, indexed
def model_of(plan: dict) -> Model:
    """The model, from the plan's dimensions only: what admission recomputes the rest from."""
    return Model(**{k: plan["model"][k] for k in DIMENSIONS})


def parameter_count(plan: dict) -> int:
    """The model's parameter count, recomputed from its dimensions (not read from the plan)."""
    return model_of(plan).parameter_count


def tensor_table(plan: dict) -> list[dict]:
    """The plan's parameter tensors, refused unless they are the model's (names, shapes, decay, in llm.c's
    order), their payload offsets tile the checkpoint's parts in that order, and their plane offsets tile the
    weight planes (any order: the plan groups them for the update)."""
    table, payload = list(plan["tensors"]), 0
    want = model_of(plan).tensors()
    if [t["name"] for t in table] != [name for name, _, _ in want]:
        raise Refusal(f"the plan's tensors {[t['name'] for t in table]} are not the model's, in llm.c's order "
                      f"{[name for name, _, _ in want]}")
    for t, (name, shape, decay) in zip(table, want):
        count = math.prod(shape)
        if (t["shape"], t["count"], t["decay"], t["payload_offset"]) != (list(shape), count, decay, payload):
            raise Refusal(f"tensor {name}: shape {t['shape']}, count {t['count']}, decay {t['decay']}, payload offset "
                          f"{t['payload_offset']}; the model's is {list(shape)}, {count}, {decay}, {payload}")
        payload += count
    at = 0
    for t in sorted(table, key=lambda t: t["offset"]):
        if t["offset"] != at:
            raise Refusal(f"tensor {t['name']} starts at element {t['offset']} of the weight planes; the tensors tile "
                          f"them without gaps or overlaps, so the next starts at {at}")
        at += t["count"]
    return table


def names_of(plan: dict) -> list[str]:
    """The ring's piece names, refusing a ring that is not the pieces in order or names one twice."""
    names = plan["ring"]
    if names != [p["name"] for p in plan["pieces"]]:
        raise Refusal(f"the ring {names} is not the pieces in order {[p['name'] for p in plan['pieces']]}")
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise Refusal(f"two ring entries are named {dup!r}")
    return names


def planes_by_name(plan: dict) -> dict:
    return {p["name"]: p for p in plan["arena"]["planes"]}


def plane_range(planes: dict, ref, nbytes: int, what: str) -> tuple[dict, int, int]:
    """(plane, start, end) of a device reference, refusing one outside its plane."""
    if not isinstance(ref, dict) or ref.get("plane") not in planes:
        raise Refusal(f"{what}: device reference {ref!r} names no plane of the arena")
    plane, start = planes[ref["plane"]], ref["offset"]
    if not (isinstance(start, int) and isinstance(nbytes, int)) or start < 0 or nbytes < 0 or \
            start + nbytes > plane["bytes"]:
        raise Refusal(f"{what}: bytes [{start}, {start + nbytes}) outside plane {plane['name']} "
                      f"({plane['bytes']} bytes)")
    return plane, start, start + nbytes


GENERATE_PIECES = ("sample_forward", "sample")  # the pieces generate issues a new token, and only generate
# The update pieces by name: (the host buffer each takes its context from, the one it copies its losses to)
UPDATES = {name: (context, losses) for name, context, losses in tables.UPDATE_PIECES}


def piece_class(name: str) -> str | None:
    """The lifetime a piece belongs to (plan/arena.py): step planes live within a forward or update
    submission and the restore right after it; transfer planes within the load and gather pieces; the cast of
    the weights touches persistent planes only."""
    if name == "initialize":
        return "init"
    if name == "cast_weights":
        return "persistent"
    if name.startswith(("load_stage_", "load_scatter_", "gather_")):
        return "transfer"
    if name in ("forward", *UPDATES, "sample_forward"):
        return "step"
    if name in ("restore", "sample"):
        return "restore"
    return None


def launch_numbers(plan: dict) -> list[list[int | None]]:
    """For every piece, each command's index in the launch table (None for copies), as realized."""
    numbers, n = [], 0
    for piece in plan["pieces"]:
        row = []
        for c in piece["commands"]:
            row.append(n if c["op"] == "launch" else None)
            n += c["op"] == "launch"
        numbers.append(row)
    return numbers


def launch_accesses(kernel: str, args: list) -> list[tuple[str, str, dict, int]]:
    """[(argument, mode r|w|rw, plane reference, bytes)] of a launch's non-null pointers, by the
    catalog's ACCESS and extents. matmul_backward_weight with accumulate reads its dweight too."""
    if kernel not in KERNELS:
        raise Refusal(f"kernel {kernel!r} is not in the catalog")
    params = KERNELS[kernel]
    if not isinstance(args, list) or len(args) != len(params):
        raise Refusal(f"kernel {kernel}: {len(args) if isinstance(args, list) else args!r} arguments, "
                      f"the catalog has {len(params)}")
    named = dict(zip((n for n, _ in params), args))
    scalars = {n: v for (n, k), v in zip(params, args) if k in ("i32", "u32")}
    if any(not isinstance(v, int) for v in scalars.values()):
        raise Refusal(f"kernel {kernel}: integer arguments {scalars} are not all integers")
    sizes = extents(kernel, scalars)
    out = []
    for name, kind in params:
        if kind not in PTR_KINDS or named[name] is None:
            continue
        out.append((name, access(kernel, name, scalars), named[name], sizes[name] * np.dtype(PTR_KINDS[kind]).itemsize))
    return out


def command_accesses(c: dict) -> list[tuple[str, str, dict, int]]:
    """[(what, mode, device reference, bytes)] of every device range a command touches."""
    op = c["op"]
    if op == "launch":
        return launch_accesses(c["kernel"], c["args"])
    if op == "memset":
        return [("dst", "w", c["dst"], c["bytes"])]
    if op == "h2d":
        return [("dst", "w", c["dst"], c["bytes"])]
    if op == "d2h":
        return [("src", "r", c["src"], c["bytes"])]
    if op == "d2d":
        return [("src", "r", c["src"], c["bytes"]), ("dst", "w", c["dst"], c["bytes"])]
    raise Refusal(f"command op {op!r} is not one of launch, memset, h2d, d2h, d2d")


def describe_ref(r) -> str:
    """A command's reference (an arena plane's byte, a host buffer's, or a scalar) in one short phrase."""
    if not isinstance(r, dict):
        return repr(r)
    return f"{r['plane']}+{r['offset']}" if "plane" in r else f"host {r['buffer']}+{r['offset']}"


def describe(c: dict) -> str:
    """A command in one short phrase, for refusals."""
    if c["op"] == "launch":
        return f"launch {c['kernel']}"
    if c["op"] == "memset":
        return f"memset {describe_ref(c['dst'])} ({c['bytes']} bytes)"
    return f"{c['op']} {describe_ref(c['src'])} -> {describe_ref(c['dst'])} ({c['bytes']} bytes)"


# ---------------------------------------------------------------------------- the realization
def unpack(artifacts: dict, name: str, kind: str) -> tuple[np.ndarray, bytes]:
    if name not in artifacts:
        raise Refusal(f"the {name} table is missing")
    try:
        return tables.unpack(kind, artifacts[name], name)
    except CoppeliusError as e:
        raise Refusal(str(e)) from None


class Realized:
    """The realization's launch table, relocations, command stream and ring, decoded. `launch(i)`
    gives a launch back in the plan's vocabulary (arguments as plane references, integers and
    binary32 words); raises Refusal where the tables do not hold together."""

    def __init__(self, plan: dict, realization: dict):
        self.plan = plan
        self.planes = plan["arena"]["planes"]
        self.buffers = tables.HOST_BUFFERS
        self.launches, self.blob = unpack(realization, "launches", "launches")
        self.relocations, _ = unpack(realization, "relocations", "relocations")
        self.commands, _ = unpack(realization, "commands", "commands")
        self.ring, _ = unpack(realization, "ring", "ring")

    def word(self, fmt: str, at: int) -> int:
        return int(np.frombuffer(self.blob, fmt, 1, at)[0])

    def launch(self, i: int) -> dict:
        """Launch i as a plan command; checks the parameter block, its pointers and relocations."""
        if not 0 <= i < len(self.launches):
            raise Refusal(f"command names launch {i}; the launch table has {len(self.launches)}")
        row = self.launches[i]
        k = int(row["kernel"])
        if k not in KERNEL_NAMES:
            raise Refusal(f"launch {i}: kernel id {k} is not in the catalog (ids {sorted(KERNEL_NAMES)})")
        kernel = KERNEL_NAMES[k]
        layout, size = param_layout(kernel)
        base, nbytes = int(row["param_offset"]), int(row["param_bytes"])
        if nbytes != size:
            raise Refusal(f"launch {i} ({kernel}): parameter block is {nbytes} bytes, the kernel takes {size}")
        if base % 8 or base + size > len(self.blob):
            raise Refusal(f"launch {i} ({kernel}): parameter block [{base}, {base + size}) is not an aligned "
                          f"range of the {len(self.blob)}-byte parameter blob")
        r0, rn = int(row["reloc_start"]), int(row["reloc_count"])
        if r0 + rn > len(self.relocations):
            raise Refusal(f"launch {i} ({kernel}): relocations [{r0}, {r0 + rn}) past the table's "
                          f"{len(self.relocations)}")
        slots = {base + o: (n, kd) for n, kd, o in layout if kd in PTR_KINDS}
        mine = {}
        for j in range(r0, r0 + rn):
            r = self.relocations[j]
            at = int(r["param_offset"])
            if at not in slots or at in mine:
                raise Refusal(f"launch {i} ({kernel}): relocation {j} patches parameter byte {at - base}, "
                              f"which is not a pointer argument of the kernel (or is patched twice)")
            mine[at] = r
        args = []
        for name, kind, offset in layout:
            at = base + offset
            if kind in PTR_KINDS:
                value = self.word("<u8", at)
                r = mine.get(at)
                if r is None:
                    if value:
                        raise Refusal(f"launch {i} ({kernel}) argument {name}: pointer 0x{value:x} has no relocation")
                    args.append(None)
                    continue
                p = int(r["plane"])
                if p >= len(self.planes):
                    raise Refusal(f"launch {i} ({kernel}) argument {name}: relocation names plane {p}; "
                                  f"the arena has {len(self.planes)}")
                plane, offset_in = self.planes[p], int(r["plane_offset"])
                if value != plane["offset"] + offset_in:
                    raise Refusal(f"launch {i} ({kernel}) argument {name}: pointer holds arena offset {value}, "
                                  f"its relocation says plane {plane['name']} + {offset_in} = "
                                  f"{plane['offset'] + offset_in}")
                args.append({"plane": plane["name"], "offset": offset_in})
            elif kind == "f32":
                args.append(f"0x{self.word('<u4', at):08x}")
            else:
                args.append(self.word("<i4" if kind == "i32" else "<u4", at))
        return {"op": "launch", "kernel": kernel, "grid": [int(g) for g in row["grid"]],
                "block": [int(b) for b in row["block"]], "shared": int(row["shared"]), "cluster": int(row["cluster"]),
                "args": args}

    def device_ref(self, index: int, offset: int, what: str) -> dict:
        if index >= len(self.planes):
            raise Refusal(f"{what} names plane {index}; the arena has {len(self.planes)}")
        return {"plane": self.planes[index]["name"], "offset": offset}

    def host_ref(self, index: int, offset: int, what: str) -> dict:
        if index >= len(self.buffers):
            raise Refusal(f"{what} names host buffer {index}; the host block has {len(self.buffers)}")
        return {"buffer": self.buffers[index], "offset": offset}

    def command(self, j: int) -> dict:
        """Command j of the stream as a plan command."""
        row = self.commands[j]
        op = OP_NAMES.get(int(row["op"]))
        what = f"command {j}"
        src, dst, so, do, n = int(row["src"]), int(row["dst"]), int(row["src_offset"]), int(row["dst_offset"]), \
            int(row["bytes"])
        if op is None:
            raise Refusal(f"{what}: op code {int(row['op'])} is not one of {sorted(OP_NAMES)}")
        flags = int(row["flags"])
        if flags & ~COMMAND_PROGRAMMATIC or (flags and op != "launch"):
            raise Refusal(f"{what} ({op}): flags {flags:#x}; only a launch may carry a flag, and only "
                          f"{COMMAND_PROGRAMMATIC:#x} (programmatic)")
        if op == "launch":
            return self.launch(int(row["a"])) | {"programmatic": bool(flags)}
        if op == "memset":
            return {"op": op, "dst": self.device_ref(dst, do, what), "bytes": n, "value": int(row["value"])}
        if op == "h2d":
            return {"op": op, "src": self.host_ref(src, so, what), "dst": self.device_ref(dst, do, what), "bytes": n}
        if op == "d2h":
            return {"op": op, "src": self.device_ref(src, so, what), "dst": self.host_ref(dst, do, what), "bytes": n}
        return {"op": op, "src": self.device_ref(src, so, what), "dst": self.device_ref(dst, do, what), "bytes": n}


# ---------------------------------------------------------------------------- the host program
def well_formed(plan: dict) -> None:
    """The host program's own well-formedness (formats/program.py), and properly nested repeats."""
    program = plan["program"]
    try:
        check_program(program, len(plan["ring"]), plan["host"]["buffers"], "plan")
    except CoppeliusError as e:
        raise Refusal(str(e).replace("; rebuild it with `snakemake`", "")) from None
    ends = []
    for pc, (op, args) in enumerate(program):
        while ends and pc >= ends[-1]:
            ends.pop()
        if op == "repeat":
            end = pc + 1 + args["body"]
            if ends and end > ends[-1]:
                raise Refusal(f"host program step {pc} (repeat): its body ends at step {end}, past the end of the "
                              f"repeat around it (step {ends[-1]})")
            ends.append(end)


def trace_limit(plan: dict) -> int:
    run = plan["run"]
    chunks = -(-12 * parameter_count(plan) // max(1, run["staging_bytes"]))
    # each publication also scores eval_contexts contexts of the validation stream
    return 16 * (len(plan["program"]) + 8 * run["steps"] + 8 * run["eval_contexts"] +
                 (run["steps"] // max(1, run["interval"]) + 2) * (2 * chunks + 4 + 8 * run["eval_contexts"]) + 64)


def trace(plan: dict, operation: str) -> list[tuple[int, str, dict]]:
    """[(pc, op, args)] of every step the runtime executes for `operation` (train, predict, or generate
    with TRACED_NEW_TOKENS new tokens), by the one walker (formats/program.py: walk); refuses a program
    that runs away."""
    limit, out = trace_limit(plan), []
    for pc, op, args in walk(plan["program"], operation, TRACED_NEW_TOKENS):
        out.append((pc, op, args))
        if len(out) > limit:
            raise Refusal(f"the {operation} program runs more than {limit} host steps (at step {pc}, {op}); "
                          f"a repeat count is far larger than the run")
    return out
