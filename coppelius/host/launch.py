"""`coppelius run`: a thin wrapper that executes the native host ELF.

Every target's host ELF is a native program (coppelius/host/run.c, with the cpu device or the cuda
device) that checks its inputs, trains or predicts and publishes everything itself; this wrapper only
decides that it can run here, executes it, passes its progress lines through, turns its one-line
refusal into this command's (a CoppeliusError) and dies by the same signal when it is killed (so that
a SIGKILL reads the same to whoever waits on `coppelius run`); a program that faulted (SIGSEGV, SIGBUS,
...) is refused in one line instead. The Python reference host the native
run is checked against lives with the tests (tests/reference_host), not here.
"""
import os
import signal
import subprocess
import sys
from pathlib import Path

from ..errors import CoppeliusError
from ..formats import result
from ..formats.elf import host_machine, read_host_elf

FAULTS = {signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT, signal.SIGSYS}
ET_REL = 1  # the ELF type of a container of tables without code (coppelius/formats/elf.py)


def run(host_elf: str, checkpoint_path: str, tokens_path: str, out_dir: str, operation: str = "train",
        validation_path: str | None = None, predict_from: str | None = None) -> dict:
    """Execute a host ELF: train (scoring `validation_path` at every publication), or predict only (from the
    stream's start or the checkpoint's cursor); its result record. The host ELF checks the options."""
    if operation not in ("train", "predict"):
        raise CoppeliusError(f"command line: operation is {operation!r}; use train or predict")
    native = _native(host_elf)
    command = [native, "--checkpoint", str(checkpoint_path), "--tokens", str(tokens_path), "--out", str(out_dir),
               "--operation", operation]
    if predict_from is not None:
        command += ["--predict-from", predict_from]
    if validation_path is not None:
        command += ["--validation", str(validation_path)]
    env = os.environ | ({"COPPELIUS_PROGRESS_TTY": "1"} if sys.stderr.isatty() else {})
    last = _execute(command, env)
    if last is not None:
        raise CoppeliusError(last)
    return result.read(Path(out_dir) / "result.json")


def sample(host_elf: str, checkpoint_path: str, out: str, options: dict) -> bytes:
    """Generate: `options` are the command line's strings (prompt, prompt_tokens, new_tokens, temperature,
    top_k, seed; None where not given), handed to the host as they are, which checks them; the host
    publishes the sample at `out` and prints it on stdout. The sample's bytes."""
    command = [_native(host_elf), "--operation", "generate", "--checkpoint", str(checkpoint_path), "--out", str(out)]
    for name, value in options.items():
        if value is not None:
            command += ["--" + name.replace("_", "-"), value]
    last = _execute(command, dict(os.environ))
    if last is not None:
        raise CoppeliusError(last)
    return Path(out).read_bytes()


def _native(host_elf: str) -> str:
    """The path to execute, once the host ELF is known to be a native program for this machine."""
    elf = read_host_elf(host_elf)  # a missing, damaged or tampered file is refused here, in one line
    here, target, card = host_machine(), elf.identity.get("target"), elf.identity.get("card")
    if elf.machine != here and target == "cpu":
        raise CoppeliusError(f"{host_elf}: host machine is {elf.machine}, this machine is {here}; rebuild the cpu "
                             f"target here with `snakemake`")
    if elf.machine != here:
        raise CoppeliusError(
            f"{host_elf}: target is {target!r}: no {card} is present on this machine ({here}); copy the host ELF, the "
            f"checkpoint and the token file to an {elf.machine} host with the {card} and run `{Path(host_elf).name} "
            f"--checkpoint CKPT --tokens BIN --out DIR` (or `coppelius run HOST_ELF ...`) there")
    with open(host_elf, "rb") as f:
        kind = int.from_bytes(f.read(18)[16:18], "little")
    if kind == ET_REL:
        raise CoppeliusError(f"{host_elf}: ELF type is {kind} (a container of tables without code), not a native host "
                             f"executable; rebuild it with `snakemake`")
    return str(Path(host_elf).resolve())


def _execute(command: list[str], env: dict) -> str | None:
    """Run the host ELF, passing its stderr through but its last line; None when it completed, else
    that line (its refusal). Killed by a signal, this process dies by the same signal."""
    try:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    except OSError as e:
        raise CoppeliusError(f"{command[0]}: cannot execute the host ELF ({e.strerror}); check that it is executable "
                             f"(chmod +x) or rebuild it with `snakemake`")
    held, pending = None, b""
    for chunk in iter(lambda: proc.stderr.read1(1 << 16), b""):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if held is not None:
                sys.stderr.buffer.write(held + b"\n")
            held = line
        if pending.startswith(b"\r"):  # a progress line redrawn in place on a terminal
            sys.stderr.buffer.write(pending)
            pending = b""
        sys.stderr.flush()
    status = proc.wait()
    if -status in FAULTS:  # the program itself failed: a damaged file, or a defect; say so instead of dying of it
        raise CoppeliusError(f"{command[0]}: the host ELF died of {signal.Signals(-status).name}; check the file with "
                             f"`coppelius inspect` and `{Path(command[0]).name} --verify`, or rebuild it with "
                             f"`snakemake`")
    if status < 0:  # a signal from outside (kill, Ctrl-C): this process goes the same way
        os.kill(os.getpid(), -status)
    last = (held or b"").decode(errors="replace").strip()
    if status == 0:
        if last:
            sys.stderr.write(last + "\n")
        return None
    return last or f"{command[0]}: the host ELF stopped with exit status {status} and no message; run it again"
