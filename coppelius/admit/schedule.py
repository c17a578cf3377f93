"""Schedule checks: the host program issues exactly the run's submissions, every update takes a
fresh context, and every host access stays inside its buffer. The checkpoint's byte provenance is
provenance.py; reissues and the realized tables, realized.py.

Each check reads the plan's host program expanded as the runtime runs it (common.trace: the one
walker of formats/program.py), once for `train` and once for `predict`, and the plan's pieces.
"""
from .common import (OPERATIONS, TRACED_NEW_TOKENS, Refusal, describe, iv_add, iv_gap, names_of as _names,
                     parameter_count, trace, well_formed)

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
    first = {"initialize": (1, "once")} | loads
    return {
        "train": first | {"forward": (2, "the loss before and after training"), "update": (run["steps"], "steps"),
                          "restore": (2, "the loss before and after training")}
        | {f"gather_{k}": (publications, f"{publications} publications (steps / interval)") for k in range(chunks)},
        "predict": first | {"forward": (run["eval_contexts"], "eval_contexts"),
                            "restore": (run["eval_contexts"], "eval_contexts")},
        "generate": first | {name: (TRACED_NEW_TOKENS, f"once per new token, {TRACED_NEW_TOKENS} traced")
                             for name in ("forward", "sample")},
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
def _context_takes(piece: dict, n: int) -> str:
    """The host buffer a forward or update piece takes its context from: tokens = the context's
    first n tokens, targets = the n after the first (int32), from one buffer."""
    takes = {c["dst"]["plane"]: c for c in piece["commands"]
             if c["op"] == "h2d" and c["dst"]["plane"] in ("tokens", "targets")}
    want = {"tokens": 0, "targets": 4}
    for plane, offset in want.items():
        c = takes.get(plane)
        if c is None or c["src"]["offset"] != offset or c["bytes"] != 4 * n or c["dst"]["offset"] != 0:
            got = describe(c) if c else "nothing"
            raise Refusal(f"piece {piece['name']}: {plane} must be copied from context byte {offset} ({4 * n} bytes, "
                          f"{n} tokens{' shifted by one' if offset else ''}); it gets {got}")
    if takes["tokens"]["src"]["buffer"] != takes["targets"]["src"]["buffer"]:
        raise Refusal(f"piece {piece['name']}: tokens and targets come from different host buffers")
    return takes["tokens"]["src"]["buffer"]


def check_steps_fresh(plan, realization, realized, profile):
    run, names = plan["run"], _names(plan)
    n, steps = run["tokens_per_step"], run["steps"]
    if n != run["batch"] * plan["model"]["context"]:
        raise Refusal(f"tokens_per_step is {n}, batch x context is {run['batch'] * plan['model']['context']}")
    tokens = plan["contracts"]["tokens"]
    want = {"train_tokens_from_cursor": steps * n + 1, "predict_tokens": run["eval_contexts"] * n + 1,
            "context_tokens": n + 1}
    for key, value in want.items():
        if tokens.get(key) != value:
            raise Refusal(f"the token contract's {key} is {tokens.get(key)}; the run reads {value}")
    index = {name: i for i, name in enumerate(names)}
    for name in ("forward", "update"):
        if name not in index:
            raise Refusal(f"the ring has no {name} piece")
    source = {name: _context_takes(plan["pieces"][index[name]], n) for name in ("forward", "update")}
    clobbers = {i: {c["dst"]["buffer"] for c in p["commands"] if c["op"] == "d2h"}
                for i, p in enumerate(plan["pieces"])}

    for operation in ("train", "predict"):  # generate reads no token stream (schedule-generate)
        known, d, t, moves, scalars, done, furthest = operation == "predict", 0, 0, [], 0, 0, 0
        held: dict[str, tuple[int, int] | None] = {}  # buffer -> (cursor offset, tokens) read there
        what = "update" if operation == "train" else "forward"
        for pc, op, args in trace(plan, operation):
            at = f"{operation} host step {pc}"
            if op == "cursor-from-checkpoint":
                if operation == "predict" or known:
                    how = "in predict" if operation == "predict" else "twice"
                    raise Refusal(f"{at}: cursor-from-checkpoint {how}; "
                                  f"the cursor is set once, from the checkpoint, before training (predict starts at 0)")
                known, d, t = True, 0, 0
            elif op == "cursor-advance":
                if not known:
                    raise Refusal(f"{at}: the cursor moves before it is set from the checkpoint")
                moves.append(args["tokens"])
                d += args["tokens"]
            elif op == "read-at-cursor":
                if not known:
                    raise Refusal(f"{at}: reads at the cursor before it is set from the checkpoint")
                held[args["buffer"]] = (d, args["tokens"])
                furthest = max(furthest, d + args["tokens"])
            elif op in ("fill", "read"):
                held[args["buffer"]] = None
            elif op == "adamw-scalars":
                if operation == "predict":
                    raise Refusal(f"{at}: adamw-scalars in predict; predicting never steps the optimizer")
                scalars += 1
                t += 1
            elif op == "checkpoint-publish" and (d != done * n or t != done):
                raise Refusal(f"{at}: the checkpoint is published after {done} updates with the cursor at +{d} and "
                              f"step +{t}; a continuation from it needs cursor +{done * n} and step +{done}")
            elif op in ("submit", "reissue"):
                ring = args["ring"]
                name = names[ring]
                if name == "update" and operation == "predict":
                    raise Refusal(f"{at}: predict issues an update")
                if name == what:
                    k = done + 1
                    label = f"{operation} {what} {k} ({at})"
                    need = [] if done == 0 else [n]
                    if moves != need:
                        since = "it was set" if done == 0 else f"{what} {done}"
                        rule = "no move before the first" if done == 0 else f"one move of {n} tokens"
                        raise Refusal(f"{label}: the cursor moved by {moves} since {since}; each {what} takes the "
                                      f"next context, {rule}")
                    if operation == "train" and scalars != 1:
                        raise Refusal(f"{label}: adamw-scalars ran {scalars} times since the last update; the step "
                                      f"count t must advance exactly once per update")
                    got = held.get(source[name])
                    if got != (d, n + 1):
                        if got is None:
                            why = f"host buffer {source[name]} holds no context read at the cursor"
                        elif got[0] != d:
                            why = (f"its context was read at cursor +{got[0]}, the cursor is at +{d} "
                                   f"(read before the move)")
                        else:
                            why = f"its context is {got[1]} tokens, one context is {n + 1} (n + 1 for the targets)"
                        raise Refusal(f"{label}: {why}")
                    done, moves, scalars = k, [], 0
                elif name == "forward" and operation == "train" and held.get(source[name]) is None:
                    raise Refusal(f"{at}: forward issued with no context read at the cursor in {source[name]}")
                for buffer in clobbers[ring]:
                    held[buffer] = None
        count = steps if operation == "train" else run["eval_contexts"]
        if done != count:
            raise Refusal(f"{operation} issues {done} {what}s taking fresh contexts; the run needs {count}")
        limit = want["train_tokens_from_cursor" if operation == "train" else "predict_tokens"]
        if furthest > limit:
            raise Refusal(f"{operation} reads tokens up to cursor +{furthest}; the token contract gives {limit}")
    return (f"{steps} updates each take the next {n}-token context, after exactly one cursor move and one step "
            f"count; checkpoints carry cursor +{n}t; predict reads {run['eval_contexts']} fresh contexts")


# ---------------------------------------------------------------------------- request
def stat_reads(kind: str, n: int) -> list[tuple[str, int]]:
    """The host bytes record-stat reads (tests/reference_host/interpreter.py: op_record_stat)."""
    if kind == "step":
        return [("step_losses", 4 * n), ("step_flag", 4)]
    return [("report_losses", 4 * n)]


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
                acc = [("w", *inside(args["buffer"], 0, 4 * args["tokens"], what), what)]
            elif op == "sample-token":
                acc = [("r", *inside(args["buffer"], 0, args["bytes"], what), what)]
            elif op == "write":
                acc = [("r", *inside(args["buffer"], 0, args["bytes"], what), what)]
            elif op == "record-stat":
                acc = [("r", *inside(b, 0, size, what), what) for b, size in stat_reads(args["kind"], n)]
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
