"""Which launches should start programmatically (formats/geometry.py `programmatic`), measured: each model's training
run by the Python host on one card with the update piece's graph built under several rules for its programmatic
edges: `plan` (the flags the plan sets), `none` (plain edges everywhere), `all` (every launch after a launch) and
`both<=N` (both grids at most N blocks). Losses must be bitwise equal under every rule (a kernel waits for its
predecessor either way); the update graph's replay is timed under each (median of 80).
    python bench/experiments/pdl_rules.py tiny,small [rule,...]     (on an sm_90 card, from the repository root)"""
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tests" / "gpu"), str(ROOT / "tests")]
from train_gpu import BATCH, build_gpu  # noqa: E402
from cuda_harness import CudaDevice, check, driver  # noqa: E402
from coppelius.formats import tables  # noqa: E402
from coppelius.formats.geometry import programmatic_launches  # noqa: E402
from profile_gpu import elapsed  # noqa: E402
from reference_host.interpreter import Program, Run  # noqa: E402

DEFAULT_RULES = ["plan", "none", "all", "both<=264", "both<=528", "both<=1056", "plan"]


def programmatic_flags(rule: str, launches, rows, ring):
    """The command rows' flags under `rule` (not `plan`): geometry's walk with the rule's limit on both grids' blocks
    (a card of one SM, so that blocks an SM are blocks)."""
    limit = {"none": -1, "all": 1 << 62}.get(rule) or int(rule.removeprefix("both<="))
    flags = rows["flags"] * 0
    for j, _, _, programmatic in programmatic_launches(rows, launches, ring, "sm_90", 1, blocks_per_sm=limit):
        flags[j] = tables.COMMAND_PROGRAMMATIC if programmatic else 0
    return flags


class RuleDevice(CudaDevice):
    """The CUDA device with the command rows' programmatic flags set by a rule before its graphs are built."""

    def __init__(self, rule: str):
        super().__init__()
        self.rule = rule

    def load_program(self, image, launches, relocations, commands, ring, *rest):
        if self.rule != "plan":
            rows = tables.unpack("commands", commands)[0].copy()
            rows["flags"] = programmatic_flags(self.rule, tables.unpack("launches", launches)[0], rows,
                                               tables.unpack("ring", ring)[0])
            commands = tables.pack("commands", rows)
        return super().load_program(image, launches, relocations, commands, ring, *rest)


def update_replay_ms(device, plan: dict, reps: int = 80) -> float:
    ring_index = next(i for i, e in enumerate(device.ring) if int(e["piece"]) == plan["ring"].index("update"))
    start, end = check(driver.cuEventCreate(0), "cuEventCreate"), check(driver.cuEventCreate(0), "cuEventCreate")
    times = []
    for _ in range(reps + 5):
        check(driver.cuEventRecord(start, device.stream), "cuEventRecord")
        device.issue(ring_index)
        check(driver.cuEventRecord(end, device.stream), "cuEventRecord")
        device.synchronize()
        times.append(elapsed(start, end))
    return statistics.median(times[5:])


def main():
    models = sys.argv[1].split(",")
    rules = sys.argv[2].split(",") if len(sys.argv) > 2 else DEFAULT_RULES
    for model in models:
        work = Path(tempfile.mkdtemp())
        paths = build_gpu(model, BATCH[model], 30, work)
        plan = json.loads(Path(paths["plan"]).read_text())
        program, losses = Program(paths["elf"]), None
        for k, rule in enumerate(rules):
            device = RuleDevice(rule)
            try:
                record = Run(program, device, paths["checkpoint"], paths["train"], work / f"run-{k}", "train",
                             validation_path=paths["val"]).execute()
                edges, ms = int((device.commands["flags"] != 0).sum()), update_replay_ms(device, plan)
            finally:
                device.close()
            got = [s["loss"] for s in record["steps"]]
            losses = got if losses is None else losses
            print(f"{model:9s} {rule:11s} update graph {ms:.4f} ms, {edges:4d} programmatic launches, losses "
                  f"{'equal' if got == losses else 'DIFFER'}", flush=True)


if __name__ == "__main__":
    main()
