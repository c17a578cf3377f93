"""bench/profile_gpu.py without a GPU: the work each launch is charged with, the per-kernel sums and
the markdown table (the timing itself runs on the device: bench/train_gpu.py --profile)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
profile_gpu = pytest.importorskip("profile_gpu")  # needs cuda-bindings (a project dependency)


def test_matmul_and_attention_are_charged_their_flops_and_every_kernel_its_bytes():
    s = {"N": 32768, "C": 768, "OC": 768}
    flops, moved = profile_gpu.work_of("matmul_forward", s, {"out": 1, "inp": 1, "weight": 1, "bias": 1})
    assert flops == 2 * 32768 * 768 * 768
    assert moved == 2 * (32768 * 768 + 32768 * 768 + 768 * 768 + 768)
    # a null bias moves nothing; an accumulated weight gradient is read and written
    _, without_bias = profile_gpu.work_of("matmul_forward", s, {"out": 1, "inp": 1, "weight": 1, "bias": 0})
    assert moved - without_bias == 2 * 768
    _, written = profile_gpu.work_of("matmul_backward_weight", s | {"accumulate": 0},
                                     {"dweight": 1, "dbias": 0, "dout": 1, "inp": 1})
    _, accumulated = profile_gpu.work_of("matmul_backward_weight", s | {"accumulate": 1},
                                         {"dweight": 1, "dbias": 0, "dout": 1, "inp": 1})
    assert accumulated - written == 2 * 768 * 768
    a = {"B": 32, "T": 1024, "C": 768, "NH": 12}
    forward, _ = profile_gpu.work_of("attention_forward", a, {"out": 1, "lse": 1, "qkv": 1})
    backward, _ = profile_gpu.work_of("attention_backward", a, {"dqkv": 1, "dout": 1, "qkv": 1, "out": 1, "lse": 1})
    assert forward == 4 * 32 * 12 * 1024 * 1024 * 64 / 2 and backward == 2.5 * forward
    flops, moved = profile_gpu.work_of("gelu_forward", {"N": 1000}, {"out": 1, "inp": 1})
    assert flops == 0 and moved == 4000


def test_the_tables_sum_per_kernel_largest_first():
    rows = [{"kernel": "matmul_forward", "shape": {"N": 8}, "flops": 2e9, "bytes": 1e6, "ms": 2.0,
             "grid": [4, 1, 1], "block": [256, 1, 1]},
            {"kernel": "memset", "shape": {"bytes": 4}, "flops": 0.0, "bytes": 4.0, "ms": 0.5},
            {"kernel": "matmul_forward", "shape": {"N": 8}, "flops": 2e9, "bytes": 1e6, "ms": 1.5,
             "grid": [4, 1, 1], "block": [256, 1, 1]}]
    total = sum(r["ms"] for r in rows)
    for r in rows:
        r |= {"share": r["ms"] / total, "tflops": r["flops"] / r["ms"] / 1e9 or None,
              "gbps": r["bytes"] / r["ms"] / 1e6}
    profile = {"commands": rows, "sum_ms": total, "graph_ms": 3.9, "reps": 5, "starved_reps": 0}
    groups = profile_gpu.by_kernel(profile)
    assert [(g["kernel"], g["launches"], g["ms"]) for g in groups] == [("matmul_forward", 2, 3.5), ("memset", 1, 0.5)]
    assert groups[0]["share"] == 3.5 / 4.0
    table = profile_gpu.markdown("tiny", 8, profile, "a card", "2026-11-30")
    assert "| matmul_forward | 2 | 3.500 | 87.5% | 1 | 1 |" in table
    assert table.count("| matmul_forward | N=8 | [4, 1, 1] x 256 |") == 2 and "| memset | bytes=4 |  |" in table
