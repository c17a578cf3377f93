"""The plan: planes aligned and disjoint where their lifetimes meet; deterministic bytes."""
import itertools

import pytest
import yaml

from coppelius.config import ROOT, resolve
from coppelius.formats.program import walk
from coppelius.formats.tables import lifetimes_meet
from coppelius.plan.build import build_plan, encode_plan
from coppelius.formats.kernels import KERNELS

DEFAULTS = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
CASES = [("cpu", "tiny", 8), ("h200", "small", 16), ("gb10", "tiny", 4), ("rtx3090", "gpt2-124m", 4)]


def plan_for(target, model, batch):
    return build_plan(resolve(DEFAULTS | {"target": target, "model": model, "batch": batch}))


@pytest.mark.parametrize("target, model, batch", CASES)
def test_planes_aligned_and_disjoint_where_lifetimes_meet(target, model, batch):
    plan = plan_for(target, model, batch)
    planes = plan["arena"]["planes"]
    for p in planes:
        assert p["offset"] % 256 == 0, p["name"]
        assert p["offset"] + p["bytes"] <= plan["arena"]["bytes"]
    overlaps = 0
    for a, b in itertools.combinations(planes, 2):
        disjoint = a["offset"] + a["bytes"] <= b["offset"] or b["offset"] + b["bytes"] <= a["offset"]
        if lifetimes_meet(a["lifetime"], b["lifetime"]):
            assert disjoint, (a["name"], b["name"])
        else:
            overlaps += not disjoint
    assert overlaps > 0  # the staging plane does share bytes with per-step planes


def test_launch_arguments_match_the_catalog_and_land_in_planes():
    plan = plan_for("cpu", "tiny", 8)
    planes = {p["name"]: p for p in plan["arena"]["planes"]}
    launches = [c for piece in plan["pieces"] for c in piece["commands"] if c["op"] == "launch"]
    assert len(launches) > 50
    for launch in launches:
        kinds = [k for _, k in KERNELS[launch["kernel"]]]
        assert len(kinds) == len(launch["args"])
        for kind, arg in zip(kinds, launch["args"]):
            if kind.endswith("*") and arg is not None:
                assert 0 <= arg["offset"] < planes[arg["plane"]]["bytes"], (launch["kernel"], arg)


def test_plan_bytes_are_identical_across_runs():
    assert encode_plan(plan_for("h200", "small", 16)) == encode_plan(plan_for("h200", "small", 16))


def test_pieces_and_program_cover_the_run():
    plan = plan_for("cpu", "tiny", 8)
    names = plan["ring"]
    chunks = plan["contracts"]["checkpoint"]["chunks"]
    assert names[0] == "initialize" and names[-4:] == ["restore", "sample", "sample_forward", "cast_weights"]
    assert sum(n.startswith("load_stage_") for n in names) == len(chunks) == sum(n.startswith("gather_") for n in names)
    covered = 0
    for offset, size in chunks:  # the chunks tile the payload in order
        assert offset == covered
        covered += size
    assert covered == plan["contracts"]["checkpoint"]["payload_bytes"] == 12 * 120_576
    ops = [op for op, _ in plan["program"]]
    # one publication in the repeat of every interval but the last, one after the last (and its final forward)
    assert ops.count("checkpoint-publish") == 2 and "operation" in ops and ops[-1] == "end"
    # a wrap after each cursor-from-checkpoint (train, predict) and after every cursor-advance: two written-out
    # intervals of updates (the first, the repeated pair of the two update entries, the odd one out if any), one
    # in each of the two validation passes, one in predict
    odd = (plan["run"]["interval"] - 1) % 2
    advances = 2 * (1 + 2 + odd) + 2 + 1
    assert ops.count("validation-begin") == 2 and ops.count("cursor-wrap") == 2 + ops.count("cursor-advance")
    assert ops.count("cursor-advance") == advances
    assert ops.count("sample-token") == ops.count("write-sample") == 1  # generate: one body, once per new token


def test_the_weights_are_cast_once_after_the_load_and_no_forward_casts_them():
    """AdamW writes the fp16 weights beside the parameters, so a forward (the scoring one, the update's, generate's)
    multiplies by them as they are; the one cast_half of a run is piece cast_weights, issued right after the last
    chunk of the load, before the operation branches to train, predict or generate."""
    plan = plan_for("cpu", "tiny", 8)
    ring = plan["ring"]
    casts = {p["name"]: sum(c.get("kernel") == "cast_half" for c in p["commands"]) for p in plan["pieces"]}
    assert {name: n for name, n in casts.items() if n} == {"cast_weights": 1}
    head = plan["program"][:plan["labels"]["operation"]]
    submits = [ring[args["ring"]] for op, args in head if op == "submit"]
    last_chunk = len(plan["contracts"]["checkpoint"]["chunks"]) - 1
    assert submits[0] == "initialize" and submits[-2:] == [f"load_scatter_{last_chunk}", "cast_weights"]
    assert sum(ring[args["ring"]] == "cast_weights" for op, args in plan["program"] if op == "submit") == 1


@pytest.mark.parametrize("steps, interval", [(1, 1), (4, 1), (4, 2), (9, 3), (8, 4), (10, 5)])
def test_updates_alternate_and_each_is_recorded_a_step_late(steps, interval):
    """Train submits each update before it records the one before (the card never waits for the host between
    steps): the two update entries alternate, ending on `update`, in every interval; each step's record reads the
    losses buffer of the update it records, and every update is recorded before the interval's validation."""
    plan = build_plan(resolve(DEFAULTS | {"target": "cpu", "model": "tiny", "batch": 8, "steps": steps,
                                          "interval": interval}))
    ring = plan["ring"]
    events = []
    for _, op, args in walk(plan["program"], "train"):
        if op == "submit" and ring[args["ring"]].startswith("update"):
            events.append(ring[args["ring"]])
        elif op == "record-stat" and args["kind"] == "step":
            events.append(args["buffer"])
        elif op == "validation-begin":
            events.append("|")
    # the pieces alternate ending on update, whose context buffer the final forward reads
    piece = lambda k: ("update", "update_1")[(interval - 1 - k) % 2]  # noqa: E731
    losses = lambda k: ("step_losses", "step_losses_1")[(interval - 1 - k) % 2]  # noqa: E731
    one = [piece(0)] + [x for k in range(1, interval) for x in (piece(k), losses(k - 1))]
    one.append(losses(interval - 1))
    assert events == (one + ["|"]) * (steps // interval)


@pytest.mark.parametrize("target, model, batch", [
    ("h200", "tiny", 8), ("h200", "small", 64), ("h200", "gpt2-124m", 32),
    ("rtx3090", "small", 64), ("gb10", "gpt2-124m", 4), ("cpu", "tiny", 8)])
def test_gelu_backward_rides_the_fc_projections_epilogue_on_every_target(target, model, batch):
    """Each layer's gradient of fch is one matmul_backward_input_gelu reading that layer's stored slope into dbt4c,
    never matmul_backward_input then gelu_backward (the fused kernel gives the pair's bits,
    tests/gpu/test_tensor_cores_gpu.py), on the wgmma, 128x128 and 64x64 tiles alike."""
    plan = plan_for(target, model, batch)
    update = next(piece for piece in plan["pieces"] if piece["name"] == "update")
    launches = [c for c in update["commands"] if c["op"] == "launch"]
    fused = [dict(zip((n for n, _ in KERNELS[c["kernel"]]), c["args"])) for c in launches
             if c["kernel"] == "matmul_backward_input_gelu"]
    layers = plan["model"]["layers"]
    assert [c["kernel"] for c in launches].count("gelu_backward") == 0
    assert len(fused) == layers
    assert [a["dinp"]["plane"] for a in fused] == ["dbt4c"] * layers
    assert len({(a["slope"]["plane"], a["slope"]["offset"]) for a in fused}) == layers  # each layer's own slope
    assert "dbt4c_gelu" not in {p["name"] for p in plan["arena"]["planes"]}


@pytest.mark.parametrize("target, model, batch", CASES)
def test_launches_start_programmatically_after_small_launches_on_the_archs_that_have_it(target, model, batch):
    """On sm_90 and sm_121 a launch right after a launch in its piece starts programmatically (its kernel waits for
    the predecessor in launch.cuh's prologue) when both grids have at most 4 blocks an SM of the target's; after a
    copy or a memset, first in its piece, or beside a larger grid it waits as usual; elsewhere (cpu, sm_86) never."""
    plan = plan_for(target, model, batch)
    on = plan["target"]["arch"] in ("sm_90", "sm_121")
    limit = 4 * yaml.safe_load((ROOT / "config" / "targets" / f"{target}.yaml").read_text())["sm_count"]
    blocks = lambda grid: grid[0] * grid[1] * grid[2]  # noqa: E731
    seen = {"programmatic": 0, "after another op": 0, "beside a larger grid": 0}
    for piece in plan["pieces"]:
        previous = None
        for c in piece["commands"]:
            if c["op"] == "launch":
                after_launch = previous is not None and previous["op"] == "launch"
                small = after_launch and max(blocks(previous["grid"]), blocks(c["grid"])) <= limit
                assert c["programmatic"] == (on and after_launch and small), (piece["name"], c["kernel"], c["grid"])
                seen["programmatic"] += c["programmatic"]
                seen["after another op"] += previous is not None and not after_launch
                seen["beside a larger grid"] += after_launch and not small
            previous = c
    print(target, model, batch, seen)
    assert (seen["programmatic"] > 0) == on and seen["after another op"] > 0 and seen["beside a larger grid"] > 0
