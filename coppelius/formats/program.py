"""The host program: its vocabulary, its binary encoding, and the one walker that runs it.

A plan writes the program nested (`repeat(count, body)` holds its body) and `flatten` lays it out
in pre-order, each repeat counting the steps of its body, so nobody counts them by hand. The flat
form, a JSON list of [op, {arguments}], is the plan's `program`; `encode` writes it as the binary
table `program` that the run reads, and `decode` reads it back (docs/formats.md, host program).

  submit {ring}            issue a ring entry's submission
  reissue {ring}           issue again a submission already issued (same ring entry)
  repeat {count, body}     run the next `body` steps `count` times (count null: once per new token
                           of a generate run, the run's --new-tokens N; 0 times in train and predict)
  read {file, offset, buffer, bytes}        checkpoint payload bytes at offset -> host buffer
  read-at-cursor {buffer, tokens, offset}   `tokens` token ids at the cursor -> host buffer at byte `offset` (int32)
  cursor-from-checkpoint {}                 cursor, epoch and step count <- the checkpoint's header (predict:
                                            the cursor is 0 unless the run scores from the checkpoint's cursor)
  cursor-advance {tokens}
  cursor-wrap {tokens}                      when `tokens` tokens at the cursor would run past the stream's end:
                                            cursor <- 0, epoch += 1 (llm.c's loader: a context never straddles)
  validation-begin {}                       the cursor steps act on the validation stream, from its start
  validation-end {}                         record (t, mean of the validation losses); back to the train stream
  adamw-scalars {slot}                      t += 1; patch the step-size word of every AdamW launch of step slot
                                            `slot` (an update piece holds steps_per_launch steps, slots 0..)
  write {file, offset, buffer, bytes}       host buffer -> the open output (offset null: append)
  fill {buffer, offset, bytes, value}
  checkpoint-begin {} / checkpoint-publish {}
  record-stat {kind, buffer, offset}        initial | step | final | predict | validation: the mean of the
                                            losses in `buffer` from byte `offset`; a step's also its non-finite
                                            flag after them, and it records the oldest update not yet recorded
                                            (a step late)
  write-status {} / write-timestamps {}
  operation {predict, generate}             train goes on; predict and generate jump to their step
  sample-context {buffer, tokens}           the generation window (the last <= `tokens` ids) -> buffer (int32)
  sample-token {buffer, tokens, bytes}      sample the next id from the logits row of the window's last
                                            position (`tokens` rows of bytes/tokens bytes, f16; formats/sampling.py)
  write-sample {}                           publish the sample (prompt and new tokens) and print it
  end {}
"""
import numpy as np

from ..errors import CoppeliusError
from . import tables

VOCABULARY: dict[str, dict[str, type | tuple]] = {
    "submit": {"ring": int}, "reissue": {"ring": int}, "repeat": {"count": (int, type(None)), "body": int},
    "read": {"file": str, "offset": int, "buffer": str, "bytes": int},
    "read-at-cursor": {"buffer": str, "tokens": int, "offset": int}, "cursor-from-checkpoint": {},
    "cursor-advance": {"tokens": int}, "adamw-scalars": {"slot": int},
    "write": {"file": str, "offset": (int, type(None)), "buffer": str, "bytes": int},
    "fill": {"buffer": str, "offset": int, "bytes": int, "value": int},
    "checkpoint-begin": {}, "checkpoint-publish": {}, "record-stat": {"kind": str, "buffer": str, "offset": int},
    "write-status": {}, "write-timestamps": {}, "operation": {"predict": int, "generate": int}, "end": {},
    "sample-context": {"buffer": str, "tokens": int}, "sample-token": {"buffer": str, "tokens": int, "bytes": int},
    "write-sample": {}, "cursor-wrap": {"tokens": int}, "validation-begin": {}, "validation-end": {},
}
# The binary op codes, written out: a code never changes; a new op takes the next free one.
CODES = {"submit": 1, "reissue": 2, "repeat": 3, "read": 4, "read-at-cursor": 5, "cursor-from-checkpoint": 6,
         "cursor-advance": 7, "adamw-scalars": 8, "write": 9, "fill": 10, "checkpoint-begin": 11,
         "checkpoint-publish": 12, "record-stat": 13, "write-status": 14, "write-timestamps": 15, "operation": 16,
         "end": 17, "sample-context": 18, "sample-token": 19, "write-sample": 20, "cursor-wrap": 21,
         "validation-begin": 22, "validation-end": 23}
FILES = ("checkpoint", "predictions")
STATS = ("initial", "step", "final", "predict", "validation")
APPEND = (1 << 64) - 1  # a write's offset field for "append", a repeat's count for "once per new token" (null)
OPERATIONS = ("train", "predict", "generate")
MAX_STEPS_PER_LAUNCH = 8  # steps an update piece holds, at most (config: steps_per_launch)
# updates submitted and not yet recorded that a host holds, at most: two update pieces' (the C host's run.h); a
# plan's own bound is twice its steps_per_launch (admission: schedule-steps-fresh)
PENDING_UPDATES = 2 * MAX_STEPS_PER_LAUNCH
# Which argument goes to which field of a HOST_STEP record (the rest are 0).
FIELDS = {"ring": "ring", "count": "count", "tokens": "count", "offset": "offset", "bytes": "bytes", "value": "value",
          "slot": "value"}


def repeat(count: int, body: list) -> list:
    """A repeat step holding its body (nested); `flatten` turns it into the counted form."""
    return ["repeat", {"count": count, "body": list(body)}]


def flatten(steps: list) -> list:
    """The nested steps in pre-order, each repeat's body replaced by the number of steps it spans."""
    flat = []
    for op, args in steps:
        if op == "repeat" and isinstance(args["body"], list):
            body = flatten(args["body"])
            flat.append(["repeat", {"count": args["count"], "body": len(body)}])
            flat += body
        else:
            flat.append([op, dict(args)])
    return flat


def walk(program: list, operation: str, new_tokens: int = 0, validate: bool = True):
    """Yield (pc, op, args) for every step a run of `operation` (train, predict or generate) executes,
    repeats expanded (a null count: `new_tokens` times), up to the first `end`; `operation` steps are
    yielded too, as markers. Without `validate` (a train run given no validation stream) each validation
    pass, validation-begin through the next validation-end, is left out. The one walker: the runtime runs
    what it yields and admission traces it (docs/formats.md, the walker)."""
    def block(pc: int, end: int):
        while pc < end:
            op, args = program[pc]
            if op == "repeat":
                for _ in range(new_tokens if args["count"] is None else args["count"]):
                    if (yield from block(pc + 1, pc + 1 + args["body"])):
                        return True
                pc += 1 + args["body"]
                continue
            if op == "end":
                return True
            if op == "validation-begin" and not validate:
                pc = next((i for i in range(pc + 1, end) if program[i][0] == "validation-end"), end) + 1
                continue
            yield pc, op, args
            pc = args[operation] if op == "operation" and operation != "train" else pc + 1
        return False
    yield from block(0, len(program))


def encode(program: list) -> bytes:
    """The flat program as the binary table `program` (buffers by their index in HOST_BUFFERS)."""
    records = np.zeros(len(program), tables.HOST_STEP)
    for pc, (op, args) in enumerate(program):
        r = records[pc]
        r["op"] = CODES[op]
        for name, value in args.items():
            if name == "buffer":
                r["buffer"] = tables.HOST_BUFFERS.index(value)
            elif name == "file":
                r["file"] = FILES.index(value)
            elif name == "kind":
                r["value"] = STATS.index(value)
            elif op == "repeat" and name == "body":
                r["body"] = value
            elif name == "predict":
                r["body"] = value - pc - 1
            elif name == "generate":
                r["count"] = value - pc - 1
            else:
                r[FIELDS[name]] = APPEND if value is None else value
    return tables.pack("program", records)


def decode(data: bytes, where: str) -> list:
    """The binary table `program` back in the plan's flat form; refuses codes it does not know."""
    records, _ = tables.unpack("program", data, where)
    names = {code: op for op, code in CODES.items()}
    program = []
    for pc, r in enumerate(records):
        op = names.get(int(r["op"]))
        if op is None:
            raise CoppeliusError(f"{where}: host program step {pc} has op code {int(r['op'])}, not one of "
                                 f"1..{len(names)}; rebuild it with `snakemake`")
        args = {}
        for name in VOCABULARY[op]:
            if name == "buffer":
                index = int(r["buffer"])
                args[name] = tables.HOST_BUFFERS[index] if index < len(tables.HOST_BUFFERS) else f"#{index}"
            elif name == "file":
                args[name] = FILES[int(r["file"])] if int(r["file"]) < len(FILES) else f"#{int(r['file'])}"
            elif name == "kind":
                args[name] = STATS[int(r["value"])] if int(r["value"]) < len(STATS) else f"#{int(r['value'])}"
            elif op == "repeat" and name == "body":
                args[name] = int(r["body"])
            elif name == "predict":
                args[name] = pc + 1 + int(r["body"])
            elif name == "generate":
                args[name] = pc + 1 + int(r["count"])
            else:
                value = int(r[FIELDS[name]])
                null = (op, name) in (("write", "offset"), ("repeat", "count")) and value == APPEND
                args[name] = None if null else value
        program.append([op, args])
    return program


def check_program(program, ring_count: int, buffers: dict, where: str) -> None:
    """Refuse a host program that is not well formed: unknown steps, wrong arguments, bad references."""
    def bad(index, what, value):
        raise CoppeliusError(f"{where}: host program step {index} {what} is {value!r}; rebuild it with `snakemake`")

    if not isinstance(program, list) or not program:
        bad(0, "list", type(program).__name__)
    for index, step in enumerate(program):
        if not (isinstance(step, list) and len(step) == 2 and isinstance(step[1], dict)):
            bad(index, "encoding", step)
        op, args = step
        if not isinstance(op, str) or op not in VOCABULARY:
            bad(index, "op", op)
        if set(args) != set(VOCABULARY[op]):
            bad(index, f"({op}) arguments", sorted(args))
        for name, kind in VOCABULARY[op].items():
            value = args[name]
            if not isinstance(value, kind) or isinstance(value, bool) or (isinstance(value, int) and value < 0):
                bad(index, f"({op}) {name}", value)
        if op in ("submit", "reissue") and args["ring"] >= ring_count:
            bad(index, f"({op}) ring", args["ring"])
        if op == "repeat" and index + args["body"] >= len(program):
            bad(index, "(repeat) body", args["body"])
        for part in ("predict", "generate") if op == "operation" else ():
            if not index < args[part] < len(program):
                bad(index, f"(operation) {part}", args[part])
        if "buffer" in args and args["buffer"] not in buffers:
            bad(index, f"({op}) buffer", args["buffer"])
        if "file" in args and args["file"] not in FILES:
            bad(index, f"({op}) file", args["file"])
        if op == "record-stat" and args["kind"] not in STATS:
            bad(index, "(record-stat) kind", args["kind"])
        if op == "adamw-scalars" and args["slot"] >= MAX_STEPS_PER_LAUNCH:
            bad(index, "(adamw-scalars) slot", args["slot"])
