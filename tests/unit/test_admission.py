"""Admission: good plans for every target and model pass every check; a mutation suite of
corruptions of good plans, realizations, tables and card profiles is each refused by the check that
owns it, with a message naming the item; the learner's interval shortcut agrees with the exact path.
"""
import copy
import json
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest
import yaml

from coppelius.admit import CHECKS, admit, refusal_of
from coppelius.admit import step_size as adm
from coppelius.config import ROOT, resolve, target_profile
from coppelius.errors import CoppeliusError
from coppelius.formats import tables
from coppelius.formats.step_size import nearest_f32, step_size_exact, step_size_host
from coppelius.plan.build import build_plan
from coppelius.formats.kernels import KERNELS, param_layout
from coppelius.realize import realize
from coppelius.realize.encode import encode_program
from coppelius.realize.tables import realized_tables

DEFAULTS = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
FAST = {"steps": 20, "interval": 10, "eval_contexts": 4}
NAMES = [name for name, _ in CHECKS]
GPU_ARTIFACTS: dict[str, tuple[bytes, bytes, str | None]] = {}  # arch -> (image, kernel_info, why synthetic)


def synthetic_kernel_info(arch: str) -> bytes:
    return json.dumps({"format": "coppelius-kernel-info", "version": 1, "arch": arch, "kernels": {
        name: {"registers": 32, "shared_bytes": 0, "max_threads": 1024, "param_bytes": param_layout(name)[1]}
        for name in sorted(KERNELS)}}).encode()


def realization_for(plan: dict, profile: dict) -> tuple[dict, str | None]:
    """(realization, why it is synthetic or None). GPU targets compile once per arch per session."""
    arch = profile["arch"]
    if arch == "numpy":
        return realize(plan, profile), None
    if arch not in GPU_ARTIFACTS:
        try:
            real = realize(plan, profile)
            GPU_ARTIFACTS[arch] = (real["image"], real["kernel_info"], None)
        except CoppeliusError as e:
            GPU_ARTIFACTS[arch] = (b"synthetic image", synthetic_kernel_info(arch),
                                   f"GPU realization for {arch} is not there ({str(e)[:160]}): kernel_info is synthetic")
    image, info, why = GPU_ARTIFACTS[arch]
    return {"image": image, "kernel_info": info, **encode_program(plan)}, why


@dataclass
class Case:
    plan: dict
    realization: dict
    realized: dict
    profile: dict
    synthetic: str | None

    def copy(self) -> "Case":
        return Case(copy.deepcopy(self.plan), dict(self.realization), dict(self.realized), dict(self.profile),
                    self.synthetic)

    def reencode(self) -> "Case":
        """The realization and tables of this (mutated) plan, as the build would make them."""
        self.realization, self.synthetic = realization_for(self.plan, self.profile)
        self.realized = realized_tables(self.realization["launches"])
        return self

    def certificate(self) -> dict:
        return admit(self.plan, self.realization, self.realized, self.profile)


def build(target: str, model: str = "tiny", batch: int = 2, **over) -> Case:
    config = resolve(DEFAULTS | FAST | {"target": target, "model": model, "batch": batch} | over)
    return Case(build_plan(config), {}, {}, config.target, None).reencode()


BASES: dict = {}


def base(key: str) -> Case:
    """Good cases, built once per session and copied for each mutation."""
    if key not in BASES:
        BASES[key] = {"cpu": lambda: build("cpu"), "h200": lambda: build("h200"), "gb10": lambda: build("gb10"),
                      "rtx3090-big": lambda: build("rtx3090", "gpt2-124m", 64)}[key]()
    return BASES[key].copy()


# ---------------------------------------------------------------------------- editing helpers
def step(plan: dict, op: str, after: int = 0, **match) -> int:
    """The index of the first host-program step `op` at or after `after` whose arguments match."""
    return next(i for i, (o, a) in enumerate(plan["program"]) if i >= after and o == op and
                all(a.get(k) == v for k, v in match.items()))


def edit_program(plan: dict, at: int, delete: int = 0, insert=()) -> None:
    """Replace `delete` steps at `at` with `insert`, keeping repeat bodies and jumps right."""
    delta = len(insert) - delete
    for q, (op, args) in enumerate(plan["program"]):
        if op == "repeat" and q < at <= q + args["body"]:
            args["body"] += delta
        if op == "operation" and args["predict"] > at:
            args["predict"] += delta
    plan["program"][at:at + delete] = list(insert)
    for k, v in plan["labels"].items():
        if v > at:
            plan["labels"][k] = v + delta


def piece(plan: dict, name: str) -> dict:
    return plan["pieces"][plan["ring"].index(name)]


def command(plan: dict, name: str, **match) -> dict:
    """The first command of piece `name` whose fields (and dst/src plane names) match."""
    for c in piece(plan, name)["commands"]:
        ok = all(c.get(k) == v for k, v in match.items() if k not in ("dst_plane", "src_plane"))
        if "dst_plane" in match:
            ok = ok and isinstance(c.get("dst"), dict) and c["dst"].get("plane") == match["dst_plane"]
        if "src_plane" in match:
            ok = ok and isinstance(c.get("src"), dict) and c["src"].get("plane") == match["src_plane"]
        if ok:
            return c
    raise KeyError(match)


def arg(c: dict, name: str):
    return c["args"][[n for n, _ in KERNELS[c["kernel"]]].index(name)]


def set_arg(c: dict, name: str, value) -> None:
    c["args"][[n for n, _ in KERNELS[c["kernel"]]].index(name)] = value


def edit_table(data: bytes, kind: str, fn) -> bytes:
    records, blob = tables.unpack(kind, data)
    records, blob = records.copy(), bytearray(blob)
    fn(records, blob)
    return tables.pack(kind, records, bytes(blob))


def setf(records, i: int, field: str, value) -> None:
    records[field][i] = value


def stream_index(case: Case, ring_name: str, j: int) -> int:
    ring, _ = tables.unpack("ring", case.realization["ring"])
    return int(ring[case.plan["ring"].index(ring_name)]["offset"]) + j


def with_profile(case: Case, **fields) -> Case:
    case.profile = case.profile | fields
    return case


def with_kernel_info(case: Case, kernel: str | None = None, **fields) -> Case:
    info = json.loads(case.realization["kernel_info"])
    if kernel is None:
        info.update(fields)
    else:
        info["kernels"][kernel].update(fields)
    case.realization = case.realization | {"kernel_info": json.dumps(info).encode()}
    return case


def learner_case(steps: int = 20, **ratios) -> Case:
    return build("cpu", steps=steps, interval=min(steps, 10), **ratios)


M = Fraction(2 ** 24 + 1, 2 ** 24)  # the midpoint between binary32 1.0 and the next one up


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
        {"op": "d2h", "src": {"plane": "staging", "offset": 0}, "dst": {"buffer": "report_losses", "offset": 0}, "bytes": 4})
    return c.reencode()


def m_inner_count(c):
    c.plan["program"][step(c.plan, "repeat", count=c.plan["run"]["interval"])][1]["count"] -= 1
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_drop_final_restore(c):
    edit_program(c.plan, step(c.plan, "reissue", ring=c.plan["ring"].index("restore")), delete=1)
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_predict_count(c):
    c.plan["program"][c.plan["labels"]["predict"]][1]["count"] += 1
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_advance_short(c):
    c.plan["program"][step(c.plan, "cursor-advance")][1]["tokens"] -= 1
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_advance_first(c):
    at = step(c.plan, "read-at-cursor", after=step(c.plan, "repeat"))
    body = c.plan["program"][at:at + 5]
    c.plan["program"][at:at + 5] = [body[4]] + body[:4]
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_no_scalars(c):
    edit_program(c.plan, step(c.plan, "adamw-scalars"), delete=1)
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_short_context(c):
    c.plan["program"][step(c.plan, "read-at-cursor", after=step(c.plan, "repeat"))][1]["tokens"] -= 1
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_targets_unshifted(c):
    command(c.plan, "update", op="h2d", dst_plane="targets")["src"]["offset"] = 0
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
    c.plan["program"][step(c.plan, "submit", after=c.plan["labels"]["predict"], ring=c.plan["ring"].index("forward"))][0] = "reissue"
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_ring_entries_swapped(c):
    def swap(r, b):
        r[5]["offset"], r[6]["offset"] = int(r[6]["offset"]), int(r[5]["offset"])
    c.realization["ring"] = edit_table(c.realization["ring"], "ring", swap)
    return c


def m_stream_targets(c):
    j = stream_index(c, "update", piece(c.plan, "update")["commands"].index(command(c.plan, "update", op="h2d", dst_plane="targets")))
    c.realization["commands"] = edit_table(c.realization["commands"], "commands",
                                           lambda r, b: setf(r, j, "src_offset", 0))
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


def m_fill_overrun(c):
    c.plan["program"][step(c.plan, "fill")][1]["bytes"] += 4
    return c.reencode()  # realized from the mutation, so that only admission can catch it


def m_predictions_overrun(c):
    c.plan["program"][step(c.plan, "write", file="predictions")][1]["bytes"] += 4
    return c.reencode()  # realized from the mutation, so that only admission can catch it


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


def m_eps_word(c):
    c.realized["step_words"] = edit_table(c.realized["step_words"], "step_words",
                                          lambda r, b: setf(r, 2, "eps", r[2]["eps"] + 1))
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
    a = [x for x in piece(c.plan, "update")["commands"] if x.get("kernel") == "adamw"][3]
    set_arg(a, "beta2", "0x3f700000")
    return c.reencode()


def _adamw(c, tensor):
    """The update's AdamW launch of a parameter tensor."""
    offset = next(t["offset"] for t in c.plan["tensors"] if t["name"] == tensor)
    return next(x for x in piece(c.plan, "update")["commands"] if x.get("kernel") == "adamw" and
                arg(x, "params")["offset"] == 4 * offset)


def m_adamw_missing(c):
    piece(c.plan, "update")["commands"].remove(_adamw(c, "ln1b"))
    return c.reencode()


def m_adamw_doubled(c):
    cmds = piece(c.plan, "update")["commands"]
    launch = _adamw(c, "wpe")
    cmds.insert(cmds.index(launch) + 1, copy.deepcopy(launch))
    return c.reencode()


def m_adamw_shifted(c):
    """The ln1b launch moved onto ln1w (the same size): ln1w updated twice, ln1b never."""
    moved, onto = _adamw(c, "ln1b"), _adamw(c, "ln1w")
    for name in ("params", "m", "v", "grads", "half"):
        set_arg(moved, name, copy.deepcopy(arg(onto, name)))
    return c.reencode()


def m_adamw_params_only(c):
    set_arg(_adamw(c, "ln1b"), "params", copy.deepcopy(arg(_adamw(c, "ln1w"), "params")))
    return c.reencode()


def m_count_into_next_tensor(c):
    launch = _adamw(c, "wte")
    set_arg(launch, "N", arg(launch, "N") + 1)
    return c.reencode()


def _layer0(c, kernel, out_plane):
    return next(x for x in piece(c.plan, "forward")["commands"] if x.get("kernel") == kernel and
                arg(x, "out")["plane"] == out_plane)


def m_count_into_next_layer(c):
    gelu = _layer0(c, "gelu_forward", "fch_gelu")
    set_arg(gelu, "N", 2 * arg(gelu, "N"))
    return c.reencode()


def m_rows_into_next_layer(c):
    qkv = _layer0(c, "matmul_forward", "qkv")
    set_arg(qkv, "N", 2 * arg(qkv, "N"))
    return c.reencode()


def m_grid_too_small(c):
    _adamw(c, "wte")["grid"][0] -= 1
    return c.reencode()


def m_grid_too_large(c):
    _layer0(c, "gelu_forward", "fch_gelu")["grid"][0] += 1
    return c.reencode()


def m_block_too_small(c):
    _layer0(c, "layernorm_forward", "ln1")["block"] = [128, 1, 1]
    return c.reencode()


def m_lr_midpoint():
    return learner_case(lr=str(M + Fraction(1, 2 ** 70)), beta1="0", beta2="0")


def m_lr_second_step():
    return learner_case(lr=str(M + Fraction(1, 2 ** 60)), beta1="0", beta2=str(Fraction(1, 2 ** 40)))


def m_lr_continuation():
    return learner_case(steps=4, lr=str(M + Fraction(1, 2 ** 55)), beta1="0", beta2=str(Fraction(1, 2 ** 11)))


MUTATIONS = [
    # (name, base, owner, mutate, fragments of the refusal that name the item)
    ("relocation-moved", "cpu", "device-relocations", m_reloc_offset, ["launch", "argument", "its relocation says plane"]),
    ("extent-past-plane", "cpu", "device-relocations", m_extent, ["(matmul_forward) argument out", "outside plane logits"]),
    ("memset-past-plane", "cpu", "device-relocations", m_memset_overrun, ["memset flag+0 (8 bytes)", "outside plane flag (4 bytes)"]),
    ("relocation-plane", "cpu", "device-relocations", m_relocation_plane, ["launch", "its relocation says plane"]),
    ("persistent-overlap", "cpu", "device-lifetimes", m_persistent_overlap, ["planes m (persistent) and logits (step) share"]),
    ("step-overlap", "cpu", "device-lifetimes", m_step_overlap, ["ln1 (step)", "qkv (step)", "share arena bytes"]),
    ("restore-touches-staging", "cpu", "device-lifetimes", m_restore_touches_staging,
     ["piece restore", "command 2", "touches transfer plane staging"]),
    ("inner-repeat-short", "cpu", "schedule-issues-run", m_inner_count, ["train issues ring entry 6 (update) 18 times", "needs 20"]),
    ("final-restore-dropped", "cpu", "schedule-issues-run", m_drop_final_restore, ["ring entry 9 (restore) 1 times", "needs 2"]),
    ("predict-extra", "cpu", "schedule-issues-run", m_predict_count, ["predict issues ring entry 5 (forward) 5 times", "needs 4"]),
    ("advance-short", "cpu", "schedule-steps-fresh", m_advance_short, ["update 2", "moved by [127]"]),
    ("advance-before-read", "cpu", "schedule-steps-fresh", m_advance_first, ["update 1", "moved by [128] since it was set"]),
    ("no-adamw-scalars", "cpu", "schedule-steps-fresh", m_no_scalars, ["update 1", "adamw-scalars ran 0 times"]),
    ("context-short", "cpu", "schedule-steps-fresh", m_short_context, ["update 1", "128 tokens, one context is 129"]),
    ("targets-unshifted", "cpu", "schedule-steps-fresh", m_targets_unshifted, ["piece update: targets", "context byte 4"]),
    ("chunk-read-twice", "cpu", "schedule-moves-checkpoint", m_read_twice, ["load read 1 takes checkpoint bytes [0, "]),
    ("scatter-wrong-part", "cpu", "schedule-moves-checkpoint", m_scatter_wrong_part,
     ["load_scatter_0 command 1", "writes m bytes [0, ", "a second time"]),
    ("publish-out-of-order", "cpu", "schedule-moves-checkpoint", m_publish_out_of_order,
     ["publication at host step", "writes checkpoint bytes at offset 1048576", "next is at 0"]),
    ("stage-short", "cpu", "schedule-moves-checkpoint", m_stage_short, ["after the load, plane v bytes [482048, 482304)"]),
    ("gather-wrong-part", "cpu", "schedule-moves-checkpoint", m_gather_wrong_part,
     ["checkpoint bytes [0, 482304) come from m bytes", "must be params bytes"]),
    ("reissue-first", "cpu", "schedule-reissues", m_reissue_first, ["predict host step", "reissues ring entry 5 (forward)"]),
    ("ring-entries-swapped", "cpu", "schedule-reissues", m_ring_entries_swapped,
     ["ring entry 5 (forward) command 2", "the realization has memset flag+0"]),
    ("stream-targets", "cpu", "schedule-reissues", m_stream_targets,
     ["ring entry 6 (update) command", "h2d host context+0 -> targets+0", "the plan's piece has h2d host context+4"]),
    ("ring-short", "cpu", "schedule-reissues", m_ring_short, ["ring entry 6 (update) holds"]),
    ("buffers-overlap", "cpu", "schedule-request", m_buffers_overlap, ["host buffers staging", "and context", "share bytes"]),
    ("fill-past-buffer", "cpu", "schedule-request", m_fill_overrun, ["host step 0 (fill)", "outside host buffer context (516 bytes)"]),
    ("predictions-past-buffer", "cpu", "schedule-request", m_predictions_overrun,
     ["predict host step", "(write)", "outside host buffer report_predictions (512 bytes)"]),
    ("report-never-written", "cpu", "schedule-request", m_report_never_written,
     ["(record-stat)", "reads host buffer report_losses bytes [0, 512)", "nothing wrote"]),
    ("flag-not-zeroed", "cpu", "device-written", m_no_flag_memset, ["(nonfinite_check) argument flag", "reads plane flag bytes [0, 4)"]),
    ("dresidual-not-zeroed", "cpu", "device-written", m_no_dresidual_memset,
     ["(layernorm_backward) argument dinp", "piece update", "reads plane dresidual"]),
    ("restore-before-forward", "cpu", "device-written", m_restore_first,
     ["predict host step", "piece restore", "reads plane losses bytes [0, 512)"]),
    ("layer-ahead", "cpu", "device-written", m_layer_ahead, ["(matmul_forward) argument inp", "reads plane ln1 bytes [16384, "]),
    ("eps-word-table", "cpu", "learner-step-words", m_eps_word, ["(adamw): the eps word in the block", "the step-word table says"]),
    ("step-word-offset", "cpu", "learner-step-words", m_step_word_offset,
     ["(adamw): the step_size word is patched at parameter byte 60", "takes step_size at byte 64"]),
    ("plan-eps", "cpu", "learner-step-words", m_plan_eps, ["(adamw): step words", "eps*S"]),
    ("beta2-word", "cpu", "learner-step-words", m_beta2_word, ["(adamw): beta2 word 0x3f700000", "the learner's is 0x3f733333"]),
    ("adamw-missing", "cpu", "learner-coverage", m_adamw_missing, ["never update params elements", "(tensor ln1b)"]),
    ("adamw-doubled", "cpu", "learner-coverage", m_adamw_doubled, ["(adamw): updates params elements", "a second time"]),
    ("adamw-shifted", "cpu", "learner-coverage", m_adamw_shifted, ["(adamw): updates params elements", "a second time"]),
    ("adamw-params-elsewhere", "cpu", "learner-coverage", m_adamw_params_only, ["start at different elements"]),
    ("count-into-next-tensor", "cpu", "device-extents", m_count_into_next_tensor,
     ["(adamw) argument params", "runs from tensor wte", "into wpe of plane params"]),
    ("count-into-next-layer", "cpu", "device-extents", m_count_into_next_layer,
     ["(gelu_forward) argument out", "runs from layer 0 into layer 1 of plane fch_gelu"]),
    ("rows-into-next-layer", "cpu", "device-extents", m_rows_into_next_layer,
     ["(matmul_forward) argument out", "from layer 0 into layer 1 of plane qkv"]),
    ("grid-too-small", "cpu", "device-geometry", m_grid_too_small, ["(adamw): grid [63, 1, 1]", "grid [64, 1, 1]"]),
    ("grid-too-large", "cpu", "device-geometry", m_grid_too_large, ["(gelu_forward): grid", "the kernel covers its work"]),
    ("block-too-small", "cpu", "device-geometry", m_block_too_small,
     ["(layernorm_forward): grid", "block [128, 1, 1]", "block [256, 1, 1]"]),
    ("lr-at-midpoint", None, "learner-schedule", m_lr_midpoint,
     ["step 1 of the run: the host computes 0x3f800000, the exact step size is 0x3f800001"]),
    ("lr-second-step", None, "learner-schedule", m_lr_second_step, ["step 2 of the run", "0x3f800001"]),
    ("lr-continuation", None, "learner-schedule", m_lr_continuation,
     ["step 5 (a continuation from a checkpoint at step 4 or before)"]),
    ("arch-other-card", "h200", "card-arch", lambda c: with_profile(c, **target_profile("rtx3090")),
     ["built for arch sm_90 (target h200)", "NVIDIA GeForce RTX 3090 is sm_86"]),
    ("arch-kernel-info", "h200", "card-arch", lambda c: with_kernel_info(c, arch="sm_80"), ["realized for arch sm_80"]),
    ("arch-cpu-on-h200", "cpu", "card-arch", lambda c: with_profile(c, **target_profile("h200")), ["built for arch numpy"]),
    ("registers", "h200", "card-kernels", lambda c: with_profile(c, registers_per_block=4096),
     ["registers per block", "NVIDIA H200 has 4096"]),
    ("shared", "h200", "card-kernels", lambda c: with_profile(c, shared_bytes_per_block=1024),
     ["shared bytes per block", "NVIDIA H200 has 1024"]),
    ("block-too-big", "h200", "card-kernels",
     lambda c: (command(c.plan, "update", kernel="adamw").__setitem__("block", [2048, 1, 1]), c.reencode())[1],
     ["(adamw): grid", "block [2048, 1, 1] outside CUDA's limits"]),
    ("max-threads", "h200", "card-kernels", lambda c: with_kernel_info(c, "adamw", max_threads=128), ["adamw", "128"]),
    ("rtx3090-batch-64", "rtx3090-big", "card-memory", lambda c: c,
     ["arena needs 38,483,632,384 bytes", "NVIDIA GeForce RTX 3090 has 25,447,170,048 available"]),
    ("gb10-host-block", "gb10", "card-memory",
     lambda c: with_profile(c, memory_bytes=c.plan["arena"]["bytes"] + c.plan["host"]["bytes"] - 1),
     ["pinned host block", "1 too many"]),
    ("alignment", "cpu", "card-memory", lambda c: with_profile(c, alignment=512), ["aligns planes to 256 bytes", "needs 512"]),
    ("old-driver", "h200", "card-driver", lambda c: with_profile(c, driver_branch=470),
     ["driver branch 470 on NVIDIA H200", "sm_90 cubins"]),
    ("no-unified-addressing", "gb10", "card-driver", lambda c: with_profile(c, unified_addressing=False),
     ["NVIDIA GB10: unified addressing is False", "system memory"]),
    ("cpu-with-driver", "cpu", "card-driver", lambda c: with_profile(c, driver_branch=580),
     ["numpy reference device needs no driver", "branch 580"]),
]


def test_the_suite_covers_every_check_twice():
    assert len(MUTATIONS) >= 25 and len({m[0] for m in MUTATIONS}) == len(MUTATIONS)
    owners = [owner for _, _, owner, _, _ in MUTATIONS]
    for name in NAMES:
        assert owners.count(name) >= 2, name


@pytest.mark.parametrize("name, base_key, owner, mutate, fragments", MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_mutation_is_refused_by_its_owner(name, base_key, owner, mutate, fragments):
    case = mutate(base(base_key)) if base_key else mutate()
    certificate = case.certificate()
    failed = [o for o in certificate["checks"] if not o["passed"]]
    refusal = refusal_of(certificate)
    print(f"\n[{name}] {refusal}")
    assert not certificate["admitted"] and failed, f"{name} was admitted"
    assert failed[0]["check"] == owner, f"{name}: first refusal by {failed[0]['check']}: {failed[0]['detail']}"
    line = str(refusal)
    assert line.startswith(f"admission: check {owner} failed: ") and "\n" not in line
    for fragment in fragments:
        assert fragment in line, (fragment, line)


# ---------------------------------------------------------------------------- good plans
TARGET_MODELS = [(t, m) for t in ("cpu", "h200", "rtx3090", "gb10") for m in ("tiny", "small", "gpt2-124m")]


@pytest.mark.parametrize("target, model", TARGET_MODELS, ids=[f"{t}-{m}" for t, m in TARGET_MODELS])
def test_good_plans_pass(target, model):
    case = build(target, model, batch=1 if model == "gpt2-124m" else 2)
    certificate = case.certificate()
    assert [o["check"] for o in certificate["checks"]] == NAMES
    for o in certificate["checks"]:
        print(f"{'passed' if o['passed'] else 'FAILED':<7} {o['check']:<26} {o['detail']}")
    compat = [o for o in certificate["checks"] if o["check"].startswith("card-")]
    others = [o for o in certificate["checks"] if not o["check"].startswith("card-")]
    assert all(o["passed"] for o in others), [o for o in others if not o["passed"]]
    assert certificate["step_horizon"] >= case.plan["run"]["steps"]
    if case.synthetic:
        pytest.skip(f"card checks on {target}: {case.synthetic}")
    assert all(o["passed"] for o in compat), [o for o in compat if not o["passed"]]
    assert certificate["admitted"] and refusal_of(certificate) is None


def test_default_run_passes_with_its_full_schedule():
    """The default configuration's 600 steps, 3 publications and 16 evaluation contexts."""
    config = resolve(DEFAULTS | {"batch": 2})
    case = Case(build_plan(config), {}, {}, config.target, None).reencode()
    certificate = case.certificate()
    assert certificate["admitted"], refusal_of(certificate)
    assert certificate["step_horizon"] == adm.UNBOUNDED


def test_a_malformed_plan_is_refused_not_crashed():
    case = base("cpu")
    del case.plan["pieces"][6]["commands"][3]["args"]
    certificate = case.certificate()
    print(refusal_of(certificate))
    assert not certificate["admitted"]
    assert "malformed where this check reads it (KeyError: 'args')" in str(refusal_of(certificate))


# ---------------------------------------------------------------------------- the learner's shortcut
LEARNERS = [(Fraction(3, 1000), Fraction(9, 10), Fraction(95, 100)), (Fraction(6, 10000), Fraction(9, 10), Fraction(999, 1000)),
            (Fraction(1, 1000), Fraction(1, 2), Fraction(3, 4)), (Fraction(1, 7), Fraction(99, 100), Fraction(9999, 10000))]


@pytest.mark.parametrize("lr, b1, b2", LEARNERS)
def test_interval_decisions_agree_with_the_exact_path(lr, b1, b2):
    e = adm.Enclosures(b1, b2)
    sample = set(range(1, 151)) | {300, 1000, 2500}
    decided = 0
    for t in range(1, max(sample) + 1):
        e.next()
        if t not in sample:
            continue
        for i, b in enumerate((b1, b2)):  # the enclosures hold the exact powers
            assert Fraction(e.lo[i], 1 << adm.K) <= b ** t <= Fraction(e.hi[i], 1 << adm.K)
        exact = step_size_exact(lr, b1, b2, t)
        below, above = np.nextafter(exact, np.float32(0)), np.nextafter(exact, np.float32(np.inf))
        assert adm.decide(lr, e, exact) in (1, 0)
        assert adm.decide(lr, e, below) in (-1, 0) and adm.decide(lr, e, above) in (-1, 0)
        decided += adm.decide(lr, e, exact) == 1
        host = step_size_host(float(lr), float(b1), float(b2), t)
        verdict = adm.decide(lr, e, host)
        assert verdict == 0 or (verdict == 1) == (host == exact)
    assert decided == len(sample)  # away from midpoints the shortcut always decides


@pytest.mark.parametrize("lr, b1, b2", LEARNERS)
def test_the_tail_starts_where_both_powers_are_tiny_and_agrees_with_the_exact_path(lr, b1, b2):
    c = adm.certify(lr, b1, b2, 600)
    assert c["first_bad"] is None and c["horizon"] == adm.UNBOUNDED
    t, tiny = c["tail"], Fraction(1, 1 << adm.TAIL_BITS)
    if t > 50_000:  # exact rationals past that take minutes
        return
    bigs = [max(b, Fraction(float(b))) for b in (b1, b2)]
    assert all(big ** t <= tiny for big in bigs) and max(bigs) ** (t - 2) > tiny  # never early, at most a step late
    g = adm.tail_value(lr, b1, b2)
    for s in (t, t + 1, t + 977):
        assert step_size_exact(lr, b1, b2, s) == g == step_size_host(float(lr), float(b1), float(b2), s)


def test_undecided_steps_fall_back_to_the_exact_path(monkeypatch):
    """x(t) exactly at a midpoint (lr = the midpoint above 1.0, betas 0): the enclosure cannot decide;
    the exact path does (ties to even: 1.0), and agrees with the host."""
    e = adm.Enclosures(Fraction(0), Fraction(0))
    e.next()
    assert adm.decide(M, e, np.float32(1.0)) == 0
    assert step_size_exact(M, Fraction(0), Fraction(0), 1) == np.float32(1.0) == step_size_host(float(M), 0.0, 0.0, 1)
    adm.certify.cache_clear()
    monkeypatch.setattr(adm, "tail_value", lambda *betas: None)  # no tail proof: every step one by one
    monkeypatch.setattr(adm, "REQUIRED_HORIZON", 40)
    c = adm.certify(M, Fraction(0), Fraction(0), 20)
    assert c["first_bad"] is None and c["exact"] == 40 and c["decided"] == 0 and c["horizon"] == 40
    adm.certify.cache_clear()


def test_a_long_way_to_the_tail_is_fast_and_unbounded():
    """beta2 = 0.999: about 41,500 steps one by one before the tail; well under a second or two."""
    import time
    adm.certify.cache_clear()
    start = time.time()
    c = adm.certify(Fraction(6, 10000), Fraction(9, 10), Fraction(999, 1000), 100_000)
    assert c["first_bad"] is None and c["horizon"] == adm.UNBOUNDED and c["tail"] > 40_000
    assert time.time() - start < 10


def test_nearest_is_monotone_where_the_tail_needs_it():
    lr = Fraction(3, 1000)
    assert nearest_f32(lr * (1 - Fraction(1, 2 ** 60))) == nearest_f32(lr) == nearest_f32(lr / (1 - Fraction(1, 2 ** 60)))
