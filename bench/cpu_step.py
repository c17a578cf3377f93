"""The native cpu training step against PyTorch on the CPU and llm.c's CPU trainer, on this machine.

Builds the tiny model's plan (batch 16, context 64, the default token file) with the workflow's
own stages, writes the host ELF's tables (the binary layouts of docs/formats.md) to files, compiles bench/cpu_step.c
with the C host runtime (coppelius/host) by zig cc, and runs its train walk: the real launch
table, command stream and host program on the C cpu device. Prints the per-step losses next to
the Python interpreter's (the numpy reference host) and the tokens per second next to llm.c's.

The peer that counts is measured here, side by side: PyTorch eager on the CPU (bench/peer.py's cpu_peer_ms: the
same model, batch and AdamW, float32, the same number of threads), in rounds alternating with the native walk, each
round's median step taken and the median over rounds reported; skipped, with a line saying so, where torch is not
installed (`pip install torch==2.13.0`: the CPU build on this project's machines).

llm.c's figure is not measured by this script (llm.c's source is not part of Coppelius, and the
machines it runs on may have no network to fetch it). By default it is the one in the project's
FACTS (2026-11-30, a 2-core machine of this project's kind): `train_gpt2.c` at its public head,
gcc -Ofast -fopenmp -march=native, OMP_NUM_THREADS=2, fp32, the same model, weights, batch,
context and token file: about 25,900 tokens/s. Pass --peer with a figure measured on the machine
at hand to compare with that instead (same machine, same day: that is the comparison that counts).

Measured 2026-11-30 on the helper's 2-vCPU VM (Intel Xeon, AVX-512 capable; two threads of a
pure arithmetic loop take twice as long as one there, so it has about one core of throughput):
llm.c's train_gpt2.c (commit 0109bd1, layers verbatim, main reduced to B=16, T=64 on the same
init weights and tokens; first loss 5.510554 as in FACTS) ran 7,465 tokens/s with
OMP_NUM_THREADS=1 and 2,167 with OMP_NUM_THREADS=2; this native step ran 16,400 (1 thread) to
17,900 (2 threads) tokens/s: 2.2x to 2.4x llm.c's best there.

    python bench/cpu_step.py [--steps 30] [--interval 10] [--threads 2] [--rounds 5] [--compare]
        [--peer TOKENS_PER_SECOND]
"""
import argparse
import json
import statistics
import os
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the Python reference host (--compare)

from coppelius.config import load  # noqa: E402
from coppelius.formats.elf import host_machine, read_host_elf  # noqa: E402
from coppelius.host.build import HOST_DIR, compile_program  # noqa: E402
from coppelius.stages import build_chain  # noqa: E402

LLM_C_TOKENS_PER_SECOND = 25_900  # FACTS.md, "The CPU peer" (another machine: see the docstring)


def write_tables(paths: dict, out: Path) -> dict:
    """The host ELF's own tables (docs/formats.md layouts), one file each, and run.txt for cpu_step.c; its plan."""
    sections = read_host_elf(paths["elf"]).sections
    for name in ("launches", "relocations", "commands", "ring", "step_words", "planes", "buffers", "program"):
        (out / f"{name}.bin").write_bytes(sections[name])
    plan = json.loads(sections["plan"])
    learner = learner_floats(plan)
    (out / "run.txt").write_text(f"{plan['arena']['bytes']} {plan['host']['bytes']} {learner['lr']!r} "
                                 f"{learner['beta1']!r} {learner['beta2']!r} {plan['run']['tokens_per_step']}\n")
    return plan


def learner_floats(plan: dict) -> dict:
    """The plan's learner ratios as floats (the peer's and cpu_step.c's numbers)."""
    return {k: float(Fraction(v)) for k, v in plan["learner"].items()}


def full_run(paths: dict, out: Path, threads: int) -> dict:
    """The whole native run, as the workflow's train rule executes it: the host ELF from the elf stage."""
    started = time.perf_counter()
    subprocess.run([paths["elf"], "--checkpoint", paths["checkpoint"], "--tokens", paths["train"], "--validation",
                    paths["val"], "--out", str(out)],
                   check=True, capture_output=True, env=os.environ | {"COPPELIUS_THREADS": str(threads)})
    wall = time.perf_counter() - started
    return json.loads((out / "result.json").read_text()) | {"wall": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--interval", type=int, default=10, help="the full run publishes a checkpoint this often")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the native walk and PyTorch, alternating")
    parser.add_argument("--compare", action="store_true", help="also run the Python interpreter (numpy host)")
    parser.add_argument("--out", help="write the figures as JSON here (bench/results/cpu_step-DATE.json)")
    parser.add_argument("--peer", type=float, default=LLM_C_TOKENS_PER_SECOND,
                        help="llm.c's tokens/s to compare with (default: FACTS.md's figure, from another machine)")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="coppelius-cpu-step-") as work:
        work = Path(work)
        os.environ.setdefault("COPPELIUS_STORE", str(work / "store"))
        config = load(ROOT / "config/config.yaml", {"steps": options.steps, "interval": options.interval, "batch": 16})
        paths = build_chain(config, work / "cpu")
        tables = work / "tables"
        tables.mkdir()
        plan = write_tables(paths, tables)
        program = work / "cpu_step"
        compile_program(host_machine(), [p for p in sorted(HOST_DIR.glob("*.c")) if p.name != "main.c"] +
                        [ROOT / "bench/cpu_step.c"], program, include_dirs=[HOST_DIR])
        torch_peer = pytorch_peer(plan, options.threads, options.steps)
        rates, torch_rates = [], []
        for _ in range(options.rounds):  # alternating, so that a busy moment of the machine meets both
            run = subprocess.run([str(program), str(tables), paths["checkpoint"], paths["train"],
                                  str(options.threads)], capture_output=True, text=True)
            if run.returncode != 0:
                sys.exit(f"bench/cpu_step.c: {run.stderr.strip()}")
            rates.append(float(run.stdout.split("tokens_per_second")[1]))
            if torch_peer:
                torch_rates.append(torch_peer())
        steps = [line.split() for line in run.stdout.splitlines() if line.startswith("step ")]
        native = {int(s[1]): float(s[3]) for s in steps}
        skipped = {int(s[1]) for s in steps if s[-1] == "skipped"}
        rate = statistics.median(rates)
        torch_rate = statistics.median(torch_rates) if torch_rates else None
        numpy_rate = None
        if options.compare:
            from reference_host.interpreter import run as interpret
            record = interpret(paths["elf"], paths["checkpoint"], paths["train"], str(work / "python"))
            print(f"{'step':>5} {'native loss':>12} {'numpy loss':>12}  (* skipped: gradients not finite)")
            for entry in record["steps"]:
                t = entry["t"]
                print(f"{t:>5} {native[t]:>12.6f}{'*' if t in skipped else ' '} {entry['loss']:>12.6f}"
                      f"{'*' if entry['skipped'] else ''}")
            numpy_rate = record["tokens_per_second"]
            print(f"numpy host: {numpy_rate:,.0f} tokens/s")
        else:
            print("losses:", " ".join(f"{native[t]:.4f}" for t in sorted(native)))
        print(run.stdout.splitlines()[0] + f", {options.steps} steps of 16 x 64 tokens")
        full = full_run(paths, work / "native", options.threads)
        print(f"full native run (host.elf, loading, {options.steps // options.interval} checkpoints published, "
              f"result record): {full['tokens_per_second']:,.0f} tokens/s by its record, "
              f"{full['wall']:.2f} s wall for the process; "
              f"{full['tokens_per_second'] / options.peer:.2f}x llm.c's figure")
        source = "FACTS.md, another machine" if options.peer == LLM_C_TOKENS_PER_SECOND else "given"
        print(f"native cpu host: {rate:,.0f} tokens/s; llm.c train_gpt2.c ({source}): {options.peer:,.0f} "
              f"tokens/s; ratio {rate / options.peer:.2f}x")
        if torch_rate:
            print(f"native cpu host against PyTorch {torch_version()} eager, float32, {options.threads} threads, side "
                  f"by side ({options.rounds} rounds, medians): {rate:,.0f} against {torch_rate:,.0f} tokens/s; "
                  f"ratio {rate / torch_rate:.2f}x")
        if options.out:
            record = {"date": time.strftime("%Y-%m-%d", time.gmtime()), "machine": machine_description(),
                      "model": "tiny", "batch": 16, "context": 64, "steps": options.steps, "threads": options.threads,
                      "native_step_walk_tokens_per_second": rate,
                      "native_full_run_tokens_per_second": full["tokens_per_second"],
                      "native_full_run_wall_s": full["wall"],
                      "llm_c_tokens_per_second": options.peer, "llm_c_source": source,
                      "numpy_host_tokens_per_second": numpy_rate, "rounds": options.rounds,
                      "native_step_walk_rounds": rates, "pytorch_cpu_rounds": torch_rates,
                      "pytorch_cpu_tokens_per_second": torch_rate, "pytorch_version": torch_version(),
                      "ratio_pytorch_cpu": rate / torch_rate if torch_rate else None,
                      "ratio_step_walk": rate / options.peer,
                      "ratio_full_run": full["tokens_per_second"] / options.peer}
            Path(options.out).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


def torch_version() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return torch.__version__


def pytorch_peer(plan: dict, threads: int, steps: int):
    """A function running PyTorch's CPU step `steps` times and giving its tokens/s (each round: the median step), or
    None, said in one line, where torch is not installed."""
    if torch_version() is None:
        print("PyTorch peer: torch is not installed here (pip install torch==2.13.0); only llm.c's figure is given")
        return None
    from peer import cpu_peer_ms
    batch, context = plan["run"]["batch"], plan["model"]["context"]
    return lambda: batch * context / statistics.median(cpu_peer_ms(plan["model"], batch, learner_floats(plan), threads,
                                                                   steps)) * 1000


def machine_description() -> str:
    """The CPU model and the CPUs this process may use: what the figures were measured on."""
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "unknown CPU")
    return f"{model}, {len(os.sched_getaffinity(0))} CPUs usable"


if __name__ == "__main__":
    main()
