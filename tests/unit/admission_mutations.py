"""The mutation suite's corruptions: each takes a good case (or builds one) and returns it
corrupted; where the corruption is of the plan, realized and tabled from it (`reencode`), so that
only admission can catch it. tests/unit/test_admission.py names each one's owner check."""
import copy
from fractions import Fraction

from admission_cases import (M, arg, command, edit_program, edit_table, learner_case, piece, set_arg, setf, step,
                             stream_index, with_kernel_info, with_profile)
from coppelius.config import target_profile
from coppelius.formats.kernels import param_layout

# ---------------------------------------------------------------------------- the mutations
def m_reloc_offset(c):
    c.realization["relocations"] = edit_table(c.realization["relocations"], "relocations",
                                              lambda r, b: setf(r, 5, "plane_offset", r[5]["plane_offset"] + 64))
    return c


def m_extent(c):
    mm = next(x for x in piece(c.plan, "forward")["commands"] if x.get("kernel") == "matmul_forward" and
              arg(x, "out")["plane"] == "logits")
    set_arg(mm, "N", 2 * arg(mm, "N"))
    return c.reencode()


def m_memset_overrun(c):
    command(c.plan, "update", op="memset", dst_plane="flag")["bytes"] = 8
    return c.reencode()


def m_relocation_plane(c):
    c.realization["relocations"] = edit_table(c.realization["relocations"], "relocations",
                                              lambda r, b: setf(r, 3, "plane", r[3]["plane"] + 1))
    return c


def _plane(c, name):
    return next(p for p in c.plan["arena"]["planes"] if p["name"] == name)


def m_persistent_overlap(c):
    _plane(c, "logits")["offset"] = _plane(c, "m")["offset"]
    return c.reencode()


def m_step_overlap(c):
    _plane(c, "ln1")["offset"] = _plane(c, "qkv")["offset"]
    return c.reencode()


def m_restore_touches_staging(c):
    piece(c.plan, "restore")["commands"].append(
        {"op": "d2h", "src": {"plane": "staging", "offset": 0}, "dst": {"buffer": "report_losses", "offset": 0},
         "bytes": 4})
    return c.reencode()


def m_inner_count(c):  # one pair of updates fewer in the first interval
    c.plan["program"][step(c.plan, "repeat", after=step(c.plan, "repeat") + 1)][1]["count"] -= 1
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_interval_ends_on_update_1(c):
    """Train's update entries swapped with their buffers, so that each interval ends on update_1: consistent but
    for the final forward, whose copy reads host buffer context, a step behind (the fault before c63b0b0)."""
    ring, swap = c.plan["ring"], {"context": "context_1", "context_1": "context", "step_losses": "step_losses_1",
                                  "step_losses_1": "step_losses"}
    update, update_1 = ring.index("update"), ring.index("update_1")
    program = c.plan["program"]
    for pc, (op, args) in enumerate(program[:c.plan["labels"]["predict"]]):
        if op == "submit" and args["ring"] in (update, update_1):
            args["ring"] = update + update_1 - args["ring"]
        elif (op == "read-at-cursor" and program[pc + 1][0] == "adamw-scalars") or (
                op == "record-stat" and args["kind"] == "step"):
            args["buffer"] = swap[args["buffer"]]
    return c.reencode()


def _submission(c) -> list[int]:
    """The host steps of the first update submission of a two-step plan: its read-at-cursor and adamw-scalars steps
    up to the submit."""
    first = step(c.plan, "adamw-scalars", slot=0) - 1
    end = step(c.plan, "submit", after=first)
    return list(range(first, end))


def m_slot_swapped(c):  # a step word says slot 0 for a launch of step 1
    c.realized["step_words"] = edit_table(c.realized["step_words"], "step_words",
                                          lambda r, b: setf(r, len(r) - 1, "slot", 0))
    return c


def m_scalars_out_of_order(c):  # the first submission's two adamw-scalars patch slot 1, then slot 0
    scalars = [pc for pc in _submission(c) if c.plan["program"][pc][0] == "adamw-scalars"]
    for pc, slot in zip(scalars, (1, 0)):
        c.plan["program"][pc][1]["slot"] = slot
    return c.reencode()


def m_contexts_swapped(c):  # the first submission's two contexts land in each other's slot
    reads = [pc for pc in _submission(c) if c.plan["program"][pc][0] == "read-at-cursor"]
    a, b = (c.plan["program"][pc][1] for pc in reads)
    a["offset"], b["offset"] = b["offset"], a["offset"]
    return c.reencode()


def m_one_scalars_for_two(c):  # the first submission steps t once for its two steps
    edit_program(c.plan, [pc for pc in _submission(c) if c.plan["program"][pc][0] == "adamw-scalars"][-1], delete=1)
    return c.reencode()


def m_record_slot_offset(c):  # the second step of the first submission recorded from the first step's losses
    first = step(c.plan, "record-stat", kind="step")
    c.plan["program"][first + 1][1]["offset"] = c.plan["program"][first][1]["offset"]
    return c.reencode()


def m_adamw_missing_in_step_1(c):  # the second step of each update forgets the undecayed tensors
    commands = piece(c.plan, "update")["commands"]
    del commands[max(j for j, x in enumerate(commands) if x.get("kernel") == "adamw")]
    return c.reencode()


def m_drop_final_restore(c):
    edit_program(c.plan, step(c.plan, "reissue", ring=c.plan["ring"].index("restore")), delete=1)
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_predict_count(c):
    c.plan["program"][step(c.plan, "repeat", after=c.plan["labels"]["predict"])][1]["count"] += 1
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_cast_before_load(c):  # the weights cast from the initial zeros, then the load replaces the parameters
    cast = c.plan["ring"].index("cast_weights")
    at = step(c.plan, "submit", ring=cast)
    edit_program(c.plan, at, delete=1)
    edit_program(c.plan, step(c.plan, "submit", ring=c.plan["ring"].index("initialize")) + 1,
                 insert=[["submit", {"ring": cast}]])
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_cast_from_m(c):  # the weights cast from AdamW's first moments, not the parameters
    cast = command(c.plan, "cast_weights", op="launch")
    set_arg(cast, "inp", {"plane": "m", "offset": 0})
    return c.reencode()


def m_advance_short(c):
    c.plan["program"][step(c.plan, "cursor-advance")][1]["tokens"] -= 1
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_advance_first(c):
    at = step(c.plan, "read-at-cursor", after=step(c.plan, "repeat"))
    body = c.plan["program"][at:at + 5]  # the context, the step count, the update, then the move and the wrap
    c.plan["program"][at:at + 5] = body[3:] + body[:3]
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_no_scalars(c):
    edit_program(c.plan, step(c.plan, "adamw-scalars"), delete=1)
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_short_context(c):
    c.plan["program"][step(c.plan, "read-at-cursor", after=step(c.plan, "repeat"))][1]["tokens"] -= 1
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_targets_unshifted(c):
    loss = command(c.plan, "update", op="launch", kernel="crossentropy_forward_backward")
    next(a for a in loss["args"] if isinstance(a, dict) and a["plane"] == "context")["offset"] = 0
    return c.reencode()


def m_read_twice(c):
    c.plan["program"][step(c.plan, "read", offset=c.plan["contracts"]["checkpoint"]["chunks"][1][0])][1]["offset"] = 0
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_scatter_wrong_part(c):
    command(c.plan, "load_scatter_0", op="d2d", dst_plane="params")["dst"]["plane"] = "m"
    return c.reencode()


def m_publish_out_of_order(c):
    at = step(c.plan, "checkpoint-begin") + 1
    p = c.plan["program"]
    p[at:at + 4] = p[at + 2:at + 4] + p[at:at + 2]
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_stage_short(c):
    command(c.plan, "load_stage_1", op="h2d")["bytes"] -= 256
    return c.reencode()


def m_gather_wrong_part(c):
    command(c.plan, "gather_0", op="d2d", src_plane="params")["src"]["plane"] = "m"
    return c.reencode()


def m_reissue_first(c):
    at = step(c.plan, "submit", after=c.plan["labels"]["predict"], ring=c.plan["ring"].index("forward"))
    c.plan["program"][at][0] = "reissue"
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_ring_entries_swapped(c):
    def swap(r, b):
        r[5]["offset"], r[6]["offset"] = int(r[6]["offset"]), int(r[5]["offset"])
    c.realization["ring"] = edit_table(c.realization["ring"], "ring", swap)
    return c


def m_stream_targets(c):
    take = command(c.plan, "update", op="h2d", dst_plane="context")
    j = stream_index(c, "update", piece(c.plan, "update")["commands"].index(take))
    c.realization["commands"] = edit_table(c.realization["commands"], "commands",
                                           lambda r, b: setf(r, j, "src_offset", 4))
    return c


def m_ring_short(c):
    u = c.plan["ring"].index("update")
    shorten = lambda r, b: setf(r, u, "length", r[u]["length"] - 1)  # noqa: E731
    c.realization["ring"] = edit_table(c.realization["ring"], "ring", shorten)
    return c


def m_buffers_overlap(c):
    b = c.plan["host"]["buffers"]
    b["context"]["offset"] = b["staging"]["offset"] + b["staging"]["bytes"] - 256
    return c.reencode()


def m_wrap_dropped(c):
    edit_program(c.plan, step(c.plan, "cursor-wrap", after=step(c.plan, "repeat")), delete=1)
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_wrap_short(c):
    c.plan["program"][step(c.plan, "cursor-wrap", after=step(c.plan, "repeat"))][1]["tokens"] -= 1
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_validation_stays(c):
    edit_program(c.plan, step(c.plan, "cursor-advance", after=step(c.plan, "validation-begin")), delete=1)
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_fill_overrun(c):
    c.plan["program"][step(c.plan, "fill")][1]["bytes"] += 4
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_predictions_overrun(c):
    c.plan["program"][step(c.plan, "write", after=c.plan["labels"]["predict"], file="predictions")][1]["bytes"] += 4
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_generate_no_window(c):
    edit_program(c.plan, step(c.plan, "sample-context"), delete=1)
    return c.reencode()


def m_generate_batch_forward(c):
    """generate issuing the training batch's forward piece instead of its own (batch 1)."""
    at = step(c.plan, "submit", after=c.plan["labels"]["generate"], ring=c.plan["ring"].index("sample_forward"))
    c.plan["program"][at][1]["ring"] = c.plan["ring"].index("forward")
    return c.reencode()


def m_generate_half_row(c):
    c.plan["program"][step(c.plan, "sample-token")][1]["bytes"] //= 2  # rows of half the padded vocabulary
    return c.reencode()


def m_predict_writes_sample(c):
    edit_program(c.plan, step(c.plan, "write-status", after=c.plan["labels"]["predict"]), insert=[["write-sample", {}]])
    return c.reencode()


def m_report_never_written(c):
    piece(c.plan, "restore")["commands"].pop(0)
    return c.reencode()


def m_no_flag_memset(c):
    cmds = piece(c.plan, "update")["commands"]
    cmds.remove(command(c.plan, "update", op="memset", dst_plane="flag"))
    return c.reencode()


def m_no_dresidual_memset(c):
    cmds = piece(c.plan, "update")["commands"]
    cmds.remove(command(c.plan, "update", op="memset", dst_plane="dresidual"))
    return c.reencode()


def m_restore_first(c):
    at = step(c.plan, "submit", after=c.plan["labels"]["predict"], ring=c.plan["ring"].index("forward"))
    p = c.plan["program"]
    p[at], p[at + 1] = p[at + 1], p[at]
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_layer_ahead(c):
    qkv = next(x for x in piece(c.plan, "forward")["commands"] if x.get("kernel") == "matmul_forward" and
               arg(x, "out")["plane"] == "qkv")
    ln1 = _plane(c, "ln1")
    set_arg(qkv, "inp", {"plane": "ln1", "offset": ln1["bytes"] // c.plan["model"]["layers"]})
    return c.reencode()


def m_tile_counter_step_plane(c):  # an input gradient's counter in a step plane, which others write
    set_arg(command(c.plan, "update", kernel="matmul_backward_input"), "tile_counter", {"plane": "flag", "offset": 0})
    return c.reencode()


def m_tile_counter_shared(c):  # another kernel writes the counter's plane
    set_arg(command(c.plan, "update", kernel="nonfinite_check"), "flag", {"plane": "tile_counter", "offset": 0})
    return c.reencode()


def m_eps_word(c):
    c.realized["step_words"] = edit_table(c.realized["step_words"], "step_words",
                                          lambda r, b: setf(r, 1, "eps", r[1]["eps"] + 1))
    return c


def m_step_word_offset(c):
    layout = {n: o for n, _, o in param_layout("adamw")[0]}
    c.realized["step_words"] = edit_table(
        c.realized["step_words"], "step_words",
        lambda r, b: setf(r, 0, "step_size_offset", r[0]["step_size_offset"] - layout["step_size"] + layout["decay"]))
    return c


def m_plan_eps(c):
    c.plan["learner"]["eps"] = "1/10000000"
    return c.reencode()


def m_beta2_word(c):
    set_arg(_adamw(c, decayed=False), "beta2", "0x3f700000")
    return c.reencode()


def _adamw(c, decayed: bool):
    """The update's AdamW launch of the decayed (or the other) tensors: the plan groups each kind."""
    return [x for x in piece(c.plan, "update")["commands"] if x.get("kernel") == "adamw"][0 if decayed else 1]


def _shift(launch, elements: int):
    """Every pointer of an AdamW launch moved by `elements` elements (and N shortened to match)."""
    for name in ("params", "m", "v", "grads", "half"):
        ref = arg(launch, name)
        ref["offset"] += elements * (4 if name in ("params", "m", "v") else 2)
    set_arg(launch, "N", arg(launch, "N") - elements)


def m_adamw_missing(c):
    piece(c.plan, "update")["commands"].remove(_adamw(c, decayed=False))
    return c.reencode()


def m_nonfinite_misses_tensor(c):  # the check stops one tensor short: lnfb's gradients reach AdamW unchecked
    check = command(c.plan, "update", op="launch", kernel="nonfinite_check")
    set_arg(check, "N", arg(check, "N") - next(t["count"] for t in c.plan["tensors"] if t["name"] == "lnfb"))
    return c.reencode()


def m_nonfinite_after_adamw(c):  # the flag set after the decayed tensors were already updated
    cmds = piece(c.plan, "update")["commands"]
    check = command(c.plan, "update", op="launch", kernel="nonfinite_check")
    cmds.remove(check)
    cmds.insert(cmds.index(_adamw(c, decayed=True)) + 1, check)
    return c.reencode()


def m_adamw_doubled(c):
    cmds = piece(c.plan, "update")["commands"]
    launch = _adamw(c, decayed=True)
    cmds.insert(cmds.index(launch) + 1, copy.deepcopy(launch))
    return c.reencode()


def m_adamw_shifted(c):
    """The decayed group split into two launches that both start a tensor in: wpe updated twice."""
    cmds = piece(c.plan, "update")["commands"]
    launch = _adamw(c, decayed=True)
    wte, wpe = (next(t["count"] for t in c.plan["tensors"] if t["name"] == n) for n in ("wte", "wpe"))
    first = copy.deepcopy(launch)
    set_arg(first, "N", wte + wpe)
    cmds.insert(cmds.index(launch), first)
    _shift(launch, wte)
    return c.reencode()


def m_adamw_grads_elsewhere(c):
    set_arg(_adamw(c, decayed=False), "grads", copy.deepcopy(arg(_adamw(c, decayed=True), "grads")))
    return c.reencode()


def m_adamw_mixed_decay(c):
    """One launch for every tensor, with the decayed tensors' word: the norms and biases decayed too."""
    cmds = piece(c.plan, "update")["commands"]
    cmds.remove(_adamw(c, decayed=False))
    set_arg(_adamw(c, decayed=True), "N", c.plan["model"]["parameters"])
    return c.reencode()


def m_count_into_next_tensor(c):
    launch = _adamw(c, decayed=True)
    set_arg(launch, "N", arg(launch, "N") + 1)
    return c.reencode()


def _layer0(c, kernel, out_plane):
    return next(x for x in piece(c.plan, "forward")["commands"] if x.get("kernel") == kernel and
                arg(x, "out")["plane"] == out_plane)


def m_count_into_next_layer(c):
    attention = _layer0(c, "attention_forward", "atty")
    set_arg(attention, "B", 2 * arg(attention, "B"))
    return c.reencode()


def m_rows_into_next_layer(c):
    qkv = _layer0(c, "matmul_forward", "qkv")
    set_arg(qkv, "N", 2 * arg(qkv, "N"))
    return c.reencode()


def m_grid_too_small(c):
    _adamw(c, decayed=True)["grid"][0] -= 1
    return c.reencode()


def m_grid_too_large(c):
    _layer0(c, "residual_layernorm_forward", "ln2")["grid"][0] += 1
    return c.reencode()


def m_block_too_small(c):
    _layer0(c, "layernorm_forward", "ln1")["block"] = [128, 1, 1]
    return c.reencode()


def m_cluster_halved(c):
    dweight = next(x for x in piece(c.plan, "update")["commands"] if x.get("kernel") == "matmul_backward_weight")
    dweight["cluster"] //= 2
    return c.reencode()


def _launch_after(c, op, programmatic=None):
    """The update piece's first launch right after a command of op (and, if given, marked programmatic or not)."""
    commands = piece(c.plan, "update")["commands"]
    return next(x for a, x in zip(commands, commands[1:]) if a["op"] == op and x["op"] == "launch" and
                programmatic in (None, x["programmatic"]))


def m_programmatic_after_memset(c):
    _launch_after(c, "memset")["programmatic"] = True
    return c.reencode()


def m_programmatic_dropped(c):
    _launch_after(c, "launch", programmatic=True)["programmatic"] = False
    return c.reencode()


def m_programmatic_beside_a_larger_grid(c):
    """tiny's grids all fit 4 blocks an SM of the H200's; on a card of one SM its edges join larger grids."""
    c.plan["target"]["sm_count"] = 1
    return c.reencode()


def m_programmatic_on_cpu(c):
    _launch_after(c, "launch")["programmatic"] = True
    return c.reencode()


def m_flags_on_memset(c):
    j = stream_index(c, "update", piece(c.plan, "update")["commands"].index(command(c.plan, "update", op="memset")))
    c.realization["commands"] = edit_table(c.realization["commands"], "commands", lambda r, b: setf(r, j, "flags", 1))
    return c


def m_updates_differ(c):
    """update_1 taking its context from update's buffer: the two would race for it."""
    command(c.plan, "update_1", op="h2d", dst_plane="context")["src"]["buffer"] = "context"
    return c.reencode(updates_alike=False)


def m_record_other_buffer(c):
    """The first interval's first update recorded from the other update's losses, which it did not write."""
    at = step(c.plan, "record-stat", kind="step")
    args = c.plan["program"][at][1]
    args["buffer"] = {"step_losses": "step_losses_1", "step_losses_1": "step_losses"}[args["buffer"]]
    return c.reencode()


def m_record_dropped(c):
    """A step never recorded: the host would hold a third update."""
    edit_program(c.plan, step(c.plan, "record-stat", kind="step"), delete=1)
    return c.reencode()


def m_record_after_validation(c):
    """The interval's last update recorded after its validation pass began."""
    p = c.plan["program"]
    at = step(c.plan, "validation-begin") - 1
    assert p[at][0] == "record-stat"
    p[at], p[at + 1] = p[at + 1], p[at]
    return c.reencode()


def m_initial_from_step_losses(c):
    c.plan["program"][step(c.plan, "record-stat", kind="initial")][1]["buffer"] = "step_losses"
    return c.reencode()


def m_lr_midpoint():
    return learner_case(lr=str(M + Fraction(1, 2 ** 70)), beta1="0", beta2="0")


def m_lr_second_step():
    return learner_case(lr=str(M + Fraction(1, 2 ** 60)), beta1="0", beta2=str(Fraction(1, 2 ** 40)))


def m_lr_continuation():
    return learner_case(steps=4, lr=str(M + Fraction(1, 2 ** 55)), beta1="0", beta2=str(Fraction(1, 2 ** 11)))


# (name, base, owner, mutate, fragments of the refusal that name the item)
MUTATIONS = [
    # (name, base, owner, mutate, fragments of the refusal that name the item)
    ("relocation-moved", "cpu", "device-relocations", m_reloc_offset,
     ["launch", "argument", "its relocation says plane"]),
    ("extent-past-plane", "cpu", "device-relocations", m_extent,
     ["(matmul_forward) argument out", "outside plane logits"]),
    ("memset-past-plane", "cpu", "device-relocations", m_memset_overrun,
     ["memset flag+0 (8 bytes)", "outside plane flag (4 bytes)"]),
    ("relocation-plane", "cpu", "device-relocations", m_relocation_plane, ["launch", "its relocation says plane"]),
    ("tile-counter-step-plane", "cpu", "device-extents", m_tile_counter_step_plane,
     ["(matmul_backward_input): its tile_counter is plane flag (step, i32, 4 bytes)", "persistent i32 plane"]),
    ("tile-counter-shared", "cpu", "device-extents", m_tile_counter_shared,
     ["touches tile counter plane tile_counter", "only the launches given it"]),
    ("persistent-overlap", "cpu", "device-lifetimes", m_persistent_overlap,
     ["planes m (persistent) and logits (step) share"]),
    ("step-overlap", "cpu", "device-lifetimes", m_step_overlap, ["ln1 (step)", "qkv (step)", "share arena bytes"]),
    ("restore-touches-staging", "cpu", "device-lifetimes", m_restore_touches_staging,
     ["piece restore", "command 2", "touches transfer plane staging"]),
    ("inner-repeat-short", "cpu", "schedule-issues-run", m_inner_count,
     ["train issues ring entry 6 (update) 9 times", "needs 10", "alternates update and update_1"]),
    ("final-restore-dropped", "cpu", "schedule-issues-run", m_drop_final_restore,
     ["ring entry 10 (restore) 9 times", "needs 10"]),
    ("predict-extra", "cpu", "schedule-issues-run", m_predict_count,
     ["predict issues ring entry 5 (forward) 5 times", "needs 4"]),
    ("cast-before-load", "cpu", "schedule-weights-cast", m_cast_before_load,
     ["piece forward command", "reads the fp16 weights", "piece load_scatter_0 command",
      "-> params+", "wrote params after the last whole cast_half", "(piece cast_weights) after the load"]),
    ("cast-from-m", "cpu", "schedule-weights-cast", m_cast_from_m,
     ["reads the fp16 weights", "piece cast_weights command 0 (launch cast_half) wrote weights after"]),
    ("advance-short", "cpu", "schedule-steps-fresh", m_advance_short, ["update 2", "moved by [127]"]),
    ("advance-before-read", "cpu", "schedule-steps-fresh", m_advance_first,
     ["update 1", "moved by [128] since it was set"]),
    ("no-adamw-scalars", "cpu", "schedule-steps-fresh", m_no_scalars, ["update 1", "adamw-scalars ran 0 times"]),
    ("context-short", "cpu", "schedule-steps-fresh", m_short_context, ["update 1", "128 tokens, one context is 129"]),
    ("wrap-dropped", "cpu", "schedule-steps-fresh", m_wrap_dropped,
     ["reads 129 tokens at the cursor with no cursor-wrap", "could straddle the stream's end"]),
    ("wrap-short", "cpu", "schedule-steps-fresh", m_wrap_short, ["it wraps for 128", "could straddle"]),
    ("validation-stays", "cpu", "schedule-steps-fresh", m_validation_stays,
     ["validation forward 2 of the pass at host step", "moved by [] since forward 1"]),
    ("targets-unshifted", "cpu", "schedule-steps-fresh", m_targets_unshifted,
     ["(crossentropy_forward_backward): targets is context+0", "the context plane's byte 4"]),
    ("chunk-read-twice", "cpu", "schedule-moves-checkpoint", m_read_twice, ["load read 1 takes checkpoint bytes [0, "]),
    ("scatter-wrong-part", "cpu", "schedule-moves-checkpoint", m_scatter_wrong_part,
     ["load_scatter_0 command 1", "writes m bytes [0, ", "a second time"]),
    ("publish-out-of-order", "cpu", "schedule-moves-checkpoint", m_publish_out_of_order,
     ["publication at host step", "writes checkpoint bytes at offset 1048576", "next is at 0"]),
    ("stage-short", "cpu", "schedule-moves-checkpoint", m_stage_short,
     ["after the load, plane v bytes [482048, 482304)"]),
    ("gather-wrong-part", "cpu", "schedule-moves-checkpoint", m_gather_wrong_part,
     ["checkpoint bytes [0, 65536) come from m bytes", "must be params bytes"]),
    ("reissue-first", "cpu", "schedule-reissues", m_reissue_first,
     ["predict host step", "reissues ring entry 5 (forward)"]),
    ("ring-entries-swapped", "cpu", "schedule-reissues", m_ring_entries_swapped,
     ["ring entry 5 (forward) command 1", "the realization has memset flag+0"]),
    ("stream-targets", "cpu", "schedule-reissues", m_stream_targets,
     ["ring entry 6 (update) command 0", "h2d host context+4 -> context+0",
      "the plan's piece has h2d host context+0"]),
    ("ring-short", "cpu", "schedule-reissues", m_ring_short, ["ring entry 6 (update) holds"]),
    ("buffers-overlap", "cpu", "schedule-request", m_buffers_overlap,
     ["host buffers staging", "and context", "share bytes"]),
    ("fill-past-buffer", "cpu", "schedule-request", m_fill_overrun,
     ["host step 0 (fill)", "outside host buffer context (516 bytes)"]),
    ("predictions-past-buffer", "cpu", "schedule-request", m_predictions_overrun,
     ["predict host step", "(write)", "outside host buffer report_predictions (512 bytes)"]),
    ("report-never-written", "cpu", "schedule-steps-fresh", m_report_never_written,
     ["piece restore must copy losses+0 (512 bytes) to a host buffer's byte 0", "it copies neither"]),
    ("updates-differ", "cpu", "schedule-steps-fresh", m_updates_differ,
     ["piece update_1 command 0 is h2d host context+0 -> context+0", "it must be update's with host buffers"]),
    ("record-other-buffer", "cpu", "schedule-steps-fresh", m_record_other_buffer,
     ["records update 1 (update_1)", "to host buffer step_losses_1", "it reads host buffer step_losses"]),
    ("interval-ends-on-update-1", "cpu", "schedule-steps-fresh", m_interval_ends_on_update_1,
     ["the final forward copies host buffer context, which holds context", "final_loss scores the last"]),
    ("steps-scalars-out-of-order", "cpu-k2", "schedule-steps-fresh", m_scalars_out_of_order,
     ["adamw-scalars of slot 1 after 0 since the last update", "in slot order"]),
    ("steps-contexts-swapped", "cpu-k2", "schedule-steps-fresh", m_contexts_swapped,
     ["train update 1", "its context was read before the cursor's last context"]),
    ("steps-one-scalars-for-two", "cpu-k2", "schedule-steps-fresh", m_one_scalars_for_two,
     ["adamw-scalars ran 1 times since the last update", "(2 an update)"]),
    ("steps-record-slot-offset", "cpu-k2", "schedule-steps-fresh", m_record_slot_offset,
     ["records update 2 (update), which copies its losses and flag to host buffer step_losses+516",
      "it reads host buffer step_losses+0"]),
    ("record-dropped", "cpu", "schedule-steps-fresh", m_record_dropped,
     ["adamw-scalars with 2 updates not yet recorded", "at most 2"]),
    ("record-after-validation", "cpu", "schedule-steps-fresh", m_record_after_validation,
     ["validation-begin with updates [10] not yet recorded"]),
    ("initial-from-step-losses", "cpu", "schedule-steps-fresh", m_initial_from_step_losses,
     ["record-stat initial reads host buffer step_losses", "the restore piece copies to report_losses"]),
    ("generate-no-window", "cpu", "schedule-generate", m_generate_no_window,
     ["generate host step", "the forward takes no window written since the last token"]),
    ("generate-batch-forward", "cpu", "schedule-issues-run", m_generate_batch_forward,
     ["generate issues ring entry 5 (forward) 2 times", "the run needs 0 (not a piece of this run)"]),
    ("generate-half-row", "cpu", "schedule-generate", m_generate_half_row,
     ["(sample-token): samples from sample_logits (64 rows, 16384 bytes)", "not from the sample piece's copy"]),
    ("predict-writes-sample", "cpu", "schedule-generate", m_predict_writes_sample,
     ["predict host step", "write-sample", "only generate samples"]),
    ("flag-not-zeroed", "cpu", "device-written", m_no_flag_memset,
     ["(nonfinite_check) argument flag", "reads plane flag bytes [0, 4)"]),
    ("dresidual-not-zeroed", "cpu", "device-written", m_no_dresidual_memset,
     ["(layernorm_backward) argument dinp", "piece update", "reads plane dresidual"]),
    ("restore-before-forward", "cpu", "device-written", m_restore_first,
     ["predict host step", "piece restore", "reads plane losses bytes [0, 512)"]),
    ("layer-ahead", "cpu", "device-written", m_layer_ahead,
     ["(matmul_forward) argument inp", "reads plane ln1 bytes [16384, "]),
    ("eps-word-table", "cpu", "learner-step-words", m_eps_word,
     ["(adamw): the eps word in the block", "the step-word table says"]),
    ("step-word-offset", "cpu", "learner-step-words", m_step_word_offset,
     ["(adamw): the step_size word is patched at parameter byte 60", "takes step_size at byte 64"]),
    ("plan-eps", "cpu", "learner-step-words", m_plan_eps, ["(adamw): step words", "eps*S"]),
    ("beta2-word", "cpu", "learner-step-words", m_beta2_word,
     ["(adamw): beta2 word 0x3f700000", "the learner's is 0x3f733333"]),
    ("adamw-missing", "cpu", "learner-coverage", m_adamw_missing, ["never update params elements", "(tensor ln1w)"]),
    ("nonfinite-misses-tensor", "cpu", "learner-coverage", m_nonfinite_misses_tensor,
     ["update step 0's 1 nonfinite_check launches never check grads elements", "(tensor lnfb)",
      "before AdamW applies"]),
    ("steps-adamw-missing-in-step-1", "cpu-k2", "learner-coverage", m_adamw_missing_in_step_1,
     ["update step 1's 1 AdamW launches never update params elements", "(tensor ln1w)"]),
    ("step-word-slot", "cpu-k2", "learner-step-words", m_slot_swapped,
     ["its step-word row has slot 0; the launch is in step 1 of its ring entry"]),
    ("nonfinite-after-adamw", "cpu", "learner-coverage", m_nonfinite_after_adamw,
     ["(nonfinite_check): checks gradients after launch", "(adamw) has applied them"]),
    ("adamw-doubled", "cpu", "learner-coverage", m_adamw_doubled,
     ["(adamw): updates params elements", "a second time"]),
    ("adamw-shifted", "cpu", "learner-coverage", m_adamw_shifted,
     ["(adamw): updates params elements", "a second time"]),
    ("adamw-grads-elsewhere", "cpu", "learner-coverage", m_adamw_grads_elsewhere, ["start at different elements"]),
    ("adamw-mixed-decay", "cpu", "learner-step-words", m_adamw_mixed_decay,
     ["(adamw): updates tensors", "some are decayed"]),
    ("count-into-next-tensor", "cpu", "device-extents", m_count_into_next_tensor,
     ["(adamw) argument params", "runs from tensor wte", "into ln1w of plane params"]),
    ("count-into-next-layer", "cpu", "device-extents", m_count_into_next_layer,
     ["(attention_forward) argument out", "runs from layer 0 into layer 1 of plane atty"]),
    ("rows-into-next-layer", "cpu", "device-extents", m_rows_into_next_layer,
     ["(matmul_forward) argument out", "from layer 0 into layer 1 of plane qkv"]),
    ("grid-too-small", "cpu", "device-geometry", m_grid_too_small, ["(adamw): grid [463, 1, 1]", "grid [464, 1, 1]"]),
    ("grid-too-large", "cpu", "device-geometry", m_grid_too_large,
     ["(residual_layernorm_forward): grid", "the kernel covers its work"]),
    ("block-too-small", "cpu", "device-geometry", m_block_too_small,
     ["(layernorm_forward): grid", "block [128, 1, 1]", "block [256, 1, 1]"]),
    ("cluster-halved", "cpu", "device-geometry", m_cluster_halved,
     ["(matmul_backward_weight): launched in clusters of 4 blocks", "from clusters of 8"]),
    ("programmatic-after-memset", "h200", "device-geometry", m_programmatic_after_memset,
     ["programmatic True; on sm_90 with 132 SMs, after no launch in its piece, it is not programmatic"]),
    ("programmatic-dropped", "h200", "device-geometry", m_programmatic_dropped,
     ["programmatic False; on sm_90 with 132 SMs, after a launch of grid [", "it is programmatic"]),
    ("programmatic-beside-a-larger-grid", "h200", "device-geometry", m_programmatic_beside_a_larger_grid,
     ["programmatic True; on sm_90 with 1 SMs, after a launch of grid [", "it is not programmatic"]),
    ("programmatic-on-cpu", "cpu", "device-geometry", m_programmatic_on_cpu,
     ["programmatic True; on ", "not programmatic"]),
    ("flags-on-memset", "h200", "device-relocations", m_flags_on_memset,
     ["(memset): flags 0x1; only a launch may carry a flag"]),
    ("lr-at-midpoint", None, "learner-schedule", m_lr_midpoint,
     ["step 1 of the run: the host computes 0x3f800000, the exact step size is 0x3f800001"]),
    ("lr-second-step", None, "learner-schedule", m_lr_second_step, ["step 2 of the run", "0x3f800001"]),
    ("lr-continuation", None, "learner-schedule", m_lr_continuation,
     ["step 5 (a continuation from a checkpoint at step 4 or before)"]),
    ("arch-other-card", "h200", "card-arch", lambda c: with_profile(c, **target_profile("rtx3090")),
     ["built for arch sm_90 (target h200)", "NVIDIA GeForce RTX 3090 is sm_86"]),
    ("arch-kernel-info", "h200", "card-arch", lambda c: with_kernel_info(c, arch="sm_80"), ["realized for arch sm_80"]),
    ("arch-cpu-on-h200", "cpu", "card-arch", lambda c: with_profile(c, **target_profile("h200")),
     ["built for arch numpy"]),
    ("registers", "h200", "card-kernels", lambda c: with_profile(c, registers_per_block=4096),
     ["registers per block", "NVIDIA H200 has 4096"]),
    ("shared", "h200", "card-kernels", lambda c: with_profile(c, shared_bytes_per_block=1024),
     ["shared bytes per block", "NVIDIA H200 has 1024"]),
    ("block-too-big", "h200", "card-kernels",
     lambda c: (command(c.plan, "update", kernel="adamw").__setitem__("block", [2048, 1, 1]), c.reencode())[1],
     ["(adamw): grid", "block [2048, 1, 1] outside CUDA's limits"]),
    ("max-threads", "h200", "card-kernels", lambda c: with_kernel_info(c, "adamw", max_threads=128), ["adamw", "128"]),
    ("rtx3090-batch-64", "rtx3090-big", "card-memory", lambda c: c,
     ["arena needs 38,087,472,640 bytes", "NVIDIA GeForce RTX 3090 has 25,447,170,048 available"]),
    ("gb10-host-block", "gb10", "card-memory",
     lambda c: with_profile(c, memory_bytes=c.plan["arena"]["bytes"] + c.plan["host"]["bytes"] - 1),
     ["pinned host block", "1 too many"]),
    ("alignment", "cpu", "card-memory", lambda c: with_profile(c, alignment=512),
     ["aligns planes to 256 bytes", "needs 512"]),
    ("old-driver", "h200", "card-driver", lambda c: with_profile(c, driver_branch=470),
     ["driver branch 470 on NVIDIA H200", "sm_90 cubins"]),
    ("no-unified-addressing", "gb10", "card-driver", lambda c: with_profile(c, unified_addressing=False),
     ["NVIDIA GB10: unified addressing is False", "system memory"]),
    ("cpu-with-driver", "cpu", "card-driver", lambda c: with_profile(c, driver_branch=580),
     ["numpy reference device needs no driver", "branch 580"]),
]
