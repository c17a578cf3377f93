"""Programmatic dependent launch, measured before it is built: tiny's and small's training run by the Python host
three ways on one card, (a) the realization as built, (b) the kernels with the PDL prologue (bench/experiments/pdl_prologue.py) and
the graphs' plain edges, (c) that cubin with programmatic edges between consecutive kernel nodes. Losses must be
bitwise equal in all three; the update piece's graph replay timed in each (median of 50).
    python bench/experiments/pdl_probe.py PROLOGUE.cubin [models]   (from a checkout of main: this branch marks the
    launches itself)"""
import statistics, sys, tempfile
from pathlib import Path
sys.path[:0] = ["bench", "tests/gpu", "tests", "."]
from train_gpu import BATCH, build_h200, step_ms
from cuda_harness import CudaDevice, check, driver
from coppelius.formats import tables
from reference_host.interpreter import Program, Run


class PdlDevice(CudaDevice):
    def __init__(self, cubin: bytes | None, programmatic: bool):
        super().__init__()
        self.cubin, self.programmatic, self.kernel_nodes_seen, self.programmatic_edges = cubin, programmatic, set(), 0

    def load_program(self, image, *rest):
        return super().load_program(self.cubin or image, *rest)

    def _nodes(self, graph, previous, c):
        chain = self.programmatic and int(c["op"]) == tables.OPS["launch"] and previous and \
            int(previous[0]) in self.kernel_nodes_seen
        out = super()._nodes(graph, [] if chain else previous, c)
        if chain:
            edge = driver.CUgraphEdgeData()
            edge.type = driver.CUgraphDependencyType.CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC
            edge.from_port = driver.CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC
            check(driver.cuGraphAddDependencies(graph, [previous[0]], [out[0][0]], [edge], 1),
                  "cuGraphAddDependencies(programmatic)")
            self.programmatic_edges += 1
        for node, launch, _ in out:
            if launch is not None:
                self.kernel_nodes_seen.add(int(node))
        return out


def replay_ms(device, plan, reps=50):
    piece = plan["ring"].index("update")
    ring_index = next(i for i, e in enumerate(device.ring) if int(e["piece"]) == piece)
    start, end = check(driver.cuEventCreate(0), "ev"), check(driver.cuEventCreate(0), "ev")
    times = []
    for _ in range(reps + 3):
        check(driver.cuEventRecord(start, device.stream), "rec")
        device.issue(ring_index)
        check(driver.cuEventRecord(end, device.stream), "rec")
        device.synchronize()
        times.append(check(driver.cuEventElapsedTime(start, end), "elapsed"))
    return statistics.median(times[3:])


import json
pdl = Path(sys.argv[1]).read_bytes()
models = sys.argv[2].split(",") if len(sys.argv) > 2 else ["tiny", "small"]
for model in models:
    work = Path(tempfile.mkdtemp())
    paths = build_h200(model, BATCH[model], 30, work)
    plan = json.loads(Path(paths["plan"]).read_text())
    program = Program(paths["elf"])
    losses, line = None, []
    for name, cubin, programmatic in (("built", None, False), ("pdl-cubin", pdl, False), ("pdl-edges", pdl, True)):
        device = PdlDevice(cubin, programmatic)
        try:
            record = Run(program, device, paths["checkpoint"], paths["train"], work / f"{model}-{name}", "train",
                         validation_path=paths["val"]).execute()
            ms = replay_ms(device, plan)
        finally:
            device.close()
        got = [s["loss"] for s in record["steps"]]
        losses = got if losses is None else losses
        line.append(f"{name}: update graph {ms:.4f} ms, step {step_ms(record):.4f} ms (python host), "
                    f"programmatic edges {device.programmatic_edges}, losses {'equal' if got == losses else 'DIFFER'}")
    print(f"{model}:\n  " + "\n  ".join(line), flush=True)
