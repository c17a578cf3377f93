"""The GPU host ELF (the card's target) against PyTorch: tests/cpu/test_pytorch_reference_run.py's twelve steps
from the same weights on the same stream, on the card (its fp16 tensor-core kernels sum in other orders than the cpu
target's C kernels; the same bound, 5e-4 of PyTorch's loss, relative)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cpu"))
from test_pytorch_reference_run import follow_pytorch  # noqa: E402

pytestmark = pytest.mark.gpu
pytest.importorskip("ziglang", reason="the elf stage needs the pinned ziglang wheel (pip install -e .)")


def test_a_native_gpu_run_follows_pytorchs_losses_step_by_step(tmp_path, gpu_target):
    follow_pytorch(tmp_path, gpu_target)
