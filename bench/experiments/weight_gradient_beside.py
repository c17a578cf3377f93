"""Whether an input gradient run beside its weight gradient fills the SMs the weight gradient leaves idle (the cuda
device's graph runs the two side by side: coppelius/host/waits.h). Each pair of small's and gpt2's layers: the
weight gradient alone, the input gradient alone, then both on two streams started together (each order of
launch), ms a pair (CUDA events, the median of REPS); beside them the sum of the two alone and the pair's floor if
the SMs were shared perfectly (each launch's SM-time, blocks x ms, over the card's SMs). A pair near the sum means
the input gradient's persistent blocks waited for the weight gradient's SMs and then walked their fixed tiles
(docs/notes/gpu-speed.md, "Left after the thirtieth session", item 0). Run on 2026-12-04: each pair within 3-11 us
of the shared floor, far below the sum (bench/results/weight_gradient_beside-2026-12-04.txt): the SMs are shared
already.
    python bench/experiments/weight_gradient_beside.py [cubin]   (sm_90 card; the tree's kernels by default)"""
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "gpu"), str(ROOT / "bench" / "experiments")]
import test_tensor_cores_gpu as tc  # noqa: E402
import matmul_forward_ab as ab  # noqa: E402
from coppelius.formats.geometry import cluster_size, geometry, grid_blocks  # noqa: E402

REPS = 30
# (label, (N, C, OC), the input gradient's kernel): dweight [OC][C] = dout [N][OC]^T inp [N][C]; dinp [N][C] =
# dout weight (times gelu's slope for the fc projection, whose input is gelu's output)
PAIRS = [("small qkv", (16384, 384, 1152), "matmul_backward_input"),
         ("small attn proj", (16384, 384, 384), "matmul_backward_input"),
         ("small fc", (16384, 384, 1536), "matmul_backward_input"),
         ("small fc proj", (16384, 1536, 384), "matmul_backward_input_gelu"),
         ("gpt2 qkv", (32768, 768, 2304), "matmul_backward_input"),
         ("gpt2 attn proj", (32768, 768, 768), "matmul_backward_input"),
         ("gpt2 fc", (32768, 768, 3072), "matmul_backward_input"),
         ("gpt2 fc proj", (32768, 3072, 768), "matmul_backward_input_gelu")]


def timed(gpu, streams, launches) -> float:
    """Milliseconds from a start on streams[0] until every launch (launch i on streams[i]) has finished."""
    d = gpu.d
    start, done = tc._ck(d.cuEventCreate(0)), tc._ck(d.cuEventCreate(0))
    ends = [tc._ck(d.cuEventCreate(0)) for _ in launches]
    tc._ck(d.cuEventRecord(start, streams[0]))
    for stream in streams[1:len(launches)]:
        tc._ck(d.cuStreamWaitEvent(stream, start, 0))
    for go in launches:
        go()
    for end, stream in zip(ends, streams):
        tc._ck(d.cuEventRecord(end, stream))
        tc._ck(d.cuStreamWaitEvent(streams[0], end, 0))
    tc._ck(d.cuEventRecord(done, streams[0]))
    tc._ck(d.cuEventSynchronize(done))
    ms = float(tc._ck(d.cuEventElapsedTime(start, done)))
    for event in (start, done, *ends):
        d.cuEventDestroy(event)
    return ms


def median_ms(gpu, streams, launches) -> float:
    for _ in range(3):
        timed(gpu, streams, launches)
    return statistics.median(timed(gpu, streams, launches) for _ in range(REPS))


def main(cubin: str | None) -> None:
    gpu = tc.Gpu(Path(cubin).read_bytes() if cubin else None)
    sms = tc._ck(gpu.d.cuDeviceGetAttribute(gpu.d.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                            gpu.dev))
    non_blocking = gpu.d.CUstream_flags.CU_STREAM_NON_BLOCKING
    streams = [tc._ck(gpu.d.cuStreamCreate(non_blocking)) for _ in range(2)]
    print(f"{gpu.name}, {sms} SMs; ms a launch or a pair, the median of {REPS}")
    for label, (N, C, OC), input_kernel in PAIRS:
        rng = np.random.default_rng(0)
        operands = {"g": tc.h16_timing(rng, N, OC), "x": tc.h16_timing(rng, N, C), "w": tc.h16_timing(rng, OC, C)}
        wargs, _ = ab.arguments(gpu, "matmul_backward_weight", label, operands, N, C, OC)
        xargs, _ = ab.arguments(gpu, input_kernel, label, operands, N, C, OC)
        xargs["dout"] = wargs["dout"]  # one dout read by both, as in the step
        weight_on = [gpu.prepare("matmul_backward_weight", wargs, stream=s) for s in streams]
        input_on = [gpu.prepare(input_kernel, xargs, stream=s) for s in streams]
        alone_w = median_ms(gpu, streams[:1], weight_on[:1])
        alone_x = median_ms(gpu, streams[:1], input_on[:1])
        w_first = median_ms(gpu, streams, [weight_on[0], input_on[1]])
        x_first = median_ms(gpu, streams, [input_on[0], weight_on[1]])
        shape = {"N": N, "C": C, "OC": OC}
        bw = grid_blocks(geometry("matmul_backward_weight", {**shape, "accumulate": 0}, gpu.arch)[0])
        bx = grid_blocks(geometry(input_kernel, shape, gpu.arch)[0])
        floor = (alone_w * min(bw, sms) + alone_x * min(bx, sms)) / sms
        print(f"{label:>15}: weight gradient {alone_w:.4f} ({bw} blocks, clusters of "
              f"{cluster_size('matmul_backward_weight', {**shape, 'accumulate': 0}, gpu.arch)}), input gradient "
              f"{alone_x:.4f} ({bx} blocks); sum {alone_w + alone_x:.4f}; beside: weight first {w_first:.4f}, "
              f"input first {x_first:.4f}; shared perfectly {floor:.4f}", flush=True)
        gpu.free_all()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
