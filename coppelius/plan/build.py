"""Stage 3, plan: configuration -> the whole run as data.

The plan holds the arena (every plane), the host buffers, the pieces (every launch and copy of
every submission), the ring order, the host program, and the contracts that the checkpoint,
token stream and result record must meet. Everything is a pure function of the configuration;
the target enters only through its alignment and arch.
"""

import math

from .. import canonical
from ..config import Config
from ..formats import checkpoint
from ..formats.geometry import layernorm_backward_blocks, lm_head_leaves_stats, stats_width
from ..formats.kernels import KERNELS
from ..formats.step_size import f32_word, step_size_exact
from ..formats.tables import UPDATE_PIECES
from .arena import Plane, align, lay_out
from .graph import Piece, Step
from .program import host_program

FORMAT = "coppelius-plan"
VERSION = 1


# what of the target profile a plan depends on: the plan stage's action key holds the same
PLAN_TARGET_KEYS = ("name", "arch", "sm_count", "alignment", "memory_kinds")


def parameter_tensors(model) -> dict:
    """Each parameter tensor, in llm.c's order: its shape, element count, weight decay, its element offset
    in the checkpoint's parts (payload_offset: llm.c's order) and in the weight planes (offset). The
    planes hold the decayed tensors first, then the others (each group in llm.c's order), so that one
    AdamW launch updates each group: 2 launches a step, not 16."""
    tensors, payload = {}, 0
    for name, shape, decay in model.tensors():
        count = math.prod(shape)
        tensors[name] = {"shape": list(shape), "offset": 0, "payload_offset": payload, "count": count,
                         "decay": decay}
        payload += count
    offset = 0
    for decay in (True, False):
        for t in tensors.values():
            if t["decay"] == decay:
                t["offset"], offset = offset, offset + t["count"]
    return tensors


def lm_head_stats_width(model, batch: int, arch: str) -> int:
    """matmul_forward_stats' width where the training step's lm head leaves the loss its rows' statistics
    (geometry.lm_head_leaves_stats; plane logit_stats), else 0."""
    scalars = {"N": batch * model.context, "C": model.width, "OC": model.vocab_padded, "V": model.vocab}
    return stats_width(scalars, arch) if lm_head_leaves_stats(scalars, arch) else 0


def planes_for(model, batch: int, staging_bytes: int, width: int = 0) -> list[Plane]:
    """The arena's planes; width: lm_head_stats_width's (0: no logit_stats)."""
    B, T, C, L, NH = batch, model.context, model.width, model.layers, model.heads
    Vp, P = model.vocab_padded, model.parameter_count
    step = lambda name, dtype, *shape: Plane(name, dtype, shape, "step")  # noqa: E731
    layer = lambda name, dtype, *shape: Plane(name, dtype, (L, *shape), "step", region="layer")  # noqa: E731
    weight = lambda name, dtype, lifetime: Plane(name, dtype, (P,), lifetime, region="tensor")  # noqa: E731
    stats = [step("logit_stats", "f32", B, T, -(-Vp // width), 2)] if width else []
    return [
        weight("params", "f32", "persistent"), weight("m", "f32", "persistent"),
        weight("v", "f32", "persistent"), weight("weights", "f16", "persistent"),
        # the input gradients' tile schedule on sm_90a (formats/kernels.py), 0 between launches
        Plane("tile_counter", "i32", (1,), "persistent"),
        step("context", "i32", B * T + 1),  # a step's tokens, then the next one: the targets are the tokens from 1
        step("encoded", "f16", B, T, C),
        layer("ln1", "f16", B, T, C), layer("ln1_mean", "f32", B, T), layer("ln1_rstd", "f32", B, T),
        layer("qkv", "f16", B, T, 3 * C), layer("atty", "f16", B, T, C), layer("att_lse", "f32", B, NH, T),
        layer("attproj", "f16", B, T, C), layer("residual2", "f16", B, T, C),
        layer("ln2", "f16", B, T, C), layer("ln2_mean", "f32", B, T), layer("ln2_rstd", "f32", B, T),
        layer("fch_slope", "f16", B, T, 4 * C), layer("fch_gelu", "f16", B, T, 4 * C),
        layer("fcproj", "f16", B, T, C), layer("residual3", "f16", B, T, C),
        step("lnf", "f16", B, T, C), step("lnf_mean", "f32", B, T), step("lnf_rstd", "f32", B, T),
        step("logits", "f16", B, T, Vp), *stats, step("losses", "f32", B, T), step("predictions", "i32", B, T),
        weight("grads", "f16", "step"), step("flag", "i32", 1),
        step("dlogits", "f16", B, T, Vp), step("dresidual", "f16", B, T, C), step("dbtc", "f16", B, T, C),
        step("dbt3c", "f16", B, T, 3 * C), step("dbt4c", "f16", B, T, 4 * C),
        step("token_order", "i32", B, T), step("token_first", "i32", Vp + 1),
        step("ln_partials", "f32", layernorm_backward_blocks(B * T), 2, C),
        Plane("staging", "u8", (staging_bytes,), "transfer"),
    ]


def host_buffers(batch: int, context: int, vocab_padded: int, staging_bytes: int,
                 steps_per_launch: int) -> tuple[dict, int]:
    """The host's pinned memory: one block, buffers at 256-byte aligned offsets."""
    n, k = batch * context, steps_per_launch
    # two of each update buffer: the host fills one's contexts and reads one's losses while the other update runs;
    # each holds a context and a losses record for every step of its piece (update_slots)
    sizes = [("staging", staging_bytes), ("context", 4 * (n + 1) * k), ("context_1", 4 * (n + 1) * k),
             ("step_losses", (4 * n + 4) * k), ("step_losses_1", (4 * n + 4) * k), ("report_losses", 4 * n),
             ("report_predictions", 4 * n), ("sample_logits", 2 * context * vocab_padded)]
    buffers, cursor = {}, 0
    for name, size in sizes:
        buffers[name] = {"offset": cursor, "bytes": size}
        cursor = align(cursor + size, 256)
    return buffers, cursor


def update_slots(tokens_per_step: int, steps_per_launch: int) -> list[tuple[int, int]]:
    """(context offset, losses offset) in an update piece's host buffers of each of its steps, in step order. The
    last step's context is at 0, where the forward piece takes its context, so that the final forward, a reissue
    of it after the last update, scores the last training context (plan/program.py)."""
    n, k = tokens_per_step, steps_per_launch
    return [(4 * (n + 1) * (k - 1 - slot), (4 * n + 4) * slot) for slot in range(k)]


def chunks(payload_bytes: int, staging_bytes: int) -> list[tuple[int, int]]:
    """(payload offset, bytes) of each checkpoint chunk, in order."""
    return [(o, min(staging_bytes, payload_bytes - o)) for o in range(0, payload_bytes, staging_bytes)]


def part_spans(offset: int, nbytes: int, tensors: dict):
    """Split payload bytes [offset, offset+nbytes) into (part, byte offset in its plane, staging offset, bytes):
    one span per part and tensor, each tensor's bytes moved from its payload place to its plane place."""
    end, size = offset + nbytes, 4  # the parts are f32
    part_bytes = size * sum(t["count"] for t in tensors.values())
    for i, part in enumerate(checkpoint.PARTS):
        for t in tensors.values():
            start = i * part_bytes + size * t["payload_offset"]
            lo, hi = max(offset, start), min(end, start + size * t["count"])
            if lo < hi:
                yield part, size * t["offset"] + lo - start, lo - offset, hi - lo


def build_plan(config: Config) -> dict:
    model, run, learner = config.model, config.run, config.learner
    alignment = config.target["alignment"]
    arch, sm_count = config.target["arch"], config.target["sm_count"]
    stats = lm_head_stats_width(model, run.batch, arch)
    laid, arena_bytes = lay_out(planes_for(model, run.batch, run.staging_bytes, stats), alignment)
    planes = {p.name: p for p in laid}
    tensors = parameter_tensors(model)
    buffers, host_bytes = host_buffers(run.batch, model.context, model.vocab_padded, run.staging_bytes,
                                       run.steps_per_launch)
    step = Step(model, planes, tensors, run.batch, learner, stats)
    n = run.batch * model.context
    part_bytes = 4 * model.parameter_count
    payload_chunks = chunks(3 * part_bytes, run.staging_bytes)

    pieces = []
    init = Piece("initialize")
    for p in laid:
        init.memset(step.at(p.name), p.bytes)
    pieces.append(init)
    for k, (offset, nbytes) in enumerate(payload_chunks):
        stage, scatter = Piece(f"load_stage_{k}"), Piece(f"load_scatter_{k}")
        stage.h2d("staging", 0, step.at("staging"), nbytes)
        for part, part_offset, staging_offset, span in part_spans(offset, nbytes, tensors):
            scatter.d2d({"plane": "staging", "offset": staging_offset}, {"plane": part, "offset": part_offset}, span)
        pieces += [stage, scatter]

    def take_context(piece: Piece, tokens: int = n + 1, buffer: str = "context", offset: int = 0):
        piece.h2d(buffer, offset, step.at("context"), 4 * tokens)

    forward = Piece("forward", arch, sm_count)
    take_context(forward)
    step.forward(forward, with_predictions=True)
    pieces.append(forward)

    # two update pieces, the same but for their host buffers, so that the host submits one while the card runs the
    # other and reads a step's loss a launch late (plan/program.py); each holds steps_per_launch whole steps, one
    # after the other (the graph's byte hazards order them), each from its own context and to its own losses record
    first_step = f32_word(step_size_exact(learner.lr, learner.beta1, learner.beta2, 1))
    for name, context, losses in UPDATE_PIECES:
        update = Piece(name, arch, sm_count)
        for context_offset, losses_offset in update_slots(n, run.steps_per_launch):
            take_context(update, buffer=context, offset=context_offset)
            update.memset(step.at("flag"), 4)
            step.forward(update, with_predictions=False)
            step.backward(update)
            step.update(update, first_step)
            # the losses, then the non-finite flag after them
            update.d2h(step.at("losses"), losses, losses_offset, 4 * n)
            update.d2h(step.at("flag"), losses, losses_offset + 4 * n, 4)
        pieces.append(update)

    for k, (offset, nbytes) in enumerate(payload_chunks):
        gather = Piece(f"gather_{k}")
        for part, part_offset, staging_offset, span in part_spans(offset, nbytes, tensors):
            gather.d2d({"plane": part, "offset": part_offset}, {"plane": "staging", "offset": staging_offset}, span)
        gather.d2h(step.at("staging"), "staging", 0, nbytes)
        pieces.append(gather)

    restore = Piece("restore")
    restore.d2h(step.at("losses"), "report_losses", 0, 4 * n)
    restore.d2h(step.at("predictions"), "report_predictions", 0, 4 * n)
    pieces.append(restore)

    # generate: the logits of the sample forward's context (all its positions: which one is the window's
    # last is known only at run time), back to the host, where the next token is sampled
    sample = Piece("sample")
    sample.d2h(step.at("logits"), "sample_logits", 0, 2 * model.context * model.vocab_padded)
    pieces.append(sample)
    # generate's forward: one sequence (batch 1, the first rows of the same planes), its logits only: a new
    # token costs one context's forward, not a batch's (after the others in the ring, so they keep their entries)
    sample_forward = Piece("sample_forward", arch, sm_count)
    take_context(sample_forward, model.context)
    Step(model, planes, tensors, 1, learner).forward(sample_forward, with_predictions=False)
    pieces.append(sample_forward)
    # the half weights every forward multiplies by, cast once from the loaded f32 parameters; AdamW keeps the two in
    # step after that (it writes both from the same elements), so no forward casts them again (admission:
    # schedule-weights-cast). Last in the ring, so the other pieces keep their entries.
    cast = Piece("cast_weights", arch, sm_count)
    cast.launch("cast_half", out=step.at("weights"), inp=step.at("params"), N=model.parameter_count)
    pieces.append(cast)

    ring = {p.name: i for i, p in enumerate(pieces)}
    program, labels = host_program(ring, payload_chunks, run, n, model.context, model.vocab_padded,
                                   update_slots(n, run.steps_per_launch))
    learner_dict = canonical.json.loads(canonical.encode(learner.as_dict()))
    return {
        "format": FORMAT, "version": VERSION,
        "target": {k: config.target[k] for k in PLAN_TARGET_KEYS},
        "model": model.as_dict() | {"parameters": model.parameter_count, "flops_per_token": model.flops_per_token()},
        "learner": learner_dict,
        "run": run.as_dict() | {"tokens_per_step": n},
        "tensors": [{"name": name} | t for name, t in tensors.items()],  # llm.c's order
        "arena": {"alignment": alignment, "bytes": arena_bytes, "planes": [p.as_dict() for p in laid]},
        "host": {"bytes": host_bytes, "buffers": buffers},
        "kernels": {name: [[n_, kind] for n_, kind in params] for name, params in sorted(KERNELS.items())},
        "pieces": [p.as_dict() for p in pieces],
        "ring": [p.name for p in pieces],
        "program": program,
        "labels": labels,
        "contracts": {
            "checkpoint": {"model": model.as_dict(), "learner": learner_dict, "payload_bytes": 3 * part_bytes,
                           "parts": list(checkpoint.PARTS), "chunks": [list(c) for c in payload_chunks]},
            # a stream needs one context; the cursor goes round it as often as the run takes (epochs)
            "tokens": {"vocab": model.vocab, "context_tokens": n + 1},
            "result": {"format": "coppelius-result", "version": 2, "steps": run.steps},
        },
    }


def encode_plan(plan: dict) -> bytes:
    return canonical.encode(plan) + b"\n"


