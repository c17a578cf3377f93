"""Check schedule-reissues: every reissue follows its submission, and the realization's tables are
the plan: the ring decodes to the plan's pieces, command for command, and the host program, planes,
host buffers and run record (what the run executes, docs/formats.md) decode to the plan's.
"""
from ..errors import CoppeliusError
from ..formats import tables
from ..formats.kernels import KERNELS
from ..formats.program import decode
from .common import OPERATIONS, Realized, Refusal, describe, names_of, trace, unpack

STEP_WORD_ARGS = ("step_size", "eps")  # the learner's (learner-step-words), not compared here


def _masked(c: dict) -> dict:
    if c.get("op") == "launch" and c.get("kernel") == "adamw":
        names = [n for n, _ in KERNELS["adamw"]]
        args = [None if n in STEP_WORD_ARGS else a for n, a in zip(names, c["args"])]
        return c | {"args": args}
    return c


def _show(c: dict) -> str:
    if c["op"] != "launch":
        return describe(c)
    return (f"launch {c['kernel']} grid {c['grid']} block {c['block']} shared {c['shared']} cluster {c['cluster']} "
            f"args {c['args']}")


def check_reissues(plan, realization, realized, profile):
    names = names_of(plan)
    for operation in OPERATIONS:
        issued = set()
        for pc, op, args in trace(plan, operation):
            if op == "submit":
                issued.add(args["ring"])
            elif op == "reissue" and args["ring"] not in issued:
                ring = args["ring"]
                raise Refusal(f"{operation} host step {pc}: reissues ring entry {ring} ({names[ring]}), "
                              f"which was not issued before")
    r = Realized(plan, realization)
    if len(r.ring) != len(names):
        raise Refusal(f"the realization's ring has {len(r.ring)} entries; the plan's has {len(names)}")
    commands = 0
    for i, e in enumerate(r.ring):
        piece, offset, length = int(e["piece"]), int(e["offset"]), int(e["length"])
        if piece != i:
            raise Refusal(f"ring entry {i} ({names[i]}) issues piece {piece}; it must issue piece {i}")
        if offset + length > len(r.commands):
            raise Refusal(f"ring entry {i} ({names[i]}): commands [{offset}, {offset + length}) past the stream's "
                          f"{len(r.commands)}")
        want = plan["pieces"][i]["commands"]
        if length != len(want):
            raise Refusal(f"ring entry {i} ({names[i]}) holds {length} commands; the plan's piece has {len(want)}")
        for j in range(length):
            got = r.command(offset + j)
            if _masked(got) != _masked(want[j]):
                raise Refusal(f"ring entry {i} ({names[i]}) command {j} (stream {offset + j}): the realization has "
                              f"{_show(got)}; the plan's piece has {_show(want[j])}")
        commands += length
    steps = run_tables_match(plan, realization)
    return (f"every reissue follows its submission; {len(r.ring)} ring entries decode to the plan's {commands} "
            f"commands; the host program's {steps} steps, the planes, host buffers and run record are the plan's")


def run_tables_match(plan: dict, realization: dict) -> int:
    """The program, planes, buffers and run tables, decoded, against the plan; the program's length."""
    try:
        program = decode(realization["program"], "program") if "program" in realization else None
    except CoppeliusError as e:
        raise Refusal(str(e).replace("; rebuild it with `snakemake`", "")) from None
    if program is None:
        raise Refusal("the program table is missing")
    if program != plan["program"]:
        at = next((pc for pc, (a, b) in enumerate(zip(program, plan["program"])) if a != b),
                  min(len(program), len(plan["program"])))
        show = lambda p: p[at] if at < len(p) else "nothing"  # noqa: E731
        raise Refusal(f"host program step {at}: the program table holds {show(program)}, "
                      f"the plan {show(plan['program'])}")
    planes, _ = unpack(realization, "planes", "planes")
    _same("planes", [tuple(int(v) for v in p) for p in planes], tables.plane_rows(plan),
          [p["name"] for p in plan["arena"]["planes"]])
    buffers, _ = unpack(realization, "buffers", "buffers")
    host = plan["host"]["buffers"]
    if sorted(host) != sorted(tables.HOST_BUFFERS):
        raise Refusal(f"the plan's host buffers are {sorted(host)}, not {sorted(tables.HOST_BUFFERS)}")
    _same("buffers", [tuple(int(v) for v in b) for b in buffers], tables.buffer_rows(plan), list(tables.HOST_BUFFERS))
    run, blob = unpack(realization, "run", "run")
    expected, contract_json = tables.run_record(plan)
    if len(run) != 1:
        raise Refusal(f"the run table has {len(run)} records, not 1")
    for name, value in expected.items():
        if run[0][name] != value:
            raise Refusal(f"the run table's {name} is {run[0][name]}; the plan's is {value}")
    if blob != contract_json:
        raise Refusal("the run table's model and learner JSON are not the checkpoint contract's")
    return len(program)


def _same(table: str, got: list, want: list, names: list) -> None:
    if got == want:
        return
    at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    name = names[at] if at < len(names) else f"#{at}"
    raise Refusal(f"the {table} table's record {at} ({name}) is {got[at] if at < len(got) else 'missing'}; "
                  f"the plan's is {want[at] if at < len(want) else 'nothing'}")
