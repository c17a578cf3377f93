"""Per-kernel profile of the update piece (one training step) on the CUDA device.

`bench/train_gpu.py --profile` calls `profile_update` after its timed run, on the same loaded
device: every command of the update piece (its kernels, memsets and copies, in the plan's order
and with the plan's own parameter blocks and geometry) is issued one by one with a CUDA event
between each two, so each command's time is the gap between its two events. A spin kernel issued
first holds the GPU until the host has issued the whole piece, so no command waits for the host.
`reps` replays, the median per command; the piece chained in command order as one graph is timed too
(the native host's graph runs commands that share no written byte side by side, so its step can be
shorter). Rates: matmuls and attention in TFLOP/s (causal attention: 2 B NH T^2 hs forward, 2.5x that
backward), every command in GB/s of the bytes its parameters cover (plan/kernels.py: extents, a
read-and-written parameter counted twice).
A command's time includes the GPU's gap between two launches with an event between them (a few
microseconds): for microsecond kernels (the tiny model) the per-command times are upper bounds and
their sum exceeds the graph's replay; for the others the two agree within a few percent.
"""
import ctypes
import statistics
import struct
import sys
import time
from pathlib import Path

from cuda.bindings import driver, nvrtc

from coppelius.formats import tables
from coppelius.formats.kernels import ACCESS, KERNELS, PTR_KINDS, SCALAR_KINDS, extents, param_layout
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "gpu"))  # the cuda-bindings harness
from cuda_harness import KERNEL_NAMES, check, launch_in_clusters  # noqa: E402

SPIN = (b'extern "C" __global__ void spin(long long cycles) '
        b'{ long long t = clock64(); while (clock64() - t < cycles) {} }')
ELEMENT_BYTES = {"f16*": 2, "f32*": 4, "i32*": 4}
OP_NAMES = {v: k for k, v in tables.OPS.items()}


def spin_function(arch: str):
    """A one-thread kernel that busy-waits a given number of clock cycles (compiled here by NVRTC)."""
    status, program = nvrtc.nvrtcCreateProgram(SPIN, b"spin.cu", 0, [], [])
    options = [f"--gpu-architecture={arch}".encode()]
    assert int(nvrtc.nvrtcCompileProgram(program, len(options), options)[0]) == 0, "spin kernel did not compile"
    size = nvrtc.nvrtcGetCUBINSize(program)[1]
    cubin = b" " * size
    nvrtc.nvrtcGetCUBIN(program, cubin)
    module = check(driver.cuModuleLoadData(cubin), "cuModuleLoadData(spin)")
    return module, check(driver.cuModuleGetFunction(module, b"spin"), "cuModuleGetFunction(spin)")


def launch_arguments(device, index: int) -> tuple[str, dict, dict]:
    """(kernel, scalars, pointers) of one launch, read from the device's relocated parameter blob."""
    launch = device.launches[index]
    name = KERNEL_NAMES[int(launch["kernel"])]
    layout, _ = param_layout(name)
    base = int(launch["param_offset"])
    scalars, pointers = {}, {}
    for pname, kind, offset in layout:
        if kind in PTR_KINDS:
            pointers[pname] = struct.unpack_from("<Q", device.blob, base + offset)[0]
        else:
            fmt = {"i32": "<i", "u32": "<I", "f32": "<f"}[kind]
            assert kind in SCALAR_KINDS
            scalars[pname] = struct.unpack_from(fmt, device.blob, base + offset)[0]
    return name, scalars, pointers


def work_of(name: str, scalars: dict, pointers: dict) -> tuple[float, float]:
    """(FLOPs, bytes) of one launch: FLOPs for the tensor-core kernels, bytes for every kernel."""
    s = scalars
    flops = 0.0
    if name.startswith("matmul"):
        flops = 2.0 * s["N"] * s["C"] * s["OC"]
    elif name.startswith("attention"):
        forward = 2.0 * s["B"] * s["C"] * s["T"] * s["T"]  # 2 causal matmuls: 2 * (2 B NH T^2 hs) / 2
        flops = forward if name == "attention_forward" else 2.5 * forward
    sizes = extents(name, s)
    kinds = dict(KERNELS[name])
    access = dict(ACCESS[name])
    if name == "matmul_backward_weight" and s.get("accumulate"):
        access["dweight"] = "rw"
    moved = sum(sizes[p] * ELEMENT_BYTES[kinds[p]] * len(access[p]) for p in access if pointers.get(p))
    return flops, float(moved)


def describe(device, command) -> dict:
    op = int(command["op"])
    if op == tables.OPS["launch"]:
        name, scalars, pointers = launch_arguments(device, int(command["a"]))
        flops, moved = work_of(name, scalars, pointers)
        launch = device.launches[int(command["a"])]
        return {"kernel": name, "shape": scalars, "flops": flops, "bytes": moved,
                "grid": [int(g) for g in launch["grid"]], "block": [int(b) for b in launch["block"]]}
    return {"kernel": OP_NAMES[op], "shape": {"bytes": int(command["bytes"])}, "flops": 0.0,
            "bytes": float(command["bytes"]) * (1 if op == tables.OPS["memset"] else 2)}


def issuer(device, command):
    """A function issuing one command of the piece on the device's stream, outside any graph."""
    op, n, stream = int(command["op"]), int(command["bytes"]), device.stream
    if op == tables.OPS["launch"]:
        index = int(command["a"])
        launch = device.launches[index]
        name = KERNEL_NAMES[int(launch["kernel"])]
        layout, _ = param_layout(name)
        block = ctypes.addressof(device.blob) + int(launch["param_offset"])
        # the exact end of the last parameter: a larger buffer is refused (tensor-cores notes)
        size = ctypes.c_size_t(max(off + (8 if kind in PTR_KINDS else 4) for _, kind, off in layout))
        extra = (ctypes.c_void_p * 5)(1, block, 2, ctypes.addressof(size), 0)
        function = device.functions[int(launch["kernel"])]
        grid, threads = [int(g) for g in launch["grid"]], [int(b) for b in launch["block"]]
        shared, cluster = int(launch["shared"]), int(launch["cluster"])

        def go(keep=(size, extra)):
            if cluster > 1:
                check(launch_in_clusters(function, grid, threads, shared, stream, cluster, ctypes.addressof(keep[1])),
                      "cuLaunchKernelEx", (name, index))
            else:
                check(driver.cuLaunchKernel(function, *grid, *threads, shared, stream, None, ctypes.addressof(keep[1])),
                      "cuLaunchKernel", (name, index))
        return go
    if op == tables.OPS["memset"]:
        dst = device._device(command["dst"], command["dst_offset"])
        value = int(command["value"]) & 0xFF
        return lambda: check(driver.cuMemsetD8Async(dst, value, n, stream), "cuMemsetD8Async")
    host = op in (tables.OPS["h2d"], tables.OPS["d2h"])
    src = (device._host if op == tables.OPS["h2d"] else device._device)(command["src"], command["src_offset"])
    dst = (device._host if op == tables.OPS["d2h"] else device._device)(command["dst"], command["dst_offset"])
    if host:
        copy, call = (driver.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync") if op == tables.OPS["h2d"] else \
            (driver.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync")
        return lambda: check(copy(dst, src, n, stream), call)
    return lambda: check(driver.cuMemcpyDtoDAsync(dst, src, n, stream), "cuMemcpyDtoDAsync")


def elapsed(start, end) -> float:
    return check(driver.cuEventElapsedTime(start, end), "cuEventElapsedTime")


def profile_update(device, plan: dict, arch: str, reps: int = 5) -> dict:
    """Per-command milliseconds of the update piece (median of reps), and its graph's."""
    piece = plan["ring"].index("update")
    ring_index = next(i for i, e in enumerate(device.ring) if int(e["piece"]) == piece)
    entry = device.ring[ring_index]
    commands = device.commands[int(entry["offset"]):int(entry["offset"] + entry["length"])]
    rows = [describe(device, c) for c in commands]
    issue = [issuer(device, c) for c in commands]
    module, spin = spin_function(arch)
    events = [check(driver.cuEventCreate(0), "cuEventCreate") for _ in range(len(commands) + 2)]
    times, starved = [[] for _ in commands], 0
    cycles = int(2.0e9 * (0.002 + 60e-6 * len(commands)))  # ~60 us of host time a command, at ~2 GHz
    try:
        for _ in range(reps + 1):  # the first replay is a warm-up
            device.synchronize()
            check(driver.cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, device.stream,
                                        ((cycles,), (ctypes.c_longlong,)), 0), "cuLaunchKernel(spin)")
            check(driver.cuEventRecord(events[0], device.stream), "cuEventRecord")
            started = time.perf_counter()
            for i, go in enumerate(issue):
                check(driver.cuEventRecord(events[i + 1], device.stream), "cuEventRecord")
                go()
            check(driver.cuEventRecord(events[-1], device.stream), "cuEventRecord")
            host = time.perf_counter() - started
            device.synchronize()
            if host * 1e3 > cycles / 2.0e6:
                starved += 1  # the host issued slower than the spin waited: early commands may include host gaps
            for i in range(len(commands)):
                times[i].append(elapsed(events[i + 1], events[i + 2]))
        graph_ms = []
        for _ in range(reps + 1):
            check(driver.cuEventRecord(events[0], device.stream), "cuEventRecord")
            device.issue(ring_index)
            check(driver.cuEventRecord(events[1], device.stream), "cuEventRecord")
            device.synchronize()
            graph_ms.append(elapsed(events[0], events[1]))
    finally:
        for e in events:
            driver.cuEventDestroy(e)
        driver.cuModuleUnload(module)
    for row, t in zip(rows, times):
        row["ms"] = statistics.median(t[1:])
    total = sum(r["ms"] for r in rows)
    for row in rows:
        row["share"] = row["ms"] / total
        row["tflops"] = row["flops"] / row["ms"] / 1e9 if row["flops"] else None
        row["gbps"] = row["bytes"] / row["ms"] / 1e6 if row["ms"] > 0 else None
    return {"commands": rows, "sum_ms": total, "graph_ms": statistics.median(graph_ms[1:]), "reps": reps,
            "starved_reps": starved}


def by_kernel(profile: dict) -> list[dict]:
    """The profile summed per kernel (or command kind), largest first."""
    groups = {}
    for row in profile["commands"]:
        g = groups.setdefault(row["kernel"], {"kernel": row["kernel"], "launches": 0, "ms": 0.0, "flops": 0.0,
                                              "bytes": 0.0})
        g["launches"] += 1
        for k in ("ms", "flops", "bytes"):
            g[k] += row[k]
    out = sorted(groups.values(), key=lambda g: -g["ms"])
    for g in out:
        g["share"] = g["ms"] / profile["sum_ms"]
    return out


def markdown(model: str, batch: int, profile: dict, device_name: str, date: str) -> str:
    """The per-kernel table (grouped) and the per-launch table of one model, as markdown."""
    lines = [f"# Update-piece profile: {model}, batch {batch} ({device_name}, {date})", "",
             f"Sum of the {len(profile['commands'])} commands issued one by one: {profile['sum_ms']:.3f} ms; "
             f"the piece's commands chained in order as one CUDA graph, replayed: {profile['graph_ms']:.3f} ms "
             f"(median of {profile['reps']}; the native host's graph runs commands that share no written byte side "
             f"by side, coppelius/host/waits.h, so a step can take less; "
             f"replays where the host issued slower than the spin held the GPU: {profile['starved_reps']}).", "",
             "| kernel | launches | ms | share | TFLOP/s | GB/s |", "|---|---|---|---|---|---|"]
    for g in by_kernel(profile):
        tf = f"{g['flops'] / g['ms'] / 1e9:.0f}" if g["flops"] and g["ms"] else ""
        gb = f"{g['bytes'] / g['ms'] / 1e6:.0f}" if g["ms"] else ""
        lines.append(f"| {g['kernel']} | {g['launches']} | {g['ms']:.3f} | {100 * g['share']:.1f}% | {tf} | {gb} |")
    lines += ["", "| # | kernel | shape | grid x block | ms | share | TFLOP/s | GB/s |",
              "|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(profile["commands"]):
        shape = " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in r["shape"].items())
        geometry = f"{r['grid']} x {r['block'][0]}" if "grid" in r else ""
        tf = f"{r['tflops']:.0f}" if r["tflops"] else ""
        gb = f"{r['gbps']:.0f}" if r["gbps"] else ""
        lines.append(f"| {i} | {r['kernel']} | {shape} | {geometry} | {r['ms']:.4f} | {100 * r['share']:.2f}% "
                     f"| {tf} | {gb} |")
    return "\n".join(lines) + "\n"
