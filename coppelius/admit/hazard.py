"""Device hazard checks: every pointer and copy lands inside its plane, planes live at the same time
never share a byte, and nothing reads device bytes that nothing wrote within their lifetime.
"""
import numpy as np

from ..formats.tables import DTYPE_BYTES as DTYPES, LIFETIMES, lifetimes_meet
from .common import (OPERATIONS, Realized, Refusal, command_accesses, describe, iv_add, iv_gap, iv_remove,
                     launch_accesses, launch_numbers, piece_class, plane_range, planes_by_name, trace)


# ---------------------------------------------------------------------------- device-relocations
def check_relocations(plan, realization, realized, profile):
    """Every pointer argument lands inside one plane with the whole extent the kernel touches; every
    relocation belongs to one launch's pointer; every copy's device side lies inside its plane."""
    planes = planes_by_name(plan)
    r = Realized(plan, realization)
    owner = np.full(len(r.relocations), -1)
    for i in range(len(r.launches)):
        c = r.launch(i)
        for name, mode, ref, nbytes in launch_accesses(c["kernel"], c["args"]):
            plane_range(planes, ref, nbytes, f"launch {i} ({c['kernel']}) argument {name}")
        r0, rn = int(r.launches[i]["reloc_start"]), int(r.launches[i]["reloc_count"])
        if (owner[r0:r0 + rn] >= 0).any():
            other = int(owner[r0:r0 + rn][owner[r0:r0 + rn] >= 0][0])
            raise Refusal(f"launch {i} ({c['kernel']}): its relocations [{r0}, {r0 + rn}) overlap launch {other}'s")
        owner[r0:r0 + rn] = i
    if (owner < 0).any():
        j = int(np.flatnonzero(owner < 0)[0])
        raise Refusal(f"relocation {j} (parameter byte {int(r.relocations[j]['param_offset'])}) belongs to no launch; "
                      f"the run would patch it all the same")
    copies = 0
    for j in range(len(r.commands)):
        if int(r.commands[j]["op"]) == 0:
            continue
        c = r.command(j)
        for name, mode, ref, nbytes in command_accesses(c):
            plane_range(planes, ref, nbytes, f"stream command {j} ({describe(c)})")
        copies += 1
    for piece in plan["pieces"]:
        for j, c in enumerate(piece["commands"]):
            for name, mode, ref, nbytes in command_accesses(c):
                argument = "" if c["op"] != "launch" else f" argument {name}"
                what = f"piece {piece['name']} command {j} ({describe(c)}{argument})"
                plane_range(planes, ref, nbytes, what)
    return (f"{len(r.relocations)} relocations in {len(r.launches)} launches and {copies} copies land inside their "
            f"planes, whole extents")


# ---------------------------------------------------------------------------- device-lifetimes
def check_lifetimes(plan, realization, realized, profile):
    """Planes are well formed and inside the arena; planes live at the same time share no byte; each
    piece touches only the planes of its own lifetime (and the persistent ones)."""
    arena, alignment = plan["arena"], plan["arena"]["alignment"]
    planes = arena["planes"]
    seen = set()
    for p in planes:
        if p["name"] in seen:
            raise Refusal(f"two planes are named {p['name']}")
        seen.add(p["name"])
        count = int(np.prod(p["shape"], dtype=object)) if p["shape"] else 1
        if p["lifetime"] not in LIFETIMES or p["dtype"] not in DTYPES:
            raise Refusal(f"plane {p['name']}: lifetime {p['lifetime']!r} / dtype {p['dtype']!r} unknown")
        if p["bytes"] != count * DTYPES[p["dtype"]]:
            raise Refusal(f"plane {p['name']}: {p['bytes']} bytes for shape {p['shape']} of {p['dtype']} "
                          f"({count * DTYPES[p['dtype']]} bytes)")
        if p["offset"] < 0 or p["offset"] % alignment or p["offset"] + p["bytes"] > arena["bytes"]:
            raise Refusal(f"plane {p['name']} at offset {p['offset']} ({p['bytes']} bytes) is not an aligned range "
                          f"of the {arena['bytes']}-byte arena (alignment {alignment})")
    order = sorted(planes, key=lambda p: p["offset"])
    shared = 0
    for i, a in enumerate(order):
        for b in order[i + 1:]:
            if b["offset"] >= a["offset"] + a["bytes"]:
                break
            if not b["bytes"] or not a["bytes"]:
                continue
            if lifetimes_meet(a["lifetime"], b["lifetime"]):
                lo, hi = b["offset"], min(a["offset"] + a["bytes"], b["offset"] + b["bytes"])
                raise Refusal(f"planes {a['name']} ({a['lifetime']}) and {b['name']} ({b['lifetime']}) share arena "
                              f"bytes [{lo}, {hi}) and are live at the same time")
            shared += 1
    by_name = planes_by_name(plan)
    for i, piece in enumerate(plan["pieces"]):
        cls = piece_class(piece["name"])
        if cls is None:
            raise Refusal(f"piece {piece['name']} (ring entry {i}) has no lifetime: pieces are initialize, "
                          f"load_stage_K, load_scatter_K, cast_weights, forward, update, gather_K, restore")
        for j, c in enumerate(piece["commands"]):
            if cls == "init":
                if c["op"] != "memset":
                    raise Refusal(f"piece initialize command {j} ({describe(c)}): initialize only sets planes to zero")
                continue
            for name, mode, ref, nbytes in command_accesses(c):
                lifetime = by_name[ref["plane"]]["lifetime"] if ref.get("plane") in by_name else None
                wrong = {"transfer": ("step",), "step": ("transfer",), "restore": ("transfer",),
                         "persistent": ("step", "transfer")}[cls]
                if lifetime in wrong:
                    raise Refusal(f"piece {piece['name']} ({cls if cls != 'restore' else 'step'} lifetime) command {j} "
                                  f"({describe(c)}) touches {lifetime} plane {ref['plane']}, which is not live then")
    return (f"{len(planes)} planes inside the arena; live planes share no byte ({shared} overlays of step and "
            f"transfer planes)")


# ---------------------------------------------------------------------------- device-written
class _Arena:
    """Which bytes of each plane hold something written within the plane's lifetime."""

    def __init__(self, plan: dict):
        self.planes = planes_by_name(plan)
        self.names = [p["name"] for p in plan["arena"]["planes"]]
        self.lifetime = {name: p["lifetime"] for name, p in self.planes.items()}
        self.aliases = {name: [] for name in self.names}  # name -> [(other, arena lo, arena hi)]
        for a in self.names:
            pa = self.planes[a]
            for b in self.names:
                pb = self.planes[b]
                lo, hi = max(pa["offset"], pb["offset"]), min(pa["offset"] + pa["bytes"], pb["offset"] + pb["bytes"])
                if a != b and lo < hi:
                    self.aliases[a].append((b, lo, hi))

    def kill(self, state: dict, lifetime: str) -> None:
        for name in self.names:
            if self.lifetime[name] == lifetime:
                state[name] = ()

    def write(self, state: dict, plane: str, a: int, b: int) -> None:
        state[plane] = iv_add(state[plane], a, b)
        base = self.planes[plane]["offset"]
        for other, lo, hi in self.aliases[plane]:  # another plane on the same bytes no longer holds its data
            lo, hi = max(lo, base + a), min(hi, base + b)
            if lo < hi:
                ob = self.planes[other]["offset"]
                state[other] = iv_remove(state[other], lo - ob, hi - ob)


def check_written(plan, realization, realized, profile):
    """Simulate every submission of train, predict and generate, in host-program order: a launch or copy may
    read only plane bytes written since the arena was initialised or loaded and, for step and
    transfer planes, within their lifetime: a transfer piece clobbers the overlay (step planes die);
    a forward or update starts with no step or transfer plane live; a restore sees the step planes of
    the forward or update right before it, and nothing else of theirs."""
    arena, names = _Arena(plan), plan["ring"]
    numbers = launch_numbers(plan)
    memo, reads = {}, 0
    for operation in OPERATIONS:
        state = {name: () for name in arena.names}
        previous = None
        for pc, op, args in trace(plan, operation):
            if op not in ("submit", "reissue"):
                continue
            ring = args["ring"]
            key = (ring, previous == "step", tuple(state[n] for n in arena.names))
            if key not in memo:
                memo[key] = _piece(plan, arena, ring, previous, dict(state), numbers, f"{operation} host step {pc}")
            after, n = memo[key]
            reads += n
            state = dict(zip(arena.names, after))
            previous = piece_class(names[ring])
    return (f"{reads} device reads in train, predict and generate each read bytes written within their plane's "
            f"lifetime")


def _piece(plan, arena: _Arena, ring: int, previous, state: dict, numbers, where: str):
    piece = plan["pieces"][ring]
    cls = piece_class(piece["name"])
    if cls is None:
        raise Refusal(f"piece {piece['name']} (ring entry {ring}) has no lifetime")
    if cls == "transfer":
        arena.kill(state, "step")
    elif cls == "step":
        arena.kill(state, "step")
        arena.kill(state, "transfer")
    elif cls == "restore":
        arena.kill(state, "transfer")
        if previous != "step":
            arena.kill(state, "step")
    reads = 0
    for j, c in enumerate(piece["commands"]):
        for name, mode, ref, nbytes in command_accesses(c):
            plane, a = ref["plane"], ref["offset"]
            if "r" in mode:
                reads += 1
                gap = iv_gap(state[plane], a, a + nbytes)
                if gap is not None:
                    what = (f"launch {numbers[ring][j]} ({c['kernel']}) argument {name}" if c["op"] == "launch"
                            else f"command {j} ({describe(c)})")
                    life = arena.lifetime[plane]
                    since = {"persistent": "since the arena was initialised or loaded",
                             "step": f"in this step's lifetime (piece {piece['name']}"
                                     f"{', the restore right after a forward or update' if cls == 'restore' else ''})",
                             "transfer": "in the load or gather pieces since the last step "
                                         "(a step clobbers the overlay)"}[life]
                    raise Refusal(f"{what} in piece {piece['name']} (ring entry {ring}, {where}) reads plane {plane} "
                                  f"bytes [{gap[0]}, {gap[1]}) that nothing wrote {since}")
        for name, mode, ref, nbytes in command_accesses(c):
            if "w" in mode:
                arena.write(state, ref["plane"], ref["offset"], ref["offset"] + nbytes)
    return tuple(state[n] for n in arena.names), reads
