"""Coppelius against PyTorch on the same GPU, model, precision and batch, in one run.

    python bench/train_gpu.py [--models tiny,small,gpt2-124m] [--steps 30] [--out bench/results] [--profile REPS]
                              [--steps-per-launch 1,2]

For each model: Coppelius's ms/step (the native host ELF run as a program, each piece a CUDA graph;
beside it the same host ELF walked by the Python reference host, to show the host's cost), the peer's eager,
torch.compile and whole-step-graph ms/step, the ratios, and the two
floors (model FLOPs over the measured fp16 matmul rate; the fewest bytes a step must move over
the measured copy bandwidth). Writes one JSON with device and date, and the card's clocks and power over each
timed run (bench/clocks.py: nvidia-smi beside it). With --profile, also each
model's update piece timed command by command (bench/profile_gpu.py) on the same loaded device,
written as profile-MODEL-DATE.md beside the JSON and into it. With --steps-per-launch K1,K2,..., Coppelius runs once
for each (the config key: steps an update submission holds), the first giving the ratios; the others are reported
beside it with whether their losses are the same bits.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
from fractions import Fraction
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "gpu"))  # the Python CUDA device: a test harness
sys.path.insert(0, str(ROOT / "tests"))  # the Python reference host

from clocks import ClockWatch, line as clock_line  # noqa: E402 (bench/ is on the path above)

BATCH = {"tiny": 8, "small": 64, "gpt2-124m": 32}


def step_ms(record: dict, per_launch: int = 1) -> float:
    """The median time a step between submissions (a submission's steps are recorded together), after three warm-up
    submissions."""
    times = [s["time"] for s in record["steps"]][per_launch - 1::per_launch]
    deltas = sorted(b - a for a, b in zip(times[3:], times[4:]))
    return 1000 * deltas[len(deltas) // 2] / per_launch


def steps_refusal(steps: int, per_launch: int) -> str | None:
    """Why a run of `steps` steps at `per_launch` steps a launch cannot be timed (step_ms takes a median over the
    submissions after three warm-up ones), or None."""
    if steps % per_launch == 0 and steps // per_launch >= 5:
        return None
    return (f"--steps {steps} with --steps-per-launch {per_launch}: the steps must be a multiple of {per_launch} and "
            f"give at least 5 submissions; use --steps {max(5 * per_launch, steps + -steps % per_launch)}")


def write_corpus(path: Path) -> None:
    """The bench's corpus: this tree's own Python sources, repeated to ~40 MB."""
    text = b"".join(p.read_bytes() for p in sorted((ROOT / "coppelius").rglob("*.py")))
    path.write_bytes(text * (1 + 40_000_000 // len(text)))


def build_gpu(model: str, batch: int, steps: int, work: Path, per_launch: int = 1) -> dict:
    """The workflow's artifacts (stages.build_chain's paths) of a run of `steps` steps for the target whose card is
    present (h200, h100) on a corpus of the project's own Python sources; the working directory becomes `work`."""
    from coppelius.config import ROOT as CROOT, resolve
    from coppelius.stages import build_chain
    from cuda_probe import card_target, cuda_card_name
    target = card_target()
    if target is None:
        raise SystemExit(f"train_gpu: no profile in config/targets/ names this card ({cuda_card_name()}); add one")
    # BENCH_CORPUS: one corpus for runs of two trees (step_ab.sh); the default is this tree's own sources, which a
    # change to a .py file changes, and the losses with them
    corpus = Path(os.environ.get("BENCH_CORPUS", work / "corpus.txt"))
    if not corpus.exists():
        write_corpus(corpus)
    raw = yaml.safe_load((CROOT / "config" / "config.yaml").read_text())
    config = resolve(raw | {"target": target, "model": model, "batch": batch, "steps": steps, "interval": steps,
                            "corpus": str(corpus), "keep": 1, "steps_per_launch": per_launch})
    os.chdir(work)
    return build_chain(config, work / (model if per_launch == 1 else f"{model}-k{per_launch}"))


def run_native(paths: dict, out: Path, env: dict | None = None) -> None:
    """The chain's host ELF trained as a program, into `out`, in a clean environment (the driver only) plus `env`."""
    subprocess.run([paths["elf"], "--checkpoint", paths["checkpoint"], "--tokens", paths["train"], "--validation",
                    paths["val"], "--out", str(out)], check=True, env=env or {})


def coppelius_ms(model: str, batch: int, steps: int, work: Path, profile_reps: int = 0,
                 per_launch: int = 1) -> tuple[float, float, dict]:
    """(native host ms/step, Python host ms/step, details) of the same host ELF."""
    from coppelius.formats import result
    from reference_host.interpreter import Program, Run
    from cuda_harness import CudaDevice, check_card
    paths = build_gpu(model, batch, steps, work, per_launch)
    native_out = work / f"{model}-k{per_launch}-native"
    with ClockWatch() as watch:
        run_native(paths, native_out)
    native = result.read(native_out / "result.json")
    program = Program(paths["elf"])
    device = CudaDevice()
    check_card(program.identity, device.describe())
    plan = json.loads(Path(paths["plan"]).read_text())
    profile = None
    try:
        record = Run(program, device, paths["checkpoint"], paths["train"], work / f"{model}-k{per_launch}-run", "train",
                     validation_path=paths["val"]).execute()
        if profile_reps:
            from profile_gpu import profile_update
            profile = profile_update(device, plan, device.describe()["arch"], profile_reps)
    finally:
        device.close()
    same = [s["loss"] for s in native["steps"]] == [s["loss"] for s in record["steps"]]
    # a scoring forward's time (validation: the forward and restore pieces and the host's loss), not the step's
    scored = len(native["validation"]["points"]) * plan["run"]["eval_contexts"]
    validation = 1000 * native["validation"]["seconds"] / scored if scored else None
    details = {"plan": plan, "losses": [s["loss"] for s in native["steps"]], "profile": profile,
               "hosts_agree_bitwise": same, "clocks": watch.summary, "validation_ms_a_context": validation}
    return step_ms(native, per_launch), step_ms(record, per_launch), details


def floors(plan: dict, ceilings: dict) -> dict:
    """FLOPs over the matmul rate; bytes over bandwidth (each step plane written once and read once,
    AdamW's state read and written once: params, m, v in fp32 read+write, grads and halves fp16)."""
    tokens = plan["run"]["tokens_per_step"]
    flops = plan["model"]["flops_per_token"] * tokens
    P = plan["model"]["parameters"]
    step_bytes = sum(p["bytes"] for p in plan["arena"]["planes"] if p["lifetime"] == "step")
    moved = 2 * step_bytes + P * (3 * 8 + 2 + 2)
    return {"flops": flops, "bytes": moved, "flops_ms": flops / (ceilings["matmul_tflops"] * 1e12) * 1e3,
            "bytes_ms": moved / (ceilings["copy_tbps"] * 1e12) * 1e3}


def main():
    import torch
    from peer import ceilings as measure_ceilings, peer_ms
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="tiny,small,gpt2-124m")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    parser.add_argument("--peer-modes", default="eager,compile,graph",
                        help="comma-separated; empty: no peer")
    parser.add_argument("--steps-per-launch", default="1", help="comma-separated; the first gives the ratios")
    parser.add_argument("--profile", type=int, default=0, metavar="REPS",
                        help="also time the update piece command by command, median of REPS replays")
    args = parser.parse_args()
    from coppelius.formats.program import MAX_STEPS_PER_LAUNCH
    asked = args.steps_per_launch.split(",")
    launches = [int(k) for k in asked if k.isdigit() and 1 <= int(k) <= MAX_STEPS_PER_LAUNCH]
    if len(launches) != len(asked):
        parser.error(f"--steps-per-launch {args.steps_per_launch}: give whole numbers from 1 to "
                     f"{MAX_STEPS_PER_LAUNCH}, comma-separated")
    for k in launches:
        if refusal := steps_refusal(args.steps, k):
            parser.error(refusal)
    ceilings = measure_ceilings()
    print(f"ceilings: fp16 matmul {ceilings['matmul_tflops']:.0f} TFLOP/s, "
          f"copy {ceilings['copy_tbps']:.2f} TB/s", flush=True)
    report = {"device": torch.cuda.get_device_name(), "date": datetime.date.today().isoformat(),
              "torch": torch.__version__, "ceilings": ceilings, "models": {}}
    work = Path(tempfile.mkdtemp(prefix="coppelius-bench-"))
    for model in args.models.split(","):
        batch = BATCH[model]
        first, *others = launches
        ours, python_host, info = coppelius_ms(model, batch, args.steps, work, args.profile, first)
        plan = info["plan"]
        per_launch = {first: {"coppelius_ms": ours, "python_host_ms": python_host, "same_losses": True}}
        for k in others:
            ms, host_ms, more = coppelius_ms(model, batch, args.steps, work, 0, k)
            per_launch[k] = {"coppelius_ms": ms, "python_host_ms": host_ms,
                             "same_losses": more["losses"] == info["losses"]}
            print(f"{model}: steps_per_launch {k}: {ms:.3f} ms a step (python host {host_ms:.3f}), against "
                  f"{ours:.3f} at {first}; losses {'the same bits' if per_launch[k]['same_losses'] else 'DIFFER'}",
                  flush=True)
        learner = {k: float(Fraction(v)) for k, v in plan["learner"].items()}
        peers, clocks = {}, {"coppelius": info["clocks"]}
        print(f"{model}: coppelius (native host, whole run) {clock_line(info['clocks'])}", flush=True)
        for mode in filter(None, args.peer_modes.split(",")):
            try:
                with ClockWatch() as watch:
                    peers[mode] = peer_ms(plan["model"], batch, learner, mode, args.steps)
                clocks[mode] = watch.summary
                print(f"{model}: peer {mode} {clock_line(watch.summary)}", flush=True)
            except Exception as error:  # a peer mode that cannot run here is reported, not fatal
                peers[mode] = None
                print(f"{model}: peer {mode} failed: {type(error).__name__}: {error}", flush=True)
        floor = floors(plan, ceilings)
        entry = {"batch": batch, "context": plan["model"]["context"], "coppelius_ms": ours,
                 "python_host_ms": python_host, "hosts_agree_bitwise": info["hosts_agree_bitwise"],
                 "steps_per_launch": {str(k): v for k, v in per_launch.items()},
                 "peer_ms": peers, "floor": floor,
                 "ratio_peer_over_coppelius": {m: (v / ours if v else None) for m, v in peers.items()},
                 "over_floor": ours / max(floor["flops_ms"], floor["bytes_ms"]),
                 "losses_first_last": [info["losses"][0], info["losses"][-1]], "clocks": clocks,
                 "validation_ms_a_context": info["validation_ms_a_context"]}
        if info["profile"]:
            from profile_gpu import by_kernel, markdown
            entry["profile"] = info["profile"] | {"by_kernel": by_kernel(info["profile"])}
            out = Path(args.out)
            out.mkdir(parents=True, exist_ok=True)
            (out / f"profile-{model}-{report['date']}.md").write_text(
                markdown(model, batch, info["profile"], report["device"], report["date"]))
            for g in entry["profile"]["by_kernel"][:8]:
                print(f"  {g['kernel']:>24} {g['launches']:4d} launches {g['ms']:9.3f} ms {100 * g['share']:5.1f}%")
        report["models"][model] = entry
        print(f"{model:>10} batch {batch:>3}: coppelius {ours:8.3f} ms (python host {python_host:.3f}) | " +
              " | ".join(f"{m} {v:8.3f} ms ({v / ours:5.2f}x)" if v else f"{m} n/a" for m, v in peers.items()) +
              f" | floor {max(floor['flops_ms'], floor['bytes_ms']):.3f} ms "
              f"({entry['over_floor']:.1f}x above)", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"train_gpu-{report['date']}.json"
    path.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
