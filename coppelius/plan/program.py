"""The host program of a plan: the whole run, as steps of the vocabulary in formats/program.py.

Written nested (each repeat holds its body) and flattened once at the end; `operation` jumps a
predict or generate run to its part, whose index is known only once everything before it is laid out.
The last interval is written out after the repeat of the others, so that the final forward scores
the last training context before the last validation pass takes the context buffer.
"""
from ..formats.program import flatten, repeat
from ..formats.tables import UPDATE_PIECES


def host_program(ring: dict, payload_chunks: list, run, tokens_per_step: int, positions: int,
                 vocab_padded: int, slots: list) -> tuple[list, dict]:
    """slots: each step of an update piece, (its context's offset, its losses' offset) in the piece's buffers."""
    n = tokens_per_step
    step = lambda op, **args: [op, args]  # noqa: E731
    context = step("read-at-cursor", buffer="context", tokens=n + 1, offset=0)
    # the next context, going round to the stream's start when it would run past the end (llm.c's loader)
    advance = [step("cursor-advance", tokens=n), step("cursor-wrap", tokens=n + 1)]

    load = [step("fill", buffer="context", offset=0, bytes=4 * (n + 1), value=0),
            step("submit", ring=ring["initialize"])]
    for k, (offset, nbytes) in enumerate(payload_chunks):
        load += [step("read", file="checkpoint", offset=offset, buffer="staging", bytes=nbytes),
                 step("submit", ring=ring[f"load_stage_{k}"]), step("submit", ring=ring[f"load_scatter_{k}"])]
    load.append(step("submit", ring=ring["cast_weights"]))  # the fp16 weights of the loaded parameters

    # train: the loss before training, then `steps` updates; every interval the validation stream is scored
    # and a checkpoint published (its result record with it). The updates alternate between two ring entries
    # with their own host buffers, so that each is submitted before the one before it is recorded: the card
    # never waits for the host between steps (llm.c's and nanoGPT's loops read the loss a step late too).
    # An entry holds len(slots) steps: a submission reads their contexts and steps t once for each.
    # record-stat records the oldest update not yet recorded; an interval ends with every update recorded.
    def submit_update(k: int) -> list:
        name, context_buffer, _ = UPDATE_PIECES[k]
        steps = []
        for slot, (offset, _) in enumerate(slots):
            steps += [*(advance if slot else []), step("read-at-cursor", buffer=context_buffer, tokens=n + 1,
                                                        offset=offset), step("adamw-scalars", slot=slot)]
        return [*steps, step("submit", ring=ring[name])]

    def record_update(k: int) -> list:
        return [step("record-stat", kind="step", buffer=UPDATE_PIECES[k][2], offset=offset) for _, offset in slots]

    # every interval ends on the first entry, whose context buffer the final forward's copy reads (an interval
    # ending on the second would score the step before the last)
    pairs, odd = divmod(run.interval // len(slots) - 1, 2)
    a, b = odd, 1 - odd
    interval_updates = [*submit_update(a), *advance,
                        repeat(pairs, [*submit_update(b), *record_update(a), *advance,
                                       *submit_update(a), *record_update(b), *advance]),
                        *([*submit_update(b), *record_update(a), *advance] if odd else []), *record_update(0)]
    validation = [step("validation-begin"), repeat(run.eval_contexts, [
        context, step("submit", ring=ring["forward"]), step("submit", ring=ring["restore"]),
        step("record-stat", kind="validation", buffer="report_losses", offset=0), *advance]), step("validation-end")]
    publication = [step("checkpoint-begin")]
    for k, (offset, nbytes) in enumerate(payload_chunks):
        publication += [step("submit", ring=ring[f"gather_{k}"]),
                        step("write", file="checkpoint", offset=offset, buffer="staging", bytes=nbytes)]
    publication.append(step("checkpoint-publish"))
    # the final forward: the last context again, under the final weights, before validation takes the buffer
    final = [step("reissue", ring=ring["forward"]), step("reissue", ring=ring["restore"]),
             step("record-stat", kind="final", buffer="report_losses", offset=0)]
    train = [step("cursor-from-checkpoint"), step("cursor-wrap", tokens=n + 1), context,
             step("submit", ring=ring["forward"]), step("submit", ring=ring["restore"]),
             step("record-stat", kind="initial", buffer="report_losses", offset=0),
             step("write", file="predictions", offset=None, buffer="report_predictions", bytes=4 * n),
             repeat(run.steps // run.interval - 1, interval_updates + validation + publication),
             *interval_updates, *final, *validation, *publication,
             step("write-status"), step("write-timestamps"), step("end")]

    predict = [step("cursor-from-checkpoint"), step("cursor-wrap", tokens=n + 1), repeat(run.eval_contexts, [
        context, step("submit", ring=ring["forward"]), step("submit", ring=ring["restore"]),
        step("record-stat", kind="predict", buffer="report_losses", offset=0),
        step("write", file="predictions", offset=None, buffer="report_predictions", bytes=4 * n), *advance]),
        step("write-status"), step("write-timestamps"), step("end")]

    # generate: once per new token (a null count: the run's --new-tokens N), the sample forward on the window
    # (the newest <= `positions` ids of prompt and sample, at positions 0.., the rest 0), then the sample
    generate = [repeat(None, [
        step("fill", buffer="context", offset=0, bytes=4 * (n + 1), value=0),
        step("sample-context", buffer="context", tokens=positions), step("submit", ring=ring["sample_forward"]),
        step("submit", ring=ring["sample"]),
        step("sample-token", buffer="sample_logits", tokens=positions, bytes=2 * positions * vocab_padded)]),
        step("write-sample"), step("end")]

    head, train, predict = flatten(load), flatten(train), flatten(predict)
    operation_at = len(head)
    predict_at = operation_at + 1 + len(train)
    generate_at = predict_at + len(predict)
    program = (head + [step("operation", predict=predict_at, generate=generate_at)] + train + predict +
               flatten(generate))
    return program, {"operation": operation_at, "predict": predict_at, "generate": generate_at}
