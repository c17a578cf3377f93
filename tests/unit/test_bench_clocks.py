"""bench/clocks.py: nvidia-smi's samples summarized (its csv as the driver prints it), and a watch that goes on
without nvidia-smi."""
import shutil
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import clocks  # noqa: E402

# `nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader,nounits`, one line a
# sample: an H200 ramping up under load, one sample the driver could not read, a last line cut off by terminate()
SAMPLES = """345, 3201, 121.47, 34
1980, 3201, 498.02, 41
1755, 3201, 699.81, 47
[N/A], 3201, 690.10, 47
1830, 3201, 700.23, 48
1830, 32"""


def test_the_samples_are_summarized_field_by_field_and_unreadable_lines_skipped():
    s = clocks.summarize(SAMPLES)
    assert s["samples"] == 4
    assert s["sm_mhz"] == {"min": 345.0, "median": 1792.5, "max": 1980.0}
    assert s["mem_mhz"] == {"min": 3201.0, "median": 3201.0, "max": 3201.0}
    assert s["power_w"]["max"] == 700.23 and s["temp_c"]["min"] == 34.0
    assert clocks.line(s) == "SM 1792 MHz (345-1980), power 599 W (121-700), 4 samples"
    assert clocks.summarize("") is None and clocks.summarize("[N/A], [N/A], [N/A], [N/A]\n") is None
    assert clocks.line(None) == "clocks: not sampled (no nvidia-smi)"


def test_a_watch_without_nvidia_smi_leaves_no_summary_and_the_run_goes_on():
    if shutil.which("nvidia-smi"):
        pytest.skip("nvidia-smi is here: bench/train_gpu.py records its real samples on this machine")
    with clocks.ClockWatch(interval_ms=10) as watch:
        time.sleep(0.05)
    assert watch.process is None and watch.summary is None
