"""Schedule checks: the host program issues exactly the run's submissions, every update takes a
fresh context that never straddles the stream's end (the cursor wraps to its start, llm.c's
epochs) and is recorded from its own losses, a step late at most, and every host access stays
inside its buffer. The checkpoint's byte provenance is
provenance.py; reissues and the realized tables, realized.py.

Each check reads the plan's host program expanded as the runtime runs it (common.trace: the one
walker of formats/program.py), once for `train` and once for `predict`, and the plan's pieces.
"""
from ..formats.kernels import KERNELS
from .common import (GENERATE_PIECES, OPERATIONS, TRACED_NEW_TOKENS, UPDATES, Refusal, describe, describe_ref, iv_add,
                     iv_gap, names_of as _names, parameter_count, trace, well_formed)

def steps_per_launch(plan: dict) -> int:
    """The steps each update submission holds (config: steps_per_launch; 1 in a plan from before the key)."""
    return plan["run"].get("steps_per_launch", 1)


def chunk_count(plan: dict) -> tuple[int, int, int]:
    """(payload bytes, part bytes, chunks), from the model's dimensions and the staging size."""
    part = 4 * parameter_count(plan)
    staging = plan["run"]["staging_bytes"]
    return 3 * part, part, -(-3 * part // staging)


# ---------------------------------------------------------------------------- issues-run
def expected_issues(plan: dict) -> dict[str, dict[str, tuple[int, str]]]:
    """How often each piece is issued, per operation, from run.steps/interval/eval_contexts alone (and for
    generate, the new tokens admission traces)."""
    run = plan["run"]
    _, _, chunks = chunk_count(plan)
    publications = run["steps"] // run["interval"]
    loads = {f"{kind}_{k}": (1, "once per checkpoint chunk") for k in range(chunks)
             for kind in ("load_stage", "load_scatter")}
    first = {"initialize": (1, "once")} | loads | {"cast_weights": (1, "once, after the load")}
    scored = 2 + publications * run["eval_contexts"]
    why = f"the loss before and after training, and eval_contexts at each of {publications} publications"
    per_launch = steps_per_launch(plan)
    pairs, odd = divmod(run["interval"] // per_launch - 1, 2)
    update, update_1 = UPDATES
    alternate = (f"each of {publications} intervals of {run['interval']} steps, {per_launch} a submission, "
                 f"alternates {update} and {update_1}, ending on {update}")
    return {
        "train": first | {"forward": (scored, why), "restore": (scored, why),
                          update: (publications * (1 + pairs), alternate),
                          update_1: (publications * (pairs + odd), alternate)}
        | {f"gather_{k}": (publications, f"{publications} publications (steps / interval)") for k in range(chunks)},
        "predict": first | {"forward": (run["eval_contexts"], "eval_contexts"),
                            "restore": (run["eval_contexts"], "eval_contexts")},
        "generate": first | {name: (TRACED_NEW_TOKENS, f"once per new token, {TRACED_NEW_TOKENS} traced")
                             for name in GENERATE_PIECES},
    }


def check_issues_run(plan, realization, realized, profile):
    well_formed(plan)
    names = _names(plan)
    expected, totals = expected_issues(plan), {}
    for operation in OPERATIONS:
        counts = dict.fromkeys(names, 0)
        for pc, op, args in trace(plan, operation):
            if op in ("submit", "reissue"):
                counts[names[args["ring"]]] += 1
        for name in names + [n for n in expected[operation] if n not in names]:
            want, why = expected[operation].get(name, (0, "not a piece of this run"))
            have = counts.get(name, 0)
            if have != want:
                entry = f"ring entry {names.index(name)} ({name})" if name in names else \
                    f"piece {name} (not in the ring)"
                raise Refusal(f"{operation} issues {entry} {have} times; the run needs {want} ({why})")
        totals[operation] = sum(counts.values())
    return (f"train issues {totals['train']} submissions, predict {totals['predict']}, generate "
            f"{totals['generate']} for {TRACED_NEW_TOKENS} new tokens, as the run needs")


# ---------------------------------------------------------------------------- steps-fresh
def _context_takes(piece: dict, n: int) -> list[tuple[str, int]]:
    """The (host buffer, offset) each step of a forward or update piece takes its context from, in order: its n + 1
    tokens (int32) copied whole into the context plane, whose first n are the tokens its kernels read and the n after
    the first their targets. A piece holds steps one after the other, each beginning with its context's copy."""
    takes = [c for c in piece["commands"] if c["op"] == "h2d" and c["dst"]["plane"] == "context"]
    whole = takes and all(c["dst"]["offset"] == 0 and c["bytes"] == 4 * (n + 1) for c in takes)
    if not whole or piece["commands"][0] is not takes[0]:
        got = ", ".join(describe(c) for c in takes) or "nothing"
        raise Refusal(f"piece {piece['name']}: each of its steps must begin by copying the context plane whole from a "
                      f"host buffer in one h2d ({4 * (n + 1)} bytes, {n + 1} tokens); it gets {got}")
    want = {"tokens": 0, "targets": 4}  # the targets: the tokens shifted by one
    for i, c in enumerate(piece["commands"]):
        if c["op"] != "launch":
            continue
        for (name, _), arg in zip(KERNELS.get(c["kernel"], ()), c["args"]):
            if name in want and (not isinstance(arg, dict) or arg.get("plane") != "context"
                                 or arg["offset"] != want[name]):
                raise Refusal(f"piece {piece['name']} command {i} ({c['kernel']}): {name} is {describe_ref(arg)}; "
                              f"it must be the context plane's byte {want[name]}"
                              f"{' (the tokens shifted by one)' if want[name] else ''}")
    return [(c["src"]["buffer"], c["src"]["offset"]) for c in takes]


def _losses_copy(piece: dict, n: int, flag: bool) -> list[tuple[str, int]]:
    """The (host buffer, offset) each step of a piece copies the losses plane into (its n f32 whole), and with
    `flag`, the non-finite flag right after them; one buffer for all."""
    copies = [c for c in piece["commands"] if c["op"] == "d2h" and c["src"]["plane"] in ("losses", "flag")]
    width = 2 if flag else 1
    starts = [c["dst"]["offset"] for c in copies[::width]] if flag else [0]  # a scoring copy: one, at byte 0
    want = [({"plane": plane, "offset": 0}, start + at, size) for start in starts
            for plane, at, size in (("losses", 0, 4 * n), ("flag", 4 * n, 4))[:width]]
    got = [(c["src"], c["dst"]["offset"], c["bytes"]) for c in copies]
    if not copies or got != want or len({c["dst"]["buffer"] for c in copies}) != 1:
        rule = (f"losses+0 ({4 * n} bytes) to a host buffer, then flag+0 (4 bytes) right after them, once a step"
                if flag else f"losses+0 ({4 * n} bytes) to a host buffer's byte 0")
        raise Refusal(f"piece {piece['name']} must copy {rule}; it copies "
                      f"{'; '.join(describe(c) for c in copies) or 'neither'}")
    return [(copies[0]["dst"]["buffer"], start) for start in starts]


def _updates_alike(plan: dict, index: dict) -> None:
    """The update pieces are the same commands but for their host buffers (common.UPDATES), so that each
    check of one holds for the other and the steps do not depend on which entry runs them."""
    first, *others = UPDATES
    for name in others:
        rename = dict(zip(UPDATES[first], UPDATES[name]))
        want = [c | {side: c[side] | {"buffer": rename.get(c[side]["buffer"], c[side]["buffer"])}
                     for side in ("src", "dst") if isinstance(c.get(side), dict) and "buffer" in c[side]}
                for c in plan["pieces"][index[first]]["commands"]]
        got = plan["pieces"][index[name]]["commands"]
        if got != want:
            at = next((j for j, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            show = lambda cs: describe(cs[at]) if at < len(cs) else "nothing"  # noqa: E731
            raise Refusal(f"piece {name} command {at} is {show(got)}; it must be {first}'s with host buffers "
                          f"{rename}: {show(want)}")


class _Cursor:
    """What admission knows of one stream's cursor: the moves since the last context was taken, and
    whether a cursor-wrap of enough tokens has run since it last moved (or was set from a checkpoint)."""

    def __init__(self, room: int):
        self.moves, self.room = [], room  # room: tokens known to fit at the cursor before the end

    def move(self, tokens: int):
        self.moves.append(tokens)
        self.room = 0


def check_steps_fresh(plan, realization, realized, profile):
    run, names = plan["run"], _names(plan)
    n, steps, contexts = run["tokens_per_step"], run["steps"], run["eval_contexts"]
    per_launch = steps_per_launch(plan)
    if n != run["batch"] * plan["model"]["context"]:
        raise Refusal(f"tokens_per_step is {n}, batch x context is {run['batch'] * plan['model']['context']}")
    tokens = plan["contracts"]["tokens"]
    if tokens.get("context_tokens") != n + 1:
        raise Refusal(f"the token contract's context_tokens is {tokens.get('context_tokens')}; the run reads {n + 1}")
    index = {name: i for i, name in enumerate(names)}
    for name in ("forward", *UPDATES, "restore"):
        if name not in index:
            raise Refusal(f"the ring has no {name} piece")
    _updates_alike(plan, index)
    source = {name: _context_takes(plan["pieces"][index[name]], n) for name in ("forward", *UPDATES)}
    report = {name: _losses_copy(plan["pieces"][index[name]], n, flag=True) for name in UPDATES}
    for name in UPDATES:
        if not len(source[name]) == len(report[name]) == per_launch:
            raise Refusal(f"piece {name} takes {len(source[name])} contexts and copies {len(report[name])} steps' "
                          f"losses; an update holds steps_per_launch = {per_launch} steps")
    if len(source["forward"]) != 1:
        raise Refusal(f"piece forward takes {len(source['forward'])} contexts; it scores one")
    (scores, _), = _losses_copy(plan["pieces"][index["restore"]], n, flag=False)
    clobbers = {i: {c["dst"]["buffer"] for c in p["commands"] if c["op"] == "d2h"}
                for i, p in enumerate(plan["pieces"])}
    publications = steps // run["interval"]

    for operation in ("train", "predict"):  # generate reads no token stream (schedule-generate)
        # the train stream's cursor is unknown until set from the checkpoint; a validation pass starts
        # at 0, where the run has checked that one context fits
        cursor, saved, validating, passes = None, None, None, 0
        t, scalars, done, scored = 0, 0, 0, 0  # scalars: adamw-scalars since the last update; scored: contexts scored
        # (host buffer, offset) -> (context number, tokens, the cursor's moves before it was read) read there
        held: dict[tuple[str, int], tuple[int, int, list] | None] = {}
        taken = 0  # contexts read at the cursor so far, on any stream
        last_update = None  # the context number the last update's last step took: the final forward scores it
        pending = []  # steps submitted and not yet recorded, oldest first: (number, piece, slot, submission)
        writer: dict[str, int | None] = {}  # buffer -> the submission that last wrote it (None: the host)

        def forget(buffer, start=0, end=float("inf")):  # the contexts held in bytes [start, end) of a buffer
            for (name, offset), got in held.items():
                if name == buffer and got and offset < end and start < offset + 4 * got[1]:
                    held[(name, offset)] = None

        for serial, (pc, op, args) in enumerate(trace(plan, operation)):
            at = f"{operation} host step {pc}"
            if op in ("fill", "read", "read-at-cursor"):
                writer[args["buffer"]] = None
            if op in ("checkpoint-publish", "validation-begin") and pending:
                raise Refusal(f"{at}: {op} with updates {[k for k, *_ in pending]} not yet recorded; every update "
                              f"is recorded before the run scores or publishes")
            if op == "cursor-from-checkpoint":
                if cursor is not None or validating is not None:
                    raise Refusal(f"{at}: cursor-from-checkpoint {'twice' if cursor else 'in a validation pass'}; "
                                  f"the cursor is set once, from the checkpoint, before any context is read")
                cursor = _Cursor(0)  # any cursor: the next context may not fit
            elif op in ("cursor-advance", "cursor-wrap", "read-at-cursor") and cursor is None:
                raise Refusal(f"{at}: {op} before the cursor is set from the checkpoint")
            elif op == "cursor-advance":
                cursor.move(args["tokens"])
            elif op == "cursor-wrap":
                cursor.room = max(cursor.room, args["tokens"])
            elif op == "read-at-cursor":
                if args["tokens"] > cursor.room:
                    raise Refusal(f"{at}: reads {args['tokens']} tokens at the cursor with no cursor-wrap of as many "
                                  f"since it moved (it wraps for {cursor.room}); a context could straddle the "
                                  f"stream's end")
                taken += 1
                forget(args["buffer"], args["offset"], args["offset"] + 4 * args["tokens"])
                held[(args["buffer"], args["offset"])] = (taken, args["tokens"], cursor.moves)
                cursor.moves = []
            elif op in ("fill", "read"):
                forget(args["buffer"])
            elif op == "validation-begin":
                if operation == "predict" or validating is not None:
                    raise Refusal(f"{at}: validation-begin {'in predict' if operation == 'predict' else 'twice'}; "
                                  f"a train run scores the validation stream between its updates")
                saved, cursor, validating, scored = cursor, _Cursor(n + 1), pc, 0
            elif op == "validation-end":
                if validating is None:
                    raise Refusal(f"{at}: validation-end with no validation-begin before it")
                if scored != contexts:
                    raise Refusal(f"{at}: the validation pass begun at host step {validating} scores {scored} "
                                  f"contexts; the run scores eval_contexts = {contexts}")
                cursor, validating, passes = saved, None, passes + 1
            elif op == "adamw-scalars":
                if operation == "predict" or validating is not None:
                    raise Refusal(f"{at}: adamw-scalars in {operation if validating is None else 'validation'}; "
                                  f"scoring never steps the optimizer")
                if len(pending) + scalars >= 2 * per_launch:
                    raise Refusal(f"{at}: adamw-scalars with {len(pending) + scalars} updates not yet recorded; "
                                  f"the host holds at most {2 * per_launch} (one submission's {per_launch} steps "
                                  f"beside the one it records)")
                if args["slot"] != scalars:
                    raise Refusal(f"{at}: adamw-scalars of slot {args['slot']} after {scalars} since the last "
                                  f"update; a submission's steps take t in slot order, from 0")
                scalars += 1
                t += 1
            elif op in ("checkpoint-begin", "checkpoint-publish") and validating is not None:
                raise Refusal(f"{at}: {op} inside the validation pass begun at host step {validating}")
            elif op == "checkpoint-publish" and (t != done or (done and (cursor.moves != [n] or cursor.room < n + 1))):
                raise Refusal(f"{at}: the checkpoint is published after {done} updates with step +{t} and the cursor "
                              f"moved by {cursor.moves} (wrapped for {cursor.room}) since the last; a continuation "
                              f"from it needs step +{done} and the cursor at the next context: one move of {n} "
                              f"tokens and a cursor-wrap of {n + 1}")
            elif op == "record-stat" and args["kind"] == "step":
                if operation != "train" or validating is not None:
                    raise Refusal(f"{at}: record-stat step in {operation if validating is None else 'validation'}; "
                                  f"only training records steps")
                if not pending:
                    raise Refusal(f"{at}: record-stat step with every submitted update recorded; each records the "
                                  f"oldest update not yet recorded")
                k, name, slot, submission = pending.pop(0)
                buffer, offset = report[name][slot]
                if (args["buffer"], args["offset"]) != (buffer, offset) or writer.get(buffer, -1) != submission:
                    why = (f"it reads host buffer {args['buffer']}+{args['offset']}"
                           if (args["buffer"], args["offset"]) != (buffer, offset) else
                           f"host buffer {buffer} was written since")
                    raise Refusal(f"{at}: records update {k} ({name}), which copies its losses and flag to host "
                                  f"buffer {buffer}+{offset}; {why}")
            elif op == "record-stat":
                in_pass = validating is not None
                if args["kind"] in ("predict", "validation") and (args["kind"] == "validation") != in_pass:
                    raise Refusal(f"{at}: record-stat {args['kind']} "
                                  f"{'outside' if validating is None else 'inside'} a validation pass")
                if args["buffer"] != scores or args["offset"] != 0 or writer.get(scores) is None:
                    raise Refusal(f"{at}: record-stat {args['kind']} reads host buffer {args['buffer']}"
                                  f"+{args['offset']}; it scores the losses the restore piece copies to {scores}+0, "
                                  f"after a restore")
            elif op in ("submit", "reissue"):
                ring = args["ring"]
                name = names[ring]
                if name in UPDATES and (operation == "predict" or validating is not None):
                    raise Refusal(f"{at}: {'predict' if validating is None else 'a validation pass'} issues an update")
                scoring = operation == "predict" or validating is not None
                what = "forward" if scoring else "update"
                if (name == "forward" if scoring else name in UPDATES) and (scoring or op == "submit"):
                    first = (scored if scoring else done) + 1
                    if not scoring and scalars != len(source[name]):
                        raise Refusal(f"{operation} update {first} ({at}): adamw-scalars ran {scalars} times since "
                                      f"the last update; the step count t must advance exactly once per step "
                                      f"({len(source[name])} an update)")
                    for slot, take in enumerate(source[name]):
                        k = first + slot
                        label = (f"{operation} {what} {k} ({at})" if validating is None else
                                 f"validation forward {k} of the pass at host step {validating} ({at})")
                        got = held.get(take)
                        want = taken - len(source[name]) + 1 + slot
                        if got is None:
                            raise Refusal(f"{label}: host buffer {take[0]}+{take[1]} holds no context read at the "
                                          f"cursor")
                        if got[0] != want:
                            raise Refusal(f"{label}: its context was read before the cursor's last context (read "
                                          f"before the move)")
                        if got[1] != n + 1:
                            raise Refusal(f"{label}: its context is {got[1]} tokens, one context is {n + 1} (n + 1 for "
                                          f"the targets)")
                        need = [] if k == 1 else [n]
                        if got[2] != need:
                            since = "it was set" if k == 1 else f"{what} {k - 1}"
                            rule = "no move before the first" if k == 1 else f"one move of {n} tokens"
                            raise Refusal(f"{label}: the cursor moved by {got[2]} since {since}; each {what} takes "
                                          f"the next context, {rule}")
                    last = first + len(source[name]) - 1
                    if scoring:
                        scored = last
                    else:
                        pending += [(first + slot, name, slot, serial) for slot in range(len(source[name]))]
                        done, scalars, last_update = last, 0, taken
                elif name == "forward" and operation == "train" and held.get(source[name][0]) is None:
                    raise Refusal(f"{at}: forward issued with no context read at the cursor in "
                                  f"{source[name][0][0]}+{source[name][0][1]}")
                elif name == "forward" and op == "reissue" and \
                        (final := (held.get(source[name][0]) or (None,))[0]) != last_update:
                    raise Refusal(f"{at}: the final forward copies host buffer {source[name][0][0]}, which holds "
                                  f"context {final or 'none'}, not the last update's ({last_update or 'none'}); "
                                  f"final_loss scores the last training context")
                for buffer in clobbers[ring]:
                    forget(buffer)
                    writer[buffer] = serial
        count, what, got = (steps, "update", done) if operation == "train" else (contexts, "forward", scored)
        if got != count:
            raise Refusal(f"{operation} issues {got} {what}s taking fresh contexts; the run needs {count}")
        if pending:
            raise Refusal(f"{operation} ends with updates {[k for k, *_ in pending]} not yet recorded")
        if operation == "train" and passes != publications:
            raise Refusal(f"train runs {passes} validation passes; the run scores one at each of its {publications} "
                          f"publications")
    return (f"{steps} updates ({per_launch} a submission) each take the next {n}-token context, after exactly one "
            f"cursor move and one step count, and are each recorded from their own losses, at most one submission "
            f"beside the one recorded; every context is read after a cursor-wrap, so none straddles the stream's end; "
            f"the final forward scores the last update's context; checkpoints carry the next context's cursor; "
            f"{publications} validation passes and predict each score {contexts} fresh contexts")


# ---------------------------------------------------------------------------- request
def stat_reads(kind: str, n: int) -> int:
    """The bytes from its offset in its buffer that record-stat reads (tests/reference_host/interpreter.py:
    op_record_stat): the losses, and a step's non-finite flag after them."""
    return 4 * n + (4 if kind == "step" else 0)


def check_request(plan, realization, realized, profile):
    buffers, total = plan["host"]["buffers"], plan["host"]["bytes"]
    spans = sorted((b["offset"], b["offset"] + b["bytes"], name) for name, b in buffers.items())
    for a, b, name in spans:
        if a < 0 or b > total or b <= a:
            raise Refusal(f"host buffer {name} [{a}, {b}) is not inside the {total}-byte host block")
    for (a1, b1, n1), (a2, b2, n2) in zip(spans, spans[1:]):
        if a2 < b1:
            raise Refusal(f"host buffers {n1} [{a1}, {b1}) and {n2} [{a2}, {b2}) share bytes [{a2}, {min(b1, b2)})")
    n = plan["run"]["tokens_per_step"]

    def inside(buffer, offset, nbytes, what):
        if buffer not in buffers:
            raise Refusal(f"{what}: host buffer {buffer!r} does not exist")
        size = buffers[buffer]["bytes"]
        if offset is None:
            offset = 0
        if offset < 0 or nbytes < 0 or offset + nbytes > size:
            raise Refusal(f"{what}: bytes [{offset}, {offset + nbytes}) outside host buffer {buffer} ({size} bytes)")
        return buffer, offset, offset + nbytes

    # every host access of every piece, in command order: ("r" | "w", buffer, start, end)
    piece_host = []
    for i, piece in enumerate(plan["pieces"]):
        acc = []
        for j, c in enumerate(piece["commands"]):
            what = f"piece {piece['name']} command {j} ({describe(c)})"
            if c["op"] == "h2d":
                acc.append(("r", *inside(c["src"]["buffer"], c["src"]["offset"], c["bytes"], what), what))
            elif c["op"] == "d2h":
                acc.append(("w", *inside(c["dst"]["buffer"], c["dst"]["offset"], c["bytes"], what), what))
        piece_host.append(acc)
    count = 0
    for operation in OPERATIONS:
        written = {name: () for name in buffers}
        for pc, op, args in trace(plan, operation):
            what = f"{operation} host step {pc} ({op})"
            acc = []
            if op == "fill":
                acc = [("w", *inside(args["buffer"], args["offset"], args["bytes"], what), what)]
            elif op == "read":
                acc = [("w", *inside(args["buffer"], 0, args["bytes"], what), what)]
            elif op in ("read-at-cursor", "sample-context"):
                acc = [("w", *inside(args["buffer"], args.get("offset", 0), 4 * args["tokens"], what), what)]
            elif op == "sample-token":
                acc = [("r", *inside(args["buffer"], 0, args["bytes"], what), what)]
            elif op == "write":
                acc = [("r", *inside(args["buffer"], 0, args["bytes"], what), what)]
            elif op == "record-stat":
                acc = [("r", *inside(args["buffer"], args["offset"], stat_reads(args["kind"], n), what), what)]
            elif op in ("submit", "reissue"):
                acc = piece_host[args["ring"]]
            for mode, buffer, a, b, where in acc:
                count += 1
                if mode == "w":
                    written[buffer] = iv_add(written[buffer], a, b)
                elif (gap := iv_gap(written[buffer], a, b)) is not None:
                    raise Refusal(f"{where} reads host buffer {buffer} bytes [{gap[0]}, {gap[1]}), "
                                  f"which nothing wrote before")
    return (f"{len(buffers)} host buffers disjoint inside the {total}-byte block; {count} host accesses inside their "
            f"buffers, every read after a write")
