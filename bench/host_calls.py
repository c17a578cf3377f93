"""The host's share of a training step: the Python reference host walks the host ELF with its device calls timed
(stream synchronizations, the AdamW step-size patch into the graphs, the graph launches), as built and with the
step-size patch skipped after the first step. Diagnostic only: the losses of the second variant are not the run's.

    python bench/host_calls.py MODEL BATCH        (on a CUDA machine; e.g. gpt2-124m 32)

H200, 2026-12-01, gpt2-124m b32: step 64.40 / 64.78 ms as built, 64.02 without the patch; per step the patch took
0.05 ms, the graph launch 0.3 ms, the rest was waiting for the GPU (the update piece replays in 63.7-64.6 ms).
"""
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "bench", ROOT / "tests" / "gpu", ROOT / "tests"):
    sys.path.insert(0, str(p))
from reference_host.interpreter import Program, Run  # noqa: E402
from cuda_harness import CudaDevice, check_card  # noqa: E402
from train_gpu import build_gpu, step_ms  # noqa: E402

STEPS = 20


def timed(spent: dict, name: str, call):
    """call, with the seconds it takes added to spent[name]."""
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - start
    return wrapper


def first_only(call):
    """call, made once; later calls do nothing (the step size stays the first step's)."""
    made = []

    def wrapper(*args):
        if not made:
            made.append(call(*args))
    return wrapper


def main(model: str, batch: int) -> None:
    work = Path(tempfile.mkdtemp())
    paths = build_gpu(model, batch, STEPS, work)
    for variant in ("as built", "no patch after the first", "as built"):
        program = Program(paths["elf"])
        device = CudaDevice()
        check_card(program.identity, device.describe())
        spent = {"sync": 0.0, "patch": 0.0, "issue": 0.0}
        patch = first_only(device.patch_step_size) if variant.startswith("no patch") else device.patch_step_size
        device.synchronize = timed(spent, "sync", device.synchronize)
        device.patch_step_size = timed(spent, "patch", patch)
        device.issue = timed(spent, "issue", device.issue)
        try:
            record = Run(program, device, paths["checkpoint"], paths["train"], work / f"run-{time.time()}", "train",
                         validation_path=paths["val"]).execute()
        finally:
            device.close()
        print(f"{variant}: step {step_ms(record):.3f} ms median; per step: "
              + ", ".join(f"{k} {1000 * v / STEPS:.3f} ms" for k, v in spent.items()))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
