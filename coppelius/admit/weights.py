"""Check schedule-weights-cast: every forward multiplies by the fp16 cast of the parameters it trains or scores.

The fp16 weights (plane weights) are cast from the f32 parameters (plane params) once, by a cast_half launch over
both whole planes after the load. From then on only AdamW writes either, and each update's AdamW launches write
both from the same elements (learner-coverage), so the two stay each other's cast and no forward casts again.
Traced for train, predict and generate (common.trace): any other write of params or weights (initialize's zeros,
the load's scatter) leaves the weights stale until the next whole cast, and a command that reads weights while
they are stale is refused, naming the write that left them so.
"""
from .common import OPERATIONS, Refusal, command_accesses, describe, names_of, parameter_count, trace

SYNCED = ("params", "weights")  # the planes AdamW writes together; the cast makes the second of the first


def _whole_cast(c: dict, parameters: int) -> bool:
    """A cast_half launch from all of params into all of weights."""
    if c["op"] != "launch" or c["kernel"] != "cast_half":
        return False
    touched = {(ref.get("plane"), ref.get("offset"), nbytes, mode) for _, mode, ref, nbytes in command_accesses(c)}
    return touched == {("weights", 0, 2 * parameters, "w"), ("params", 0, 4 * parameters, "r")}


def _piece(piece: dict, stale: str | None, parameters: int, where: str) -> tuple[str | None, int, int]:
    """After one submission of `piece`: the staleness (None: the weights are the params' cast), its whole casts and
    its reads of the weights."""
    casts = reads = 0
    for j, c in enumerate(piece["commands"]):
        if _whole_cast(c, parameters):
            stale, casts = None, casts + 1
            continue
        accesses = command_accesses(c)
        for name, mode, ref, _ in accesses:
            if "r" not in mode or ref.get("plane") != "weights":
                continue
            reads += 1
            if stale is not None:
                raise Refusal(f"{where}: piece {piece['name']} command {j} ({describe(c)}) reads the fp16 weights "
                              f"({name}) while they are not the cast of the parameters ({stale}); cast all of params "
                              f"into weights (piece cast_weights) after the load")
        if c["op"] == "launch" and c["kernel"] == "adamw":
            continue  # writes both from the same elements (learner-coverage)
        written = [ref["plane"] for _, mode, ref, _ in accesses if "w" in mode and ref.get("plane") in SYNCED]
        if written:
            stale = (f"piece {piece['name']} command {j} ({describe(c)}) wrote {' and '.join(written)} after the "
                     f"last whole cast_half")
    return stale, casts, reads


def check_weights_cast(plan, realization, realized, profile):
    names_of(plan)  # a ring that is not the pieces, in order, is refused before its entries are read
    parameters = parameter_count(plan)
    memo, casts, reads = {}, 0, 0
    for operation in OPERATIONS:
        stale = "no whole cast_half has run yet"
        for pc, op, args in trace(plan, operation):
            if op not in ("submit", "reissue"):
                continue
            ring = args["ring"]
            key = (ring, stale is None)
            if key not in memo or stale is not None:  # a refusal names this host step and this write
                memo[key] = _piece(plan["pieces"][ring], stale, parameters, f"{operation} host step {pc}")
            stale, n, r = memo[key]
            casts, reads = casts + n, reads + r
    return (f"{casts} whole casts of params into weights in train, predict and generate; {reads} reads of the "
            f"weights each after one, with only AdamW writing params or weights between")
