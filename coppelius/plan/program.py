"""The host program of a plan: the whole run, as steps of the vocabulary in formats/program.py."""


def host_program(ring: dict, payload_chunks: list, run, tokens_per_step: int) -> tuple[list, dict]:
    n = tokens_per_step
    program: list = []
    emit = lambda op, **args: program.append([op, args])  # noqa: E731

    emit("fill", buffer="context", offset=0, bytes=4 * (n + 1), value=0)
    emit("submit", ring=ring["initialize"])
    for k, (offset, nbytes) in enumerate(payload_chunks):
        emit("read", file="checkpoint", offset=offset, buffer="staging", bytes=nbytes)
        emit("submit", ring=ring[f"load_stage_{k}"])
        emit("submit", ring=ring[f"load_scatter_{k}"])
    operation_at = len(program)
    emit("operation", predict=None)

    # train: the loss before training, then `steps` updates with a publication every interval
    emit("cursor-from-checkpoint")
    emit("read-at-cursor", buffer="context", tokens=n + 1)
    emit("submit", ring=ring["forward"])
    emit("submit", ring=ring["restore"])
    emit("record-stat", kind="initial")
    publication = [["checkpoint-begin", {}]]
    for k, (offset, nbytes) in enumerate(payload_chunks):
        publication += [["submit", {"ring": ring[f"gather_{k}"]}],
                        ["write", {"file": "checkpoint", "offset": offset, "buffer": "staging", "bytes": nbytes}]]
    publication.append(["checkpoint-publish", {}])
    steps = [["read-at-cursor", {"buffer": "context", "tokens": n + 1}], ["adamw-scalars", {}],
             ["submit", {"ring": ring["update"]}], ["record-stat", {"kind": "step"}],
             ["cursor-advance", {"tokens": n}]]
    emit("repeat", count=run.steps // run.interval, body=1 + len(steps) + len(publication))
    emit("repeat", count=run.interval, body=len(steps))
    program += steps + publication
    # the final forward: the last context again, under the final weights
    emit("reissue", ring=ring["forward"])
    emit("reissue", ring=ring["restore"])
    emit("record-stat", kind="final")
    emit("write-status")
    emit("write-timestamps")
    emit("end")

    predict_at = len(program)
    program[operation_at][1]["predict"] = predict_at
    emit("repeat", count=run.eval_contexts, body=6)
    emit("read-at-cursor", buffer="context", tokens=n + 1)
    emit("submit", ring=ring["forward"])
    emit("submit", ring=ring["restore"])
    emit("record-stat", kind="predict")
    emit("write", file="predictions", offset=None, buffer="report_predictions", bytes=4 * n)
    emit("cursor-advance", tokens=n)
    emit("write-status")
    emit("write-timestamps")
    emit("end")
    return program, {"operation": operation_at, "predict": predict_at}
