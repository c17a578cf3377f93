"""Coverage checks: bounds are not enough, the launches must cover exactly the work they name.

  device-extents    every pointer extent of every launch lies inside the region the plan names for
                    it: one layer's slice of a per-layer activation plane, one parameter tensor of a
                    flat weight plane (or a run of whole tensors, as AdamW's group launches take, or that
                    whole plane), the plane otherwise; a tile counter is a persistent plane of its own,
                    which nothing but the launches given it touch after the initialize piece's zeroes
  device-geometry   every launch's grid, block and shared bytes are the ones the kernel ABI computes
                    from its scalars (formats/geometry.py): no launch covers less, or more, than its count
  learner-coverage  each update step's AdamW launches cover params, m, v and the fp16 weights exactly once
                    per step, each launch on the same elements of the four and of the gradients

Each reads the realization's launches (what the run executes), decoded back to the plan's vocabulary.
"""
from ..formats.geometry import PROGRAMMATIC_BLOCKS_PER_SM, cluster_size, geometry, programmatic_launches
from ..formats.kernels import KERNEL_NAMES, KERNELS, SCALAR_KINDS
from ..formats.tables import COMMAND_PROGRAMMATIC, DTYPE_BYTES, OPS
from .common import (UPDATES, Realized, Refusal, command_accesses, describe, iv_add, iv_gap, iv_overlap,
                     launch_accesses, names_of, planes_by_name, piece_class)

WEIGHT_PLANES = ("params", "m", "v", "weights")  # what AdamW updates; the gradients are read
ADAMW_POINTERS = {"params": "params", "m": "m", "v": "v", "half": "weights", "grads": "grads"}


def _tensor_spans(plan: dict, plane: dict) -> list[tuple[int, int, str]]:
    size = DTYPE_BYTES[plane["dtype"]]
    return [(t["offset"] * size, (t["offset"] + t["count"]) * size, t["name"]) for t in plan["tensors"]]


def _region(plan: dict, plane: dict, start: int, end: int) -> str | None:
    """Why [start, end) of the plane leaves its region, or None when it stays inside one."""
    if plane.get("region") == "layer":
        layers = plan["model"]["layers"]
        if plane["bytes"] % layers:
            return f"plane {plane['name']} of {plane['bytes']} bytes does not split into {layers} layers"
        slice_ = plane["bytes"] // layers
        if start // slice_ != (end - 1) // slice_:
            return (f"runs from layer {start // slice_} into layer {(end - 1) // slice_} of plane {plane['name']} "
                    f"({slice_} bytes a layer)")
    elif plane.get("region") == "tensor" and not (start == 0 and end == plane["bytes"]):
        spans = _tensor_spans(plan, plane)
        first = next((s for s in spans if s[0] <= start < s[1]), None)
        if first is None:
            return f"starts at byte {start} of plane {plane['name']}, inside no tensor"
        whole_run = start == first[0] and any(s[1] == end for s in spans)
        if end > first[1] and not whole_run:
            into = next((s[2] for s in spans if s[0] < end <= s[1]), "past the last tensor")
            return (f"runs from tensor {first[2]} (bytes [{first[0]}, {first[1]})) into {into} of plane "
                    f"{plane['name']}")
    return None


# ---------------------------------------------------------------------------- device-extents
def check_extents(plan, realization, realized, profile):
    """Every pointer extent stays inside its named region (a layer's slice, a tensor, the plane)."""
    planes, r, count = planes_by_name(plan), Realized(plan, realization), 0
    for i in range(len(r.launches)):
        c = r.launch(i)
        for name, _, ref, nbytes in launch_accesses(c["kernel"], c["args"]):
            plane = planes[ref["plane"]]
            why = _region(plan, plane, ref["offset"], ref["offset"] + max(1, nbytes))
            if why is not None:
                raise Refusal(f"launch {i} ({c['kernel']}) argument {name}: bytes [{ref['offset']}, "
                              f"{ref['offset'] + nbytes}) {why}")
            count += 1
    counters = _tile_counters(plan, planes)
    return (f"{count} pointer extents of {len(r.launches)} launches stay inside one layer, tensor or plane each; "
            f"the tile counter planes ({counters}) persistent, touched by their launches only")


def _tile_counters(plan: dict, planes: dict) -> int:
    """The kernels' tile_counter arguments (the sm_90a input gradients take their tiles from it and leave it 0,
    formats/kernels.py) name a whole persistent i32 plane, zeroed by the initialize piece and touched by nothing
    else: a counter that held anything but 0 at a launch would skip tiles."""
    counters = set()
    for piece in plan["pieces"]:
        for c in piece["commands"]:
            for name, _, ref, _ in command_accesses(c):
                if c["op"] != "launch" or name != "tile_counter":
                    continue
                plane = planes[ref["plane"]]
                if plane["lifetime"] != "persistent" or plane["dtype"] != "i32" or plane["bytes"] != 4:
                    raise Refusal(f"piece {piece['name']} launch ({c['kernel']}): its tile_counter is plane "
                                  f"{plane['name']} ({plane['lifetime']}, {plane['dtype']}, {plane['bytes']} bytes); "
                                  f"a tile counter is a persistent i32 plane of its own, zero between launches")
                counters.add(plane["name"])
    for piece in plan["pieces"]:
        if piece_class(piece["name"]) == "init":
            continue
        for c in piece["commands"]:
            for name, _, ref, _ in command_accesses(c):
                if ref.get("plane") in counters and not (c["op"] == "launch" and name == "tile_counter"):
                    raise Refusal(f"piece {piece['name']} command {describe(c)} touches tile counter plane "
                                  f"{ref['plane']}: only the launches given it may, or it is not 0 at the next one")
    return len(counters)


# ---------------------------------------------------------------------------- device-geometry
def check_geometry(plan, realization, realized, profile):
    """Each launch's (grid, block, shared, cluster) is the kernel ABI's for its scalars."""
    r = Realized(plan, realization)
    for i in range(len(r.launches)):
        c = r.launch(i)
        scalars = {n: v for (n, kind), v in zip(KERNELS[c["kernel"]], c["args"]) if kind in SCALAR_KINDS and
                   kind != "f32"}
        try:
            grid, block, shared = geometry(c["kernel"], scalars, plan["target"]["arch"])
            cluster = cluster_size(c["kernel"], scalars, plan["target"]["arch"])
        except (ValueError, KeyError) as e:
            raise Refusal(f"launch {i} ({c['kernel']}): no geometry for scalars {scalars} ({e})") from None
        if (c["grid"], c["block"], c["shared"]) != (grid, block, shared):
            threads = lambda g, b: g[0] * g[1] * g[2] * b[0] * b[1] * b[2]  # noqa: E731
            raise Refusal(f"launch {i} ({c['kernel']}): grid {c['grid']} block {c['block']} shared {c['shared']} "
                          f"({threads(c['grid'], c['block'])} threads); for {scalars} the kernel covers its work "
                          f"with grid {grid} block {block} shared {shared} ({threads(grid, block)} threads)")
        if max(1, c["cluster"]) != cluster:
            raise Refusal(f"launch {i} ({c['kernel']}): launched in clusters of {c['cluster']} blocks; for {scalars} "
                          f"the kernel reads its split of K from clusters of {cluster}")
    arch, sm_count, edges = plan["target"]["arch"], plan["target"]["sm_count"], 0
    # a programmatic launch's kernel waits for the launch before it (launch.cuh), never for a copy
    for j, launch, before, want in programmatic_launches(r.commands, r.launches, r.ring, arch, sm_count):
        got = bool(int(r.commands[j]["flags"]) & COMMAND_PROGRAMMATIC)
        if got != want:
            grid = [int(g) for g in launch["grid"]]
            raise Refusal(f"command {j} (launch {KERNEL_NAMES[int(launch['kernel'])]}, grid {grid}): programmatic "
                          f"{got}; on {arch} with {sm_count} SMs, after "
                          f"{f'a launch of grid {before}' if before else 'no launch'} in its piece, it is "
                          f"{'programmatic' if want else 'not programmatic'}")
        edges += want
    return (f"{len(r.launches)} launches have the geometry the kernel ABI computes from their scalars; {edges} of "
            f"them start programmatically, each right after a launch, both grids at most {PROGRAMMATIC_BLOCKS_PER_SM} "
            f"blocks an SM, on {arch}")


# ---------------------------------------------------------------------------- learner-coverage
def check_learner_coverage(plan, realization, realized, profile):
    """Each update's AdamW launches, together, update every element of params, m, v and the fp16
    weights exactly once, each launch on the same elements of all four and of the gradients; and its
    nonfinite_check launches, all before the first AdamW launch, check every gradient element exactly
    once into the flag every AdamW launch reads."""
    planes, names, r = planes_by_name(plan), names_of(plan), Realized(plan, realization)
    for name in UPDATES:  # each step of each update entry, as realized
        if name not in names:
            raise Refusal(f"the ring has no {name} piece")
        for slot, span in enumerate(entry_steps(r, r.ring[names.index(name)])):
            step = f"{name} step {slot}"
            launches = _adamw_coverage(plan, planes, r, span, step)
            checks = _checked_before_applied(plan, planes, r, span, step)
    total = plan["model"]["parameters"]
    return f"each update step's {launches} AdamW launches update each of the {total} parameters of params, m, v " \
           f"and weights exactly once, after {checks} nonfinite_check launches checked each gradient once"


def entry_steps(r: Realized, entry) -> list[tuple[int, int]]:
    """The [start, end) command spans of a realized ring entry's steps: each step of an update piece begins with
    the h2d copy of its context (the step words' slots count them the same way, realize/tables.py)."""
    start, end = int(entry["offset"]), int(entry["offset"] + entry["length"])
    begins = [j for j in range(start + 1, end) if int(r.commands[j]["op"]) == OPS["h2d"]]
    return list(zip([start, *begins], [*begins, end]))


def _entry_launches(r: Realized, span: tuple[int, int], kernels: tuple[str, ...]):
    """(launch index, kernel, arguments by name) of each launch of a span of realized commands running one of
    `kernels`, in order."""
    for j in range(*span):
        if int(r.commands[j]["op"]) != 0:
            continue
        i = int(r.commands[j]["a"])
        c = r.launch(i)
        if c["kernel"] in kernels:
            yield i, c["kernel"], dict(zip((n for n, _ in KERNELS[c["kernel"]]), c["args"]))


def _tensor_at(plan: dict, element: int) -> str:
    """The name of the parameter tensor that holds a flat weight plane's element."""
    return next((t["name"] for t in plan["tensors"] if t["offset"] <= element < t["offset"] + t["count"]),
                "no tensor")


def _checked_before_applied(plan: dict, planes: dict, r: Realized, span, name: str) -> int:
    """The step's nonfinite_check launches: each sets flag+0 over a run of grads, all of them before its first
    AdamW launch, which (like every AdamW launch) skips on flag+0; together each gradient element once."""
    checked, launches, applied = (), 0, None
    size = DTYPE_BYTES[planes["grads"]["dtype"]]
    for i, kernel, args in _entry_launches(r, span, ("nonfinite_check", "adamw")):
        where = f"{name} launch {i} ({kernel})"
        if args["flag"] != {"plane": "flag", "offset": 0}:
            raise Refusal(f"{where}: its flag is {args['flag']!r}; the update's non-finite flag is flag+0")
        if kernel == "adamw":
            applied = applied if applied is not None else i
            continue
        if applied is not None:
            raise Refusal(f"{where}: checks gradients after launch {applied} (adamw) has applied them; every "
                          f"nonfinite_check comes before the first AdamW launch")
        grads = args["grads"]
        if grads is None or grads["plane"] != "grads" or grads["offset"] % size:
            raise Refusal(f"{where}: argument grads is {grads!r}; it must point at an element of plane grads")
        start, n = grads["offset"] // size, args["N"]
        if (twice := iv_overlap(checked, start, start + n)) is not None:
            raise Refusal(f"{where}: checks grads elements [{twice[0]}, {twice[1]}) a second time in one update")
        checked, launches = iv_add(checked, start, start + n), launches + 1
    total = plan["model"]["parameters"]
    if (gap := iv_gap(checked, 0, total)) is not None:
        raise Refusal(f"{name}'s {launches} nonfinite_check launches never check grads elements [{gap[0]}, "
                      f"{gap[1]}) (tensor {_tensor_at(plan, gap[0])}) of its {total} before AdamW applies them")
    return launches


def _adamw_coverage(plan: dict, planes: dict, r: Realized, span, name: str) -> int:
    covered = {p: () for p in WEIGHT_PLANES}
    launches = 0
    for i, _, args in _entry_launches(r, span, ("adamw",)):
        launches += 1
        where = f"{name} launch {i} (adamw)"
        elements = set()
        for arg, plane_name in ADAMW_POINTERS.items():
            ref = args[arg]
            if ref is None or ref["plane"] != plane_name:
                raise Refusal(f"{where}: argument {arg} is {ref!r}; it must point into plane {plane_name}")
            size = DTYPE_BYTES[planes[plane_name]["dtype"]]
            if ref["offset"] % size:
                raise Refusal(f"{where}: argument {arg} at byte {ref['offset']} of {plane_name} is not element-aligned")
            elements.add(ref["offset"] // size)
        if len(elements) != 1:
            raise Refusal(f"{where}: params, m, v, grads and half start at different elements "
                          f"{sorted(elements)}; one launch updates the same elements of each")
        start, n = elements.pop(), args["N"]
        for plane_name in WEIGHT_PLANES:
            if (twice := iv_overlap(covered[plane_name], start, start + n)) is not None:
                raise Refusal(f"{where}: updates {plane_name} elements [{twice[0]}, {twice[1]}) a second time "
                              f"in one update")
            covered[plane_name] = iv_add(covered[plane_name], start, start + n)
    total = plan["model"]["parameters"]
    for plane_name in WEIGHT_PLANES:
        if (gap := iv_gap(covered[plane_name], 0, total)) is not None:
            raise Refusal(f"{name}'s {launches} AdamW launches never update {plane_name} elements "
                          f"[{gap[0]}, {gap[1]}) (tensor {_tensor_at(plan, gap[0])}) of its {total}")
    return launches
