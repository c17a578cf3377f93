"""The host's share of a training step: the Python reference host walks the host ELF with its device calls timed
(stream synchronizations, the AdamW step-size patch into the graphs, the graph launches), as built and with the
step-size patch skipped after the first step. Diagnostic only: the losses of the second variant are not the run's.

    python bench/host_calls.py MODEL BATCH        (on a CUDA machine; e.g. gpt2-124m 32)

H200, 2026-12-01, gpt2-124m b32: step 64.40 / 64.78 ms as built, 64.02 without the patch; per step the patch took
0.05 ms, the graph launch 0.3 ms, the rest was waiting for the GPU (the update piece replays in 63.7-64.6 ms).
"""
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "bench", ROOT / "tests" / "gpu", ROOT / "tests"):
    sys.path.insert(0, str(p))
import yaml  # noqa: E402
from coppelius.config import ROOT as CROOT, resolve  # noqa: E402
from coppelius.stages import build_chain  # noqa: E402
from reference_host.interpreter import Program, Run  # noqa: E402
from cuda_harness import CudaDevice, check_card  # noqa: E402

model, batch, steps = sys.argv[1], int(sys.argv[2]), 20
work = Path(tempfile.mkdtemp())
corpus = work / "corpus.txt"
text = b"".join(p.read_bytes() for p in sorted((CROOT / "coppelius").rglob("*.py")))
corpus.write_bytes(text * (1 + 40_000_000 // len(text)))
raw = yaml.safe_load((CROOT / "config" / "config.yaml").read_text())
config = resolve(raw | {"target": "h200", "model": model, "batch": batch, "steps": steps, "interval": steps,
                        "corpus": str(corpus), "keep": 1})
os.chdir(work)
paths = build_chain(config, work / model)
for variant in ("as built", "no patch after the first", "as built"):
    program = Program(paths["elf"])
    device = CudaDevice()
    check_card(program.identity, device.describe())
    spent = {"sync": 0.0, "patch": 0.0, "issue": 0.0}
    def timed(name, f):
        def g(*a, **k):
            t = time.perf_counter(); r = f(*a, **k); spent[name] += time.perf_counter() - t; return r
        return g
    device.synchronize = timed("sync", device.synchronize)
    patch = device.patch_step_size
    if variant.startswith("no patch"):
        calls = [0]
        def once(word):
            calls[0] += 1
            if calls[0] == 1: patch(word)
        device.patch_step_size = timed("patch", once)
    else:
        device.patch_step_size = timed("patch", patch)
    device.issue = timed("issue", device.issue)
    try:
        record = Run(program, device, paths["checkpoint"], paths["train"], work / f"run-{time.time()}", "train",
                     validation_path=paths["val"]).execute()
    finally:
        device.close()
    times = [s["time"] for s in record["steps"]]
    d = sorted(b - a for a, b in zip(times[3:], times[4:]))
    print(f"{variant}: step {1000 * d[len(d) // 2]:.3f} ms median; per step: " +
          ", ".join(f"{k} {1000 * v / steps:.3f} ms" for k, v in spent.items()))
