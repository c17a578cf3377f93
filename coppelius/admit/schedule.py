"""Schedule checks: the host program issues exactly the run's submissions, every update takes a
fresh context, the checkpoint moves byte for byte, reissues replay what the realization holds, and
every host access stays inside its buffer.

Each check reads the plan's host program expanded as the interpreter runs it (common.trace), once
for `train` and once for `predict`, and the plan's pieces.
"""
from .common import (PARTS, Realized, Refusal, command_accesses, describe, iv_add, iv_gap, iv_overlap,
                     parameter_count, piece_class, planes_by_name, trace, unpack, well_formed)

OPERATIONS = ("train", "predict")


def _names(plan: dict) -> list[str]:
    names = plan["ring"]
    if names != [p["name"] for p in plan["pieces"]]:
        raise Refusal(f"the ring {names} is not the pieces in order {[p['name'] for p in plan['pieces']]}")
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise Refusal(f"two ring entries are named {dup!r}")
    return names


def chunk_count(plan: dict) -> tuple[int, int, int]:
    """(payload bytes, part bytes, chunks), from the model's dimensions and the staging size."""
    part = 4 * parameter_count(plan)
    staging = plan["run"]["staging_bytes"]
    return 3 * part, part, -(-3 * part // staging)


# ---------------------------------------------------------------------------- issues-run
def expected_issues(plan: dict) -> dict[str, dict[str, tuple[int, str]]]:
    """How often each piece is issued, per operation, from run.steps/interval/eval_contexts alone."""
    run = plan["run"]
    _, _, chunks = chunk_count(plan)
    publications = run["steps"] // run["interval"]
    loads = {f"{kind}_{k}": (1, "once per checkpoint chunk") for k in range(chunks) for kind in ("load_stage", "load_scatter")}
    first = {"initialize": (1, "once")} | loads
    return {
        "train": first | {"forward": (2, "the loss before and after training"), "update": (run["steps"], "steps"),
                          "restore": (2, "the loss before and after training")}
        | {f"gather_{k}": (publications, f"{publications} publications (steps / interval)") for k in range(chunks)},
        "predict": first | {"forward": (run["eval_contexts"], "eval_contexts"),
                            "restore": (run["eval_contexts"], "eval_contexts")},
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
                entry = f"ring entry {names.index(name)} ({name})" if name in names else f"piece {name} (not in the ring)"
                raise Refusal(f"{operation} issues {entry} {have} times; the run needs {want} ({why})")
        totals[operation] = sum(counts.values())
    return f"train issues {totals['train']} submissions, predict {totals['predict']}, as the run needs"


# ---------------------------------------------------------------------------- steps-fresh
def _context_takes(piece: dict, n: int) -> str:
    """The host buffer a forward or update piece takes its context from: tokens = the context's
    first n tokens, targets = the n after the first (int32), from one buffer."""
    takes = {c["dst"]["plane"]: c for c in piece["commands"] if c["op"] == "h2d" and c["dst"]["plane"] in ("tokens", "targets")}
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
    clobbers = {i: {c["dst"]["buffer"] for c in p["commands"] if c["op"] == "d2h"} for i, p in enumerate(plan["pieces"])}

    for operation in OPERATIONS:
        known, d, t, moves, scalars, done, furthest = operation == "predict", 0, 0, [], 0, 0, 0
        held: dict[str, tuple[int, int] | None] = {}  # buffer -> (cursor offset, tokens) read there
        what = "update" if operation == "train" else "forward"
        for pc, op, args in trace(plan, operation):
            at = f"{operation} host step {pc}"
            if op == "cursor-from-checkpoint":
                if operation == "predict" or known:
                    raise Refusal(f"{at}: cursor-from-checkpoint {'in predict' if operation == 'predict' else 'twice'}; "
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
                        raise Refusal(f"{label}: the cursor moved by {moves} since "
                                      f"{'it was set' if done == 0 else f'{what} {done}'}; each {what} takes the next "
                                      f"context, {'no move before the first' if done == 0 else f'one move of {n} tokens'}")
                    if operation == "train" and scalars != 1:
                        raise Refusal(f"{label}: adamw-scalars ran {scalars} times since the last update; the step "
                                      f"count t must advance exactly once per update")
                    got = held.get(source[name])
                    if got != (d, n + 1):
                        if got is None:
                            why = f"host buffer {source[name]} holds no context read at the cursor"
                        elif got[0] != d:
                            why = f"its context was read at cursor +{got[0]}, the cursor is at +{d} (read before the move)"
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


# ---------------------------------------------------------------------------- moves-checkpoint
class Content:
    """What each byte of an address space holds, as segments (start, end, label, base): byte x of a
    segment holds byte base + (x - start) of `label`'s source, or `label` itself when base is None."""

    def __init__(self, segments=()):
        self.segs = list(segments)

    def read(self, a: int, b: int) -> list[tuple]:
        out, at = [], a
        for x, y, label, base in self.segs:
            if y <= a or x >= b:
                continue
            if x > at:
                out.append((at, x, "unwritten", None))
            lo, hi = max(x, a), min(y, b)
            out.append((lo, hi, label, None if base is None else base + lo - x))
            at = hi
        if at < b:
            out.append((at, b, "unwritten", None))
        return out

    def write(self, a: int, b: int, label, base=None) -> None:
        keep = []
        for x, y, lab, bs in self.segs:
            if y <= a or x >= b:
                keep.append((x, y, lab, bs))
                continue
            if x < a:
                keep.append((x, a, lab, bs))
            if b < y:
                keep.append((b, y, lab, None if bs is None else bs + b - x))
        keep.append((a, b, label, base))
        self.segs = sorted(keep, key=lambda s: s[0])

    def copy_from(self, src: "Content", s: int, d: int, n: int) -> None:
        for x, y, label, base in src.read(s, s + n):
            self.write(d + x - s, d + y - s, label, base)


def _first_wrong(content: Content, a: int, b: int, label: str, base: int):
    """The first segment of [a, b) that does not hold label's bytes base.. in order, or None."""
    for x, y, lab, bs in content.read(a, b):
        if lab != label or bs != base + x - a:
            return x, y, lab, bs
    return None


def _held(lab, bs, x, y) -> str:
    if bs is None:
        return {"unwritten": "nothing (never written)"}.get(lab, str(lab))
    return f"{lab} bytes [{bs}, {bs + y - x})"


class _Machine:
    """Copies and launches of pieces, on arena and host byte addresses (the provenance of bytes)."""

    def __init__(self, plan: dict):
        self.planes, self.buffers = planes_by_name(plan), plan["host"]["buffers"]
        self.pieces = plan["pieces"]
        self.arena, self.host = Content(), Content()

    def dev(self, ref):
        return self.planes[ref["plane"]]["offset"] + ref["offset"]

    def hst(self, ref):
        return self.buffers[ref["buffer"]]["offset"] + ref["offset"]

    def issue(self, ring: int, on_write=None) -> None:
        for j, c in enumerate(self.pieces[ring]["commands"]):
            op = c["op"]
            if op == "memset":
                self.arena.write(self.dev(c["dst"]), self.dev(c["dst"]) + c["bytes"], f"memset by {self.pieces[ring]['name']}")
            elif op == "h2d":
                self.arena.copy_from(self.host, self.hst(c["src"]), self.dev(c["dst"]), c["bytes"])
            elif op == "d2h":
                self.host.copy_from(self.arena, self.dev(c["src"]), self.hst(c["dst"]), c["bytes"])
            elif op == "d2d":
                self.arena.copy_from(self.arena, self.dev(c["src"]), self.dev(c["dst"]), c["bytes"])
            else:
                for name, mode, ref, nbytes in command_accesses(c):
                    if "w" in mode:
                        self.arena.write(self.dev(ref), self.dev(ref) + nbytes, f"output {name} of {c['kernel']}")
            if on_write is not None and op in ("memset", "h2d", "d2d"):
                on_write(ring, j, c, self.dev(c["dst"]), c["bytes"])


def check_moves_checkpoint(plan, realization, realized, profile):
    payload, part, chunks = chunk_count(plan)
    contract = plan["contracts"]["checkpoint"]
    if contract["payload_bytes"] != payload or contract["parts"] != list(PARTS):
        raise Refusal(f"the checkpoint contract says {contract['payload_bytes']} bytes in parts {contract['parts']}; "
                      f"the model's payload is {payload} bytes in parts {list(PARTS)}")
    planes, names = planes_by_name(plan), _names(plan)
    for j, name in enumerate(PARTS):
        if name not in planes or planes[name]["bytes"] != part:
            raise Refusal(f"plane {name} is {planes.get(name, {}).get('bytes')} bytes; payload part {j} is {part}")
    staging = plan["run"]["staging_bytes"]
    tiles = [[o, min(staging, payload - o)] for o in range(0, payload, staging)]
    if contract["chunks"] != tiles:
        raise Refusal(f"the checkpoint contract's chunks {contract['chunks'][:3]}... do not tile the {payload}-byte "
                      f"payload in {staging}-byte chunks")
    parts = {name: (planes[name]["offset"], j * part) for j, name in enumerate(PARTS)}

    # the load: from the first step to `operation` (the same for train and predict)
    steps = trace(plan, "train")
    m, reads, covered = _Machine(plan), [], {name: () for name in PARTS}
    marker = next((i for i, (_, op, _) in enumerate(steps) if op == "operation"), None)
    if marker is None:
        raise Refusal("the host program has no operation step; the load must come before it")

    def loaded(ring, j, c, at, nbytes):
        if piece_class(names[ring]) != "transfer":
            return
        for name, (base, _) in parts.items():
            lo, hi = max(at, base), min(at + nbytes, base + part)
            if lo < hi:
                again = iv_overlap(covered[name], lo - base, hi - base)
                if again:
                    raise Refusal(f"load piece {names[ring]} command {j} ({describe(c)}) writes {name} bytes "
                                  f"[{again[0]}, {again[1]}) a second time")
                covered[name] = iv_add(covered[name], lo - base, hi - base)
    for pc, op, args in steps[:marker]:
        if op == "fill":
            a = m.hst({"buffer": args["buffer"], "offset": args["offset"]})
            m.host.write(a, a + args["bytes"], "fill")
        elif op == "read":
            if args["file"] != "checkpoint":
                raise Refusal(f"host step {pc}: reads file {args['file']}; the load reads the checkpoint")
            reads.append([args["offset"], args["bytes"]])
            a = m.hst({"buffer": args["buffer"], "offset": 0})
            m.host.write(a, a + args["bytes"], "payload", args["offset"])
        elif op in ("submit", "reissue"):
            m.issue(args["ring"], loaded)
    if reads != tiles:
        at = next((i for i, (r, w) in enumerate(zip(reads, tiles)) if r != w), min(len(reads), len(tiles)))
        got = reads[at] if at < len(reads) else "nothing"
        raise Refusal(f"load read {at} takes checkpoint bytes {got}; the chunks tile the payload in order, chunk "
                      f"{at} is {tiles[at] if at < len(tiles) else 'past the end'} ({len(reads)} reads, {len(tiles)} chunks)")
    for name, (base, first) in parts.items():
        wrong = _first_wrong(m.arena, base, base + part, "payload", first)
        if wrong:
            x, y, lab, bs = wrong
            raise Refusal(f"after the load, plane {name} bytes [{x - base}, {y - base}) hold {_held(lab, bs, x, y)}; "
                          f"they must hold payload bytes [{first + x - base}, {first + y - base})")
    for pc, op, args in steps[marker:]:
        if op == "read" and args["file"] == "checkpoint":
            raise Refusal(f"host step {pc}: reads the checkpoint after the load")

    # every publication: the gathers copy the planes, as they are at checkpoint-begin, into the file in order
    publications, written, window, done = 0, 0, None, {}
    for pc, op, args in steps:
        if op == "checkpoint-begin":
            if window is not None:
                raise Refusal(f"host step {pc}: checkpoint-begin inside the publication begun at step {window[0][0]}")
            window = [(pc, op, args)]
        elif window is None:
            if op == "write" and args["file"] == "checkpoint" or op == "checkpoint-publish":
                raise Refusal(f"host step {pc}: {op} outside a publication (no checkpoint-begin before it)")
        else:
            window.append((pc, op, args))
            if op == "checkpoint-publish":
                key = tuple(p for p, _, _ in window)
                if key not in done:
                    done[key] = _publication(plan, window, parts, part, payload, names)
                written += done[key]
                publications += 1
                window = None
    if window is not None:
        raise Refusal(f"host step {window[0][0]}: a publication begun there is never published")
    expected = plan["run"]["steps"] // plan["run"]["interval"]
    if publications != expected or written != expected * payload:
        raise Refusal(f"train publishes {publications} checkpoints of {written} bytes in all; the run publishes "
                      f"{expected} x {payload} = {expected * payload} bytes")
    return (f"{chunks} load reads tile the {payload}-byte payload in order, each byte placed once in params/m/v; "
            f"{publications} publications write {written} bytes, each byte from its plane")


def _publication(plan, window, parts, part, payload, names) -> int:
    """Simulate one publication; return the bytes it writes."""
    m, out, at = _Machine(plan), Content(), 0
    begin = window[0][0]
    for name, (base, first) in parts.items():
        m.arena.write(base, base + part, "checkpoint", first)
    for pc, op, args in window[1:]:
        where = f"publication at host step {begin}, step {pc}"
        if op in ("adamw-scalars", "cursor-advance", "cursor-from-checkpoint", "read-at-cursor"):
            raise Refusal(f"{where}: {op} inside the publication; the header's step and cursor would not match the bytes")
        if op in ("submit", "reissue"):
            if piece_class(names[args["ring"]]) != "transfer":
                raise Refusal(f"{where}: issues {names[args['ring']]} inside the publication; only gathers belong there")
            m.issue(args["ring"])
        elif op == "fill":
            a = m.hst({"buffer": args["buffer"], "offset": args["offset"]})
            m.host.write(a, a + args["bytes"], "fill")
        elif op == "write" and args["file"] == "checkpoint":
            if args["offset"] != at:
                raise Refusal(f"{where}: writes checkpoint bytes at offset {args['offset']}; the chunks are written in "
                              f"order, the next is at {at}")
            out.copy_from(m.host, m.hst({"buffer": args["buffer"], "offset": 0}), at, args["bytes"])
            at += args["bytes"]
    if at != payload:
        raise Refusal(f"publication at host step {begin} writes {at} bytes; the payload is {payload}")
    wrong = _first_wrong(out, 0, payload, "checkpoint", 0)
    if wrong:
        x, y, lab, bs = wrong
        if lab == "checkpoint":
            src = f"{PARTS[bs // part]} bytes [{bs % part}, {bs % part + y - x})"
        else:
            src = _held(lab, bs, x, y)
        raise Refusal(f"publication at host step {begin}: checkpoint bytes [{x}, {y}) come from {src}; they must be "
                      f"{PARTS[x // part]} bytes [{x % part}, {x % part + y - x})")
    return at


# ---------------------------------------------------------------------------- reissues
STEP_WORD_ARGS = ("step_size", "eps")  # the learner's (learner-step-words), not compared here


def _masked(c: dict) -> dict:
    if c.get("op") == "launch" and c.get("kernel") == "adamw":
        from ..plan.kernels import KERNELS
        names = [n for n, _ in KERNELS["adamw"]]
        args = [None if n in STEP_WORD_ARGS else a for n, a in zip(names, c["args"])]
        return c | {"args": args}
    return c


def check_reissues(plan, realization, realized, profile):
    names = _names(plan)
    for operation in OPERATIONS:
        issued = set()
        for pc, op, args in trace(plan, operation):
            if op == "submit":
                issued.add(args["ring"])
            elif op == "reissue" and args["ring"] not in issued:
                raise Refusal(f"{operation} host step {pc}: reissues ring entry {args['ring']} ({names[args['ring']]}), "
                              f"which was not issued before")
    r = Realized(plan, realization)
    entries, _ = unpack(realized, "ring_entries", "ring")
    if len(entries) != len(r.ring) or any(tuple(a) != tuple(b) for a, b in zip(entries, r.ring)):
        at = next((i for i, (a, b) in enumerate(zip(entries, r.ring)) if tuple(a) != tuple(b)),
                  min(len(entries), len(r.ring)))
        show = lambda rows: tuple(int(v) for v in rows[at]) if at < len(rows) else None  # noqa: E731
        raise Refusal(f"ring entry {at}: the realized tables hold {show(entries)}, the realization's ring {show(r.ring)}")
    if len(entries) != len(names):
        raise Refusal(f"the realization's ring has {len(entries)} entries; the plan's has {len(names)}")
    commands = 0
    for i, e in enumerate(entries):
        piece, offset, length = int(e["piece"]), int(e["offset"]), int(e["length"])
        if piece != i:
            raise Refusal(f"ring entry {i} ({names[i]}) issues piece {piece}; it must issue piece {i}")
        if offset + length > len(r.commands):
            raise Refusal(f"ring entry {i} ({names[i]}): commands [{offset}, {offset + length}) past the stream's "
                          f"{len(r.commands)}")
        want = plan["pieces"][i]["commands"]
        if length != len(want):
            raise Refusal(f"ring entry {i} ({names[i]}) holds {length} commands; the plan's piece has {len(want)}")
        for j in range(length):
            got = r.command(offset + j)
            if _masked(got) != _masked(want[j]):
                raise Refusal(f"ring entry {i} ({names[i]}) command {j} (stream {offset + j}): the realization has "
                              f"{_show(got)}; the plan's piece has {_show(want[j])}")
        commands += length
    return f"every reissue follows its submission; {len(entries)} ring entries decode to the plan's {commands} commands"


def _show(c: dict) -> str:
    if c["op"] != "launch":
        return describe(c)
    return f"launch {c['kernel']} grid {c['grid']} block {c['block']} shared {c['shared']} args {c['args']}"


# ---------------------------------------------------------------------------- request
def stat_reads(kind: str, n: int) -> list[tuple[str, int]]:
    """The host bytes record-stat reads (coppelius.runtime.interpreter: op_record_stat)."""
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
            elif op == "read-at-cursor":
                acc = [("w", *inside(args["buffer"], 0, 4 * args["tokens"], what), what)]
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
