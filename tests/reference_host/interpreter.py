"""The host-program interpreter: replays the plan's host program against a device.

It reads only the host ELF and the files named on its command line; it never calls the
planner. Everything a run needs is checked before the device is touched.
"""
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

from coppelius.errors import CoppeliusError
from coppelius import canonical
from coppelius.formats import certificate, checkpoint, faults, result
from coppelius.formats.elf import host_machine, read_host_elf
from coppelius.formats.program import OPERATIONS, PENDING_UPDATES, walk
from coppelius.formats.publish import (Publication, check_writable_folder, publish_bytes, publish_link,
                                       write_remedy)
from coppelius.formats.step_size import f32_word, step_size_host
from reference_host.generate import Generation, check_sample_path, parse_options
from reference_host.sections import RunTables
from reference_host.streams import check_command_line, check_stream, first_cursor

SECTIONS = ("plan", "image", "kernel_info", "launches", "relocations", "commands", "ring", "program", "planes",
            "buffers", "run", "step_words", "certificate")


class Program:
    """A host ELF, checked and decoded."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        elf = read_host_elf(path)
        missing = [s for s in SECTIONS if s not in elf.sections]
        if missing:
            raise CoppeliusError(f"{path}: section .coppelius.{missing[0]} is missing; rebuild the host ELF with "
                                 f"`snakemake`")
        self.identity, self.sections, self.machine = elf.identity, elf.sections, elf.machine
        admitted = {k: v for k, v in self.sections.items() if k not in certificate.SECTIONS}
        self.certificate = certificate.verify(
            f"{path}: section .coppelius.certificate", self.sections["certificate"],
            admitted | {"plan": self.sections["plan"]}, "rebuild the host ELF with `snakemake`", self.identity)
        try:
            self.plan = json.loads(self.sections["plan"])
        except ValueError as e:
            raise CoppeliusError(f"{path}: section .coppelius.plan is not a readable plan ({e}); rebuild it with "
                                 f"`snakemake`")
        self.tables = RunTables(self.sections, str(path))  # refused here, before any input is read
        self.sha256 = elf.sha256


def device_factory(program: Program):
    """What makes the device the host ELF was built for (nothing is opened yet), or a one-line
    refusal saying why it is not here. The reference host runs the cpu target only: a GPU target's
    host ELF runs natively (coppelius/host/device_cuda.c)."""
    target, here = program.identity["target"], host_machine()
    if target != "cpu":
        raise CoppeliusError(f"{program.path}: target is {target!r}: the Python reference host runs the cpu target "
                             f"only (with a device of its own: tests/gpu/cuda_harness.py); run the host ELF itself "
                             f"(`coppelius run {program.path} ...`)")
    if program.machine != here:
        raise CoppeliusError(f"{program.path}: host machine is {program.machine}, this machine is {here}; "
                             f"rebuild the cpu target here with `snakemake`")
    from coppelius.runtime.cpu import CpuDevice
    return CpuDevice


class Run:
    def __init__(self, program: Program, device, checkpoint_path: str, tokens_path: str | None, out_dir: str,
                 operation: str, progress=None, validation_path: str | None = None, predict_from: str = "start",
                 generate: dict | None = None):
        if operation != "generate":
            check_command_line(operation, validation_path, predict_from)
        self.program, self.plan, self.device = program, program.plan, device
        self.operation, self.predict_from = operation, predict_from
        self.out = Path(out_dir)
        self.checkpoint_path = Path(checkpoint_path)
        self.tokens_path = Path(tokens_path) if tokens_path is not None else None
        self.validation_path = Path(validation_path) if validation_path is not None else None
        self.progress = progress or (lambda record: None)
        self.header = self._check_checkpoint()
        if operation == "generate":  # no token stream; nothing published but the sample at --out
            self.generation = Generation(generate, self.plan["model"]["vocab"], self.plan["model"]["context"])
            self.new_tokens = generate["new_tokens"]
        else:
            self.generation, self.new_tokens = None, 0
            self.stream = self._check_tokens()
            self.validation_stream = self._check_validation()
            self.identity = self._run_identity()
            if operation == "train":  # refused now, not at the first publication (the C runtime: run_identity)
                check_writable_folder(self.checkpoint_directory(), "this run's checkpoint folder", make=False)
        self.tables = program.tables
        self.buffers = self.tables.buffers
        self.lr, self.beta1, self.beta2 = (float(self.tables.run[k]) for k in ("lr", "beta1", "beta2"))
        self.cursor, self.epoch, self.t, self.consecutive_skips = 0, 0, 0, 0
        self.pending = []  # the updates submitted and not yet recorded (record-stat reads a loss a step late)
        self.submits, self.recorded_submission, self.submission_rate = 0, 0, 0.0
        self.train_position = None  # (stream, cursor, epoch) of the train stream during a validation pass
        self.issued = set()
        self.open_checkpoint = None
        self.record = {"format": result.FORMAT, "version": result.VERSION, "operation": operation,
                       "target": program.identity["target"], "plan_sha256": program.identity["plan_sha256"],
                       "host_elf_sha256": program.sha256, "tokens_per_step": self.plan["run"]["tokens_per_step"],
                       "tokens": {"path": str(self.tokens_path), "count": 0 if self.generation else len(self.stream)},
                       "checkpoint_in": {"path": str(self.checkpoint_path), "step": self.header["step"],
                                         "cursor": self.header["cursor"], "epoch": self.header["epoch"]},
                       "epoch": self.header["epoch"] if operation == "train" else 0,
                       "steps": [], "predict": [], "skipped": 0, "published": [], "status": "running"}
        if operation == "train":
            path = str(self.validation_path) if self.validation_path is not None else None  # None: passes skipped
            self.record["validation"] = {"path": path, "points": [], "seconds": 0.0,
                                         "contexts": self.plan["run"]["eval_contexts"]}
        elif operation == "predict":
            start = self.header["cursor"] if predict_from == "checkpoint" else 0
            self.record["predict_from"] = {"from": predict_from, "cursor": first_cursor(self.plan, self.stream, start)}

    # ---------------------------------------------------------------- checks before any work
    def _check_checkpoint(self) -> dict:
        contract = self.plan["contracts"]["checkpoint"]
        header = checkpoint.read_header(self.checkpoint_path)
        checkpoint.check_matches(self.checkpoint_path, header, contract["model"], contract["learner"])
        horizon = int(self.program.certificate.get("step_horizon", 0))
        end = header["step"] + self.plan["run"]["steps"]
        if self.operation == "train" and end > horizon:
            raise CoppeliusError(f"{self.checkpoint_path}: checkpoint step is {header['step']}; "
                                 f"{self.plan['run']['steps']} more steps reach step {end}, past step {horizon}, "
                                 f"the last the host's AdamW step sizes are certified for; resume from an earlier "
                                 f"checkpoint or change lr or the betas and rebuild")
        checkpoint.verify_payload(self.checkpoint_path, header)
        return header

    def _check_tokens(self) -> np.ndarray:
        run = self.plan["run"]
        if self.operation == "train":
            return check_stream(self.plan, self.tokens_path, self.header["cursor"], run["steps"])
        start = self.header["cursor"] if self.predict_from == "checkpoint" else 0
        return check_stream(self.plan, self.tokens_path, start, run["eval_contexts"])

    def _check_validation(self) -> np.ndarray | None:
        if self.validation_path is None:
            return None
        return check_stream(self.plan, self.validation_path, 0, self.plan["run"]["eval_contexts"])

    def _run_identity(self) -> str:
        """The digest of everything that determines this run's checkpoints: its checkpoints live
        under it, so a run with another seed, corpus or token file never touches them."""
        try:
            tokens_sha256 = canonical.file_sha256(self.tokens_path)
        except OSError as e:
            raise CoppeliusError(f"{self.tokens_path}: cannot read the token file ({e.strerror}); check the path")
        return canonical.digest({"host_elf_sha256": self.program.sha256, "operation": self.operation,
                                 "checkpoint": {"header_sha256": self.header["header_sha256"],
                                                "payload_sha256": self.header["payload_sha256"]},
                                 "tokens_sha256": tokens_sha256})

    # ---------------------------------------------------------------- the program
    def execute(self) -> dict:
        run, s = self.tables.run, self.program.sections
        self.device.allocate(int(run["arena_bytes"]), int(run["host_bytes"]))
        self.device.load_program(s["image"], s["launches"], s["relocations"], s["commands"], s["ring"], s["step_words"],
                                 self.tables.plane_offsets, [b["offset"] for b in self.buffers.values()])
        self.started = self.last_step = time.time()
        self.checkpoint_file = open(self.checkpoint_path, "rb")
        # predict: every scored context's predictions; train: its first forward's; generate: none
        self.predictions = None if self.generation is not None else Publication(self.out / "predictions.bin")
        try:
            validate = self.validation_path is not None  # a train run without one skips its passes
            for _, op, args in walk(self.tables.steps, self.operation, self.new_tokens, validate):
                if op != "operation":
                    faults.point(op)
                    getattr(self, "op_" + op.replace("-", "_"))(**args)
            self.device.synchronize()  # a late device error is this run's error
        finally:
            self.checkpoint_file.close()
        if self.generation is not None:
            return self.record
        try:
            self.finish()
        except OSError as error:
            self.publication_failed(error, "the run's last outputs")
        return self.record

    def finish(self):
        """Publish what the run produced: predictions, the final checkpoint's link, the result record."""
        if self.predictions is not None:
            self.predictions.__exit__(None, None, None)
            self.predictions = None
        if self.record["published"] and self.record["status"] == "completed":
            publish_link(self.record["published"][-1], self.out / "final.ckpt")
        result.write(self.out / "result.json", self.record)

    def buffer(self, name: str, offset: int = 0, nbytes: int | None = None) -> np.ndarray:
        """A host buffer, once every issued submission is done with it (copies run when the GPU gets there)."""
        self.device.synchronize()
        b = self.buffers[name]
        start = b["offset"] + offset
        return self.device.host[start:start + (b["bytes"] - offset if nbytes is None else nbytes)]

    def op_fill(self, buffer, offset, bytes, value):
        self.buffer(buffer, offset, bytes)[:] = value

    def op_submit(self, ring):
        self.submits += 1
        self.device.issue(ring)
        self.issued.add(ring)

    def op_reissue(self, ring):
        if ring not in self.issued:  # admission proves it cannot happen (schedule-reissues); a guard, not a check
            raise CoppeliusError(f"{self.program.path}: the host program reissues ring entry {ring} before issuing it; "
                                 f"rebuild the host ELF with `snakemake`")
        self.device.issue(ring)

    def op_read(self, file, offset, buffer, bytes):
        self.checkpoint_file.seek(checkpoint.HEADER_BYTES + offset)
        data = self.checkpoint_file.read(bytes)
        self.buffer(buffer, 0, bytes)[:] = np.frombuffer(data, np.uint8)

    def op_read_at_cursor(self, buffer, tokens, offset):
        ids = self.stream[self.cursor:self.cursor + tokens].astype("<i4")
        self.buffer(buffer, offset, 4 * tokens)[:] = ids.view(np.uint8)

    def op_cursor_from_checkpoint(self):
        train = self.operation == "train"
        self.cursor = self.header["cursor"] if train or self.predict_from == "checkpoint" else 0
        self.t, self.epoch = self.header["step"], self.header["epoch"] if train else 0

    def op_cursor_advance(self, tokens):
        self.cursor += tokens

    def op_cursor_wrap(self, tokens):
        if self.cursor + tokens > len(self.stream):
            self.cursor, self.epoch = 0, self.epoch + 1

    def op_validation_begin(self):
        self.train_position = (self.stream, self.cursor, self.epoch)
        self.stream, self.cursor, self.epoch = self.validation_stream, 0, 0
        self.validation_losses, self.validation_started = [], time.time()

    def op_validation_end(self):
        self.stream, self.cursor, self.epoch = self.train_position
        validation = self.record["validation"]
        validation["points"].append({"t": self.t, "loss": result.in_order_mean(self.validation_losses)})
        validation["seconds"] += time.time() - self.validation_started

    def op_adamw_scalars(self, slot):
        if len(self.pending) == PENDING_UPDATES:  # admission proves it cannot happen (schedule-steps-fresh); a guard
            raise CoppeliusError(f"{self.program.path}: the host program steps the optimizer with {PENDING_UPDATES} "
                                 f"updates unrecorded; rebuild the host ELF with `snakemake`")
        self.t += 1
        step_size = step_size_host(self.lr, self.beta1, self.beta2, self.t)
        self.pending.append({"t": self.t, "epoch": self.epoch, "step_word": f32_word(step_size),
                             "submission": self.submits + 1})
        self.device.patch_step_size(step_size, slot)

    def checkpoint_directory(self) -> Path:
        """This run's checkpoints: a folder named by the run's identity (host ELF, starting checkpoint,
        token stream, operation), so that no other run ever replaces or prunes them."""
        return self.out / "checkpoints" / self.identity[:16]

    def publication_failed(self, error: OSError, what: str | None = None):
        """Stop with one line when a file cannot be written; the newest published checkpoint stays whole."""
        if self.open_checkpoint is not None:
            self.open_checkpoint[0].__exit__(type(error), error, None)  # removes the temporary
            self.open_checkpoint = None
        what = what or f"the checkpoint of step {self.t}"
        reason = error.strerror or str(error)
        newest = self.record["published"][-1] if self.record["published"] else str(self.checkpoint_path)
        self.record["status"] = f"stopped: publishing {what} failed ({reason})"
        try:
            self.finish()
            recorded = f"the result record {self.out / 'result.json'} says so"
        except OSError as late:
            recorded = f"the result record could not be written either ({late.strerror or late})"
        raise CoppeliusError(f"{self.checkpoint_directory()}: publishing {what} failed ({reason}); the newest "
                             f"published checkpoint stays {newest} and {recorded}: {write_remedy(error)} "
                             f"and resume from it")

    def op_checkpoint_begin(self):
        try:
            path = self.checkpoint_directory() / f"step-{self.t:06d}.ckpt"
            self.open_checkpoint = (Publication(path), hashlib.sha256(), [0])
            self.open_checkpoint[0].file.write(b"\0" * checkpoint.HEADER_BYTES)
        except OSError as error:
            self.publication_failed(error)

    def op_write(self, file, offset, buffer, bytes):
        data = self.buffer(buffer, 0, bytes).tobytes()
        if file == "predictions":
            try:
                self.predictions.file.write(data)
            except OSError as error:
                self.predictions.__exit__(type(error), error, None)
                self.predictions = None
                self.publication_failed(error, f"the predictions {self.out / 'predictions.bin'}")
            return
        publication, digest, written = self.open_checkpoint
        if offset != written[0]:  # admission proves the order (schedule-moves-checkpoint); a guard, not a check
            raise CoppeliusError(f"{self.program.path}: the host program writes checkpoint bytes at {offset}, the "
                                 f"next is at {written[0]}; rebuild the host ELF with `snakemake`")
        try:
            publication.file.write(data)
        except OSError as error:
            self.publication_failed(error)
        digest.update(data)
        written[0] += len(data)

    def op_checkpoint_publish(self):
        publication, digest, written = self.open_checkpoint
        contract = self.plan["contracts"]["checkpoint"]
        header = checkpoint.header_for(contract["model"], contract["learner"], self.t, self.cursor,
                                       payload_bytes=written[0], payload_sha256=digest.hexdigest(), epoch=self.epoch)
        encoded = checkpoint.encode_header(header)
        if publication.path.exists() and _head(publication.path, len(encoded)) != encoded:
            publication.__exit__(CoppeliusError, None, None)  # discards the temporary
            self.open_checkpoint = None
            raise CoppeliusError(f"{publication.path}: already holds a checkpoint with other bytes than this run's "
                                 f"step {self.t}; a published checkpoint is never replaced: move it away and run again")
        try:
            publication.file.seek(0)
            publication.file.write(encoded)
            publication.__exit__(None, None, None)
        except OSError as error:
            self.publication_failed(error)
        self.open_checkpoint = None
        faults.point("publish-renamed")
        directory = publication.path.parent
        self.record["published"].append(str(publication.path))
        self.record["epoch"] = self.epoch
        try:
            publish_bytes(directory / "latest", publication.path.name.encode() + b"\n")
        except OSError as error:  # `latest` still names the previous checkpoint, which pruning has not touched
            self.publication_failed(error, f"the pointer {directory / 'latest'}")
        self.prune(directory)
        try:  # what the run did until now, should it be killed before the next publication
            result.write(self.out / "result.json", self.record | {"status": "interrupted"})
        except OSError as error:
            self.publication_failed(error, f"the result record {self.out / 'result.json'}")

    def prune(self, directory: Path):
        """Keep the newest `keep` steps of this run up to the one just published (step t); never a later step."""
        steps = {int(p.name[5:-5]): p for p in directory.glob("step-*.ckpt") if p.name[5:-5].isdigit()}
        older = sorted(step for step in steps if step < self.t)
        for step in older[:max(0, len(older) - (self.plan["run"]["keep"] - 1))]:
            steps[step].unlink()

    def op_record_stat(self, kind, buffer, offset):
        n = self.plan["run"]["tokens_per_step"]
        if kind == "step":  # the oldest update not yet recorded: its losses, then its non-finite flag
            if not self.pending:  # admission proves it cannot happen (schedule-steps-fresh); a guard
                raise CoppeliusError(f"{self.program.path}: the host program records a step with no update "
                                     f"submitted; rebuild the host ELF with `snakemake`")
            update = self.pending.pop(0)
            losses = self.buffer(buffer, offset, 4 * n).view("<f4")
            skipped = bool(self.buffer(buffer, offset + 4 * n, 4).view("<i4")[0])
            loss = float(np.mean(losses, dtype=np.float64))
            self.record["skipped"] += skipped
            self.consecutive_skips = self.consecutive_skips + 1 if skipped else 0
            now = time.time()
            if update["submission"] != self.recorded_submission:  # a submission's steps share its time and rate
                steps = 1 + sum(p["submission"] == update["submission"] for p in self.pending)
                took, self.last_step, self.recorded_submission = now - self.last_step, now, update["submission"]
                self.submission_rate = n * steps / took if took > 0 else 0.0
            entry = {"t": update["t"], "loss": loss, "skipped": skipped, "time": now - self.started,
                     "epoch": update["epoch"], "tokens_per_second": self.submission_rate,
                     "step_word": update["step_word"]}
            self.record["steps"].append(entry)
            self.progress(entry | {"steps": self.plan["run"]["steps"], "tokens": n})
            if self.consecutive_skips >= self.plan["run"]["max_skips"]:
                newest = self.record["published"][-1] if self.record["published"] else str(self.checkpoint_path)
                self.record["status"] = f"stopped: {self.consecutive_skips} consecutive steps with non-finite gradients"
                self.finish()
                first = update["t"] - self.consecutive_skips + 1
                raise CoppeliusError(
                    f"{self.tokens_path}: steps {first}..{update['t']} all had non-finite "
                    f"gradients (loss_scale {self.plan['learner']['loss_scale']}); stopped, the last good "
                    f"checkpoint is {newest}: lower loss_scale and resume from it")
            return
        loss = float(np.mean(self.buffer(buffer, offset, 4 * n).view("<f4"), dtype=np.float64))
        if kind == "predict":
            self.record["predict"].append({"context": len(self.record["predict"]), "loss": loss})
            self.record["mean_loss"] = result.in_order_mean([p["loss"] for p in self.record["predict"]])
        elif kind == "validation":
            self.validation_losses.append(loss)
        else:
            self.record[f"{kind}_loss"] = loss

    def op_sample_context(self, buffer, tokens):
        window = np.array(self.generation.window(tokens), "<i4")
        self.buffer(buffer, 0, 4 * len(window))[:] = window.view(np.uint8)

    def op_sample_token(self, buffer, tokens, bytes):
        self.generation.take(self.buffer(buffer, 0, bytes).view("<f2"), tokens)

    def op_write_sample(self):
        text = self.generation.text()
        try:
            publish_bytes(self.out, text)
        except OSError as error:
            raise CoppeliusError(f"{self.out}: writing the sample failed ({error.strerror or error}); "
                                 f"{write_remedy(error)} or give another --out")
        sys.stdout.buffer.write(text)
        sys.stdout.flush()

    def op_write_status(self):
        self.record["status"] = "completed"

    def op_write_timestamps(self):
        elapsed = time.time() - self.started
        count = len(self.record["steps"]) or len(self.record["predict"])
        self.record["timestamps"] = {"started": self.started, "finished": time.time(), "seconds": elapsed}
        self.record["tokens_per_second"] = count * self.plan["run"]["tokens_per_step"] / elapsed if elapsed else 0.0
        self.record["epoch"] = self.epoch
        if self.operation == "train":
            self.record["tokens_per_second_counts"] = result.RATE_COUNTS


def _head(path: Path, count: int) -> bytes:
    with open(path, "rb") as f:
        return f.read(count)


def progress_printer(stream=sys.stderr):
    """A progress line redrawn in place on a terminal; a log line every twentieth of the run otherwise."""
    tty, count = stream.isatty(), [0]

    def progress(entry):
        count[0] += 1
        rate = entry["tokens"] * count[0] / entry["time"] if entry["time"] else 0.0
        line = (f"step {entry['t']:>6} ({count[0]}/{entry['steps']}) loss {entry['loss']:.4f}"
                f"{' skipped' if entry['skipped'] else ''} {rate:,.0f} tok/s")
        if tty:
            stream.write("\r" + line + " " * 8)
        elif count[0] % max(1, entry["steps"] // 20) == 0 or count[0] == entry["steps"]:
            stream.write(line + "\n")
        stream.flush()
    return progress


def check_outputs_are_not_inputs(out_dir: str, inputs: dict) -> None:
    """A train or predict run replaces final.ckpt, predictions.bin and result.json in --out: none may be an input by
    its only name (the C runtime: check_outputs_are_not_inputs)."""
    for name in ("final.ckpt", "predictions.bin", "result.json"):
        output = Path(out_dir) / name
        if not output.exists() or output.stat().st_nlink != 1:
            continue
        for flag, path in inputs.items():
            if path is not None and Path(path).exists() and output.samefile(path):
                raise CoppeliusError(f"{Path(path)}: {flag} is this run's output {name} in --out, which the run would "
                                     f"replace; copy it out of {Path(out_dir)} or give another --out")


def run(host_elf: str, checkpoint_path: str, tokens_path: str | None, out_dir: str, operation: str = "train",
        validation_path: str | None = None, predict_from: str = "start", generate: dict | None = None) -> dict:
    """Train, predict, or generate (`generate`: the command line's strings of parse_options; --out is
    then the sample file)."""
    if operation not in OPERATIONS:
        raise CoppeliusError(f"command line: operation is {operation!r}; use train, predict or generate")
    if operation == "generate":
        generate = parse_options(**generate)
        check_sample_path(out_dir, {"the --checkpoint file": checkpoint_path,
                                    "the --prompt-tokens file": generate["prompt_tokens"], "the host ELF": host_elf})
    else:
        check_command_line(operation, validation_path, predict_from)
        check_writable_folder(out_dir, "--out")
        check_outputs_are_not_inputs(out_dir, {"--checkpoint": checkpoint_path, "--tokens": tokens_path,
                                               "--validation": validation_path})
    program = Program(host_elf)
    make_device = device_factory(program)
    runner = Run(program, None, checkpoint_path, tokens_path, out_dir, operation, progress_printer(),  # checks inputs
                 validation_path, predict_from, generate)
    runner.device = make_device()  # the device is touched only once every input has passed
    try:
        record = runner.execute()
    finally:
        runner.device.close()
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    return record


