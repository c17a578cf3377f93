"""Check schedule-generate: the generate part samples one token per forward, from that forward's logits.

Traced with TRACED_NEW_TOKENS new tokens (common.trace): every forward of generate (the sample_forward piece:
one sequence) takes a context the host just built (the context buffer zeroed whole, then the window written at its
start, context positions at most); the sample piece copies that forward's logits (every position, the model's
padded vocabulary, f16) back to the host buffer that sample-token then reads, row for row; one sample-token per
forward; the sample is written once, after the last. Generate touches no token stream, cursor, optimizer or
checkpoint publication, and train and predict sample nothing.
"""
from .common import GENERATE_PIECES, OPERATIONS, TRACED_NEW_TOKENS, Refusal, describe, names_of, trace

GENERATE_ONLY = ("sample-context", "sample-token", "write-sample")
NOT_IN_GENERATE = ("read-at-cursor", "cursor-from-checkpoint", "cursor-advance", "adamw-scalars", "write",
                   "checkpoint-begin", "checkpoint-publish", "record-stat")


def _sample_copy(plan: dict, names: list, T: int, Vp: int) -> str:
    """The host buffer the sample piece copies the first context's logits into (its one command)."""
    if "sample" not in names:
        raise Refusal("the ring has no sample piece")
    commands = plan["pieces"][names.index("sample")]["commands"]
    want = 2 * T * Vp
    c = commands[0] if len(commands) == 1 else None
    if c is None or c["op"] != "d2h" or c["src"] != {"plane": "logits", "offset": 0} or c["bytes"] != want \
            or c["dst"]["offset"] != 0:
        got = "; ".join(describe(c) for c in commands) or "nothing"
        raise Refusal(f"piece sample must copy logits+0 ({want} bytes: {T} positions x {Vp} f16) to a host buffer "
                      f"at 0; it holds {got}")
    return c["dst"]["buffer"]


def _forward_source(plan: dict, names: list) -> str:
    """The host buffer the sample_forward piece takes its tokens from."""
    if "sample_forward" not in names:
        raise Refusal("the ring has no sample_forward piece")
    for c in plan["pieces"][names.index("sample_forward")]["commands"]:
        if c["op"] == "h2d" and c["dst"]["plane"] == "context":
            return c["src"]["buffer"]
    raise Refusal("piece sample_forward copies no tokens from the host")


def check_generate(plan, realization, realized, profile):
    names = names_of(plan)
    T, Vp, n = plan["model"]["context"], plan["model"]["vocab_padded"], plan["run"]["tokens_per_step"]
    logits_buffer, context_buffer = _sample_copy(plan, names, T, Vp), _forward_source(plan, names)
    for operation in OPERATIONS:
        if operation == "generate":
            continue
        for pc, op, args in trace(plan, operation):
            if op in GENERATE_ONLY or (op in ("submit", "reissue") and names[args["ring"]] in GENERATE_PIECES):
                raise Refusal(f"{operation} host step {pc}: {op} {args}; only generate samples")
    zeroed = window = forwarded = copied = part = False
    tokens = samples_written = 0
    for pc, op, args in trace(plan, "generate"):
        at = f"generate host step {pc} ({op})"
        if not part:  # the load every operation shares (schedule-moves-checkpoint checks it)
            part = op == "operation"
            continue
        if op in NOT_IN_GENERATE:
            raise Refusal(f"{at}: generate reads no token stream and trains nothing")
        if samples_written:
            raise Refusal(f"{at}: after write-sample; the sample is written once, at the end")
        if op == "fill" and args["buffer"] == context_buffer:
            zeroed = args["offset"] == 0 and args["bytes"] >= 4 * (n + 1) and args["value"] == 0
            window = False
        elif op == "sample-context":
            if args["buffer"] != context_buffer or args["tokens"] != T or not zeroed:
                raise Refusal(f"{at}: the window ({args['tokens']} positions into {args['buffer']}) must go into "
                              f"{context_buffer}, zeroed whole before, and hold at most the context's {T} positions")
            window = True
        elif op in ("submit", "reissue") and names[args["ring"]] == "sample_forward":
            if not window:
                raise Refusal(f"{at}: the forward takes no window written since the last token")
            forwarded, copied, zeroed, window = True, False, False, False
        elif op in ("submit", "reissue") and names[args["ring"]] == "sample":
            if not forwarded:
                raise Refusal(f"{at}: the sample piece copies logits no forward of this token computed")
            copied = True
        elif op in ("submit", "reissue"):
            raise Refusal(f"{at}: generate issues {names[args['ring']]} in its token loop; it issues "
                          f"sample_forward and sample only")
        elif op == "sample-token":
            if not copied or args["buffer"] != logits_buffer or args["tokens"] != T or args["bytes"] != 2 * T * Vp:
                raise Refusal(f"{at}: samples from {args['buffer']} ({args['tokens']} rows, {args['bytes']} bytes) "
                              f"{'before' if not copied else 'not from'} the sample piece's copy of this forward's "
                              f"logits ({logits_buffer}, {T} rows, {2 * T * Vp} bytes)")
            tokens += 1
            forwarded = copied = False
        elif op == "write-sample":
            samples_written += 1
    if tokens != TRACED_NEW_TOKENS or not samples_written:
        raise Refusal(f"generate samples {tokens} tokens for {TRACED_NEW_TOKENS} new tokens and writes the sample "
                      f"{samples_written} times; it must sample one per new token and write the sample once")
    return (f"generate samples each new token from its own forward's logits ({T} positions x {Vp}, copied to "
            f"{logits_buffer}), the window rebuilt before each forward; train and predict sample nothing")
