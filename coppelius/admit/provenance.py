"""Check schedule-moves-checkpoint: a byte-provenance simulation of the load and of every
publication. Each byte of the arena, the host block and the checkpoint file is tracked as the
source byte it holds (Content); the load must put every payload byte into its part's plane once, and
every publication must write every part back, in order, from the right plane.
"""
from ..formats.checkpoint import PARTS
from .common import (Refusal, command_accesses, describe, iv_add, iv_overlap, names_of as _names, piece_class,
                     planes_by_name, tensor_table, trace)
from .schedule import chunk_count

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
                start = self.dev(c["dst"])
                self.arena.write(start, start + c["bytes"], f"memset by {self.pieces[ring]['name']}")
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
    # (plane, its arena byte, payload byte, bytes): every tensor of every part, where the plan's tensors put it
    spans = [(name, planes[name]["offset"] + 4 * t["offset"], j * part + 4 * t["payload_offset"], 4 * t["count"])
             for j, name in enumerate(PARTS) for t in tensor_table(plan)]

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
        chunk = tiles[at] if at < len(tiles) else "past the end"
        raise Refusal(f"load read {at} takes checkpoint bytes {got}; the chunks tile the payload in order, chunk "
                      f"{at} is {chunk} ({len(reads)} reads, {len(tiles)} chunks)")
    for name, at, first, nbytes in spans:
        wrong = _first_wrong(m.arena, at, at + nbytes, "payload", first)
        if wrong:
            x, y, lab, bs = wrong
            base = planes[name]["offset"]
            raise Refusal(f"after the load, plane {name} bytes [{x - base}, {y - base}) hold {_held(lab, bs, x, y)}; "
                          f"they must hold payload bytes [{first + x - at}, {first + y - at})")
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
                    done[key] = _publication(plan, window, spans, part, payload, names)
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


def _publication(plan, window, spans, part, payload, names) -> int:
    """Simulate one publication; return the bytes it writes."""
    m, out, at = _Machine(plan), Content(), 0
    begin = window[0][0]
    for _, start, first, nbytes in spans:
        m.arena.write(start, start + nbytes, "checkpoint", first)
    for pc, op, args in window[1:]:
        where = f"publication at host step {begin}, step {pc}"
        if op in ("adamw-scalars", "cursor-advance", "cursor-wrap", "cursor-from-checkpoint", "read-at-cursor",
                  "validation-begin", "validation-end"):
            raise Refusal(f"{where}: {op} inside the publication; the header's step and cursor would not match "
                          f"the bytes")
        if op in ("submit", "reissue"):
            if piece_class(names[args["ring"]]) != "transfer":
                raise Refusal(f"{where}: issues {names[args['ring']]} inside the publication; only gathers belong "
                              f"there")
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


