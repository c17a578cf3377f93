"""bench/timeline.py's reading of a CUPTI kernel trace: steps found by their first and last kernels, the time at each
concurrency, the idle gaps, a kernel's time alone and its share, on a trace written here in the injection library's CSV format."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import timeline  # noqa: E402

HEADER = "name,start_ns,end_ns,grid,block,dynamic_shared,cluster,graph_node,stream\n"


def step_rows(t0: int) -> list[str]:
    """One step of 100 us: encoder_forward 0-10, a weight gradient 10-50 beside an input gradient 20-40, idle 50-60,
    adamw 60-90, idle to 100 (microseconds from t0); the host's wait returns at 92, the next launch runs 95-98."""
    spans = [("encoder_forward", 0, 10), ("matmul_backward_weight", 10, 50), ("matmul_backward_input", 20, 40),
             ("adamw", 60, 90)]
    calls = [("api:cuStreamSynchronize", 30, 92), ("api:cuGraphLaunch", 95, 98)]
    return ([f"{name},{t0 + a * 1000},{t0 + b * 1000},1x1x1,128,0,1,0,7\n" for name, a, b in spans] +
            [f"{name},{t0 + a * 1000},{t0 + b * 1000},,,,,,\n" for name, a, b in calls])


def write_trace(tmp_path: Path, count: int) -> Path:
    path = tmp_path / "trace.csv"
    lines = [HEADER] + [line for i in range(count) for line in step_rows(i * 100_000)]
    lines.append(f"encoder_forward,{count * 100_000},{count * 100_000 + 5000},1x1x1,128,0,1,0,7\n")  # an eval's start
    path.write_text("".join(lines))
    return path


def test_steps_leave_out_the_warm_up_and_the_last_unbounded_step(tmp_path):
    found = timeline.steps(timeline.read(write_trace(tmp_path, 6))[0])
    assert [(a, b) for a, b, _ in found] == [(i * 100_000, (i + 1) * 100_000) for i in range(3, 6)]
    assert all(len(kernels) == 4 for _, _, kernels in found)


def test_concurrency_gaps_and_time_alone_of_a_step(tmp_path):
    start, end, kernels = timeline.steps(timeline.read(write_trace(tmp_path, 5))[0])[0]
    spans = timeline.concurrency(start, end, kernels)
    assert spans == {0: 20_000, 1: 60_000, 2: 20_000}
    assert timeline.gaps(start, end, kernels) == [(10_000, "matmul_backward_weight", "adamw"),
                                                 (10_000, "adamw", "(next step)")]
    weight = next(k for k in kernels if k["name"] == "matmul_backward_weight")
    assert timeline.alone(weight, kernels) == 20_000
    charged = timeline.shares(start, end, kernels)  # 20 us of the weight gradient's 40 beside the input gradient
    assert charged == {"encoder_forward": 10_000, "matmul_backward_weight": 30_000, "matmul_backward_input": 10_000,
                       "adamw": 30_000}
    assert sum(charged.values()) == end - start - spans[0]


def test_summary_and_its_markdown(tmp_path):
    kernels, calls = timeline.read(write_trace(tmp_path, 6))
    assert len(calls) == 12 and not any(k["name"].startswith("api:") for k in kernels)
    s = timeline.summary(timeline.steps(kernels), calls)
    assert s["steps"] == 3 and s["period_us"] == 100
    assert s["concurrency_us"] == {0: 20, 1: 60, 2: 20}
    weight = next(e for e in s["kernels"] if e["kernel"] == "matmul_backward_weight")
    assert (weight["launches"], weight["us"], weight["alone_us"], weight["share_us"]) == (1, 40, 20, 30)
    assert s["gaps"][0] == (10, "matmul_backward_weight", "adamw")
    text = timeline.markdown("small", s, "NVIDIA H100 80GB HBM3", "2026-12-05")
    assert "| matmul_backward_weight | 1 | 40.0 | 20.0 | 30.0 |" in text
    assert "0 kernels running 20.0 us, 1 kernels running 60.0 us, 2 kernels running 20.0 us" in text
    assert s["boundary_us"] == {"wake": 2, "host": 3, "launch": 3, "first_kernel": 2}
    assert "the wait returns 2.0 after the last kernel ends; the host works 3.0" in text


def test_the_boundary_names_the_copies_between_two_steps(tmp_path):
    """The next graph's context h2d and flag memset, recorded between a step's adamw (ending at 90 us) and the next
    step's encoder_forward (at 100): where they start and end against the two kernels; copies inside a step are not
    the boundary's."""
    path = write_trace(tmp_path, 6)
    extra = []
    for i in range(6):
        t0 = i * 100_000
        extra += [f"copy:HtoD:2052,{t0 + 93_000},{t0 + 96_000},,,,,3,7\n",
                  f"memset:4,{t0 + 96_500},{t0 + 97_000},,,,,4,7\n",
                  f"copy:DtoH:2052,{t0 + 30_000},{t0 + 31_000},,,,,5,7\n"]
    path.write_text(path.read_text() + "".join(extra))
    kernels, others = timeline.read(path)
    assert len(others) == 12 + 18 and all(k["grid"] for k in kernels)
    s = timeline.summary(timeline.steps(kernels), others)
    assert s["concurrency_us"] == {0: 20, 1: 60, 2: 20}  # copies are not kernels
    assert s["boundary_us"] == {"wake": 2, "host": 3, "launch": 3, "first_kernel": 2, "copies_start": 3, "copies": 4,
                                "after_copies": 3}
    assert "start 3.0 after the last kernel and span 4.0; the first kernel starts 3.0 after" in \
        timeline.markdown("tiny", s, "NVIDIA H100 80GB HBM3", "2026-12-05")
