"""The host program's vocabulary and encoding: a JSON list of steps, each [op, {arguments}].

  submit {ring}            issue a ring entry's submission
  reissue {ring}           issue again a submission already issued (same ring entry)
  repeat {count, body}     run the next `body` steps `count` times
  read {file, offset, buffer, bytes}        checkpoint payload bytes at offset -> host buffer
  read-at-cursor {buffer, tokens}           `tokens` token ids at the cursor -> host buffer (int32)
  cursor-from-checkpoint {}                 cursor and step count <- the checkpoint's header
  cursor-advance {tokens}
  adamw-scalars {}                          t += 1; patch the step-size word of every AdamW launch
  write {file, offset, buffer, bytes}       host buffer -> the open output (offset null: append)
  fill {buffer, offset, bytes, value}
  checkpoint-begin {} / checkpoint-publish {}
  record-stat {kind}                        initial | step | final | predict
  write-status {} / write-timestamps {}
  operation {predict}                       train goes on; predict jumps to step `predict`
  end {}
"""
from ..errors import CoppeliusError

VOCABULARY: dict[str, dict[str, type | tuple]] = {
    "submit": {"ring": int}, "reissue": {"ring": int}, "repeat": {"count": int, "body": int},
    "read": {"file": str, "offset": int, "buffer": str, "bytes": int},
    "read-at-cursor": {"buffer": str, "tokens": int}, "cursor-from-checkpoint": {}, "cursor-advance": {"tokens": int},
    "adamw-scalars": {}, "write": {"file": str, "offset": (int, type(None)), "buffer": str, "bytes": int},
    "fill": {"buffer": str, "offset": int, "bytes": int, "value": int},
    "checkpoint-begin": {}, "checkpoint-publish": {}, "record-stat": {"kind": str},
    "write-status": {}, "write-timestamps": {}, "operation": {"predict": int}, "end": {},
}
FILES = ("checkpoint", "predictions")
STATS = ("initial", "step", "final", "predict")


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
        if op == "operation" and args["predict"] >= len(program):
            bad(index, "(operation) predict", args["predict"])
        if "buffer" in args and args["buffer"] not in buffers:
            bad(index, f"({op}) buffer", args["buffer"])
        if "file" in args and args["file"] not in FILES:
            bad(index, f"({op}) file", args["file"])
        if op == "record-stat" and args["kind"] not in STATS:
            bad(index, "(record-stat) kind", args["kind"])
