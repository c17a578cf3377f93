"""The tensor-core kernels (coppelius/kernels/cuda/matmul.cuh, attention.cuh) on a real GPU.

Compiled here by NVRTC for the device's own arch (sm_90 on the H200), loaded with the driver API
(cuModuleLoadData), launched with cuLaunchKernel with the parameter block packed exactly as the
catalog's param_layout says and the geometry of formats/geometry.py. Fresh random fp16
inputs every run (the seed is printed); outputs are poisoned with NaN before every launch, so an
element left unwritten fails. Each output is compared with float64 numpy on the same fp16 inputs
(and, where cheap, with the cpu device's functions): relative Frobenius error and max abs error
per tensor are printed; the assertion is on the relative Frobenius error:
    fp16 outputs of the matmuls and of attention_forward   < 2e-3
    fp16 outputs of attention_backward (dq, dk, dv)         < 4e-3  (P and dS pass through fp16)
    lse (fp32)                                              max abs < 1e-3
Every launch is repeated and the two results must be bitwise identical.
COPPELIUS_TC_CUBIN=path loads a cubin built beforehand instead of compiling here (saves device time).
Run with `pytest -s -m gpu tests/gpu/test_tensor_cores_gpu.py` to see the numbers and timings.
"""
import ctypes
import os
import struct
import time
from pathlib import Path

import numpy as np

from coppelius.realize.nvrtc import compile_cubin, compile_ptx
import pytest

import coppelius
from coppelius.kernels import reference as ref
from coppelius.formats.kernels import KERNELS, PTR_KINDS, SCALAR_KINDS, param_layout
from coppelius.formats.geometry import cluster_size, geometry, stats_width
from coppelius.runtime import cpu
from cuda_harness import allow_cluster, launch_in_clusters

pytestmark = pytest.mark.gpu

SOURCES = Path(coppelius.__file__).resolve().parent / "kernels" / "cuda"
TC_KERNELS = ("matmul_forward", "matmul_forward_gelu", "matmul_forward_stats", "matmul_backward_input",
              "matmul_backward_input_gelu", "matmul_backward_weight", "attention_forward", "attention_backward")
UNFUSED = ("gelu_forward", "gelu_backward")  # what the matmuls' gelu epilogues fuse, launched to compare bits
TOL_FP16 = 2e-3
TOL_ATTN_BWD = 4e-3
TOL_LSE_ABS = 1e-3


# ------------------------------------------------------------------------------------ the device

def _ck(result):
    """cuda-bindings calls return (status, *values): raise on a bad status, return the values."""
    status, *values = result if isinstance(result, tuple) else (result,)
    if int(status) != 0:
        raise RuntimeError(f"CUDA call failed: {status!r}")
    return values[0] if len(values) == 1 else (values or None)


class Gpu:
    """One context, the tensor-core kernels (and the two gelus) loaded, and a few helpers over the driver API."""

    def __init__(self, cubin: bytes | None = None, arch: str | None = None):
        """cubin: this card's (NVRTC for its arch, or COPPELIUS_TC_CUBIN); or another arch's PTX with that arch, whose
        geometry the launches then take."""
        from cuda.bindings import driver
        self.d = driver
        _ck(driver.cuInit(0))
        self.dev = _ck(driver.cuDeviceGet(0))
        major = _ck(driver.cuDeviceGetAttribute(
            driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.dev))
        minor = _ck(driver.cuDeviceGetAttribute(
            driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.dev))
        self.card_arch = f"sm_{major}{minor}"
        self.arch = arch or self.card_arch
        self.name = _ck(driver.cuDeviceGetName(256, self.dev)).split(b"\0")[0].decode()
        self.ctx = _ck(driver.cuDevicePrimaryCtxRetain(self.dev))
        _ck(driver.cuCtxSetCurrent(self.ctx))
        t = time.time()
        if cubin is None and os.environ.get("COPPELIUS_TC_CUBIN"):  # a cubin built beforehand (saves device time)
            cubin = Path(os.environ["COPPELIUS_TC_CUBIN"]).read_bytes()
        self.cubin = cubin if cubin is not None else compile_cubin(self.card_arch)[0]
        self.compile_s = time.time() - t
        self.module = _ck(driver.cuModuleLoadData(self.cubin))
        self.fn = {k: _ck(driver.cuModuleGetFunction(self.module, k.encode())) for k in TC_KERNELS + UNFUSED}
        self.buffers = []
        self.counter = None  # the input gradients' tile_counter when a launch names none (the plan's plane)

    def tile_counter(self) -> int:
        """A zeroed i32 that the launches sharing it leave 0, as the plan's tile_counter plane."""
        if self.counter is None:
            self.counter = self.alloc(16)
            _ck(self.d.cuMemsetD8(self.counter, 0, 16))
        return self.counter

    def alloc(self, nbytes: int) -> int:
        ptr = int(_ck(self.d.cuMemAlloc(max(16, nbytes))))
        self.buffers.append(ptr)
        return ptr

    def put(self, a: np.ndarray) -> int:
        a = np.ascontiguousarray(a)
        ptr = self.alloc(a.nbytes)
        _ck(self.d.cuMemcpyHtoD(ptr, a.ctypes.data, a.nbytes))
        return ptr

    def write(self, ptr: int, a: np.ndarray) -> None:
        a = np.ascontiguousarray(a)
        _ck(self.d.cuMemcpyHtoD(ptr, a.ctypes.data, a.nbytes))

    def get(self, ptr: int, dtype, count: int) -> np.ndarray:
        out = np.empty(count, dtype)
        _ck(self.d.cuMemcpyDtoH(out.ctypes.data, ptr, out.nbytes))
        return out

    def poison(self, ptr: int, nbytes: int) -> None:
        _ck(self.d.cuMemsetD8(ptr, 0xFF, nbytes))  # fp16 0xFFFF and fp32 0xFFFFFFFF are NaN

    def sync(self) -> None:
        _ck(self.d.cuCtxSynchronize())

    def prepare(self, kernel: str, args: dict, stream=0):
        """A function that launches kernel with args (pointer parameters as device addresses, None for
        null; scalars as numbers) on `stream` (the default stream unless given): the parameter block packed once,
        as the catalog's param_layout says."""
        if any(n == "tile_counter" for n, _ in KERNELS[kernel]) and "tile_counter" not in args:
            args = {**args, "tile_counter": self.tile_counter()}
        scalars = {n: args[n] for n, kind in KERNELS[kernel] if kind not in PTR_KINDS}
        grid, block, shared = geometry(kernel, scalars, self.arch)
        cluster = cluster_size(kernel, scalars, self.arch)
        layout, size = param_layout(kernel)
        blob = bytearray(size)
        for name, kind, offset in layout:
            if kind in PTR_KINDS:
                struct.pack_into("<Q", blob, offset, int(args[name] or 0))
            else:
                word = np.array(args[name], dtype=SCALAR_KINDS[kind]).tobytes()
                blob[offset:offset + len(word)] = word
        buf = (ctypes.c_char * size).from_buffer(blob)
        # the exact bytes of the kernel's parameters: the catalog's block size is rounded up to 8, and a
        # larger CU_LAUNCH_PARAM_BUFFER_SIZE than the kernel's own is refused (LAUNCH_OUT_OF_RESOURCES)
        nbytes = ctypes.c_size_t(max(off + (8 if kind in PTR_KINDS else 4) for _, kind, off in layout))
        extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(buf), 2, ctypes.addressof(nbytes), 0)
        fn, launch_args = self.fn[kernel], (*grid, *block, shared, stream, None, ctypes.addressof(extra))
        if shared > 48 * 1024:  # above 48 KiB of dynamic shared memory a function takes it only when opted in
            _ck(self.d.cuFuncSetAttribute(
                fn, self.d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared))
        keep = (blob, buf, nbytes, extra)
        if cluster > 1:  # the kernel reads its split of K from its cluster's size
            allow_cluster(fn, cluster)
            return lambda: _ck(launch_in_clusters(fn, grid, block, shared, stream, cluster, ctypes.addressof(keep[3])))

        def go():
            assert keep
            _ck(self.d.cuLaunchKernel(fn, *launch_args))
        return go

    def launch(self, kernel: str, args: dict) -> None:
        self.prepare(kernel, args)()

    def free_all(self) -> None:
        for p in self.buffers:
            self.d.cuMemFree(p)
        self.buffers = []
        self.counter = None

    def timer(self, fn, reps: int = 20, warmup: int = 3) -> float:
        """Milliseconds a call of fn (launches, issued back to back) takes, CUDA events around reps calls."""
        for _ in range(warmup):
            fn()
        start, stop = _ck(self.d.cuEventCreate(0)), _ck(self.d.cuEventCreate(0))
        _ck(self.d.cuEventRecord(start, 0))
        for _ in range(reps):
            fn()
        _ck(self.d.cuEventRecord(stop, 0))
        _ck(self.d.cuEventSynchronize(stop))
        ms = _ck(self.d.cuEventElapsedTime(start, stop)) / reps
        self.d.cuEventDestroy(start)
        self.d.cuEventDestroy(stop)
        return float(ms)


@pytest.fixture(scope="module")
def gpu():
    g = Gpu()
    print(f"\n[tensor cores] {g.name} {g.arch}; NVRTC compile {g.compile_s:.1f} s, cubin {len(g.cubin)} bytes")
    yield g
    g.free_all()


@pytest.fixture(scope="module")
def rtx3090_code():
    """The rtx3090 target's kernels on this card: compute_86 PTX (its __CUDA_ARCH__: mma.sync, no wgmma, no
    clusters) JIT-compiled by the driver, launched with sm_86's geometry."""
    g = Gpu(compile_ptx("sm_86"), arch="sm_86")
    print(f"\n[tensor cores] sm_86 code on {g.name} ({g.card_arch}): PTX {len(g.cubin)} bytes, JIT by the driver")
    yield g
    g.free_all()


@pytest.fixture
def rng():
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"\n[seed {seed}]", end=" ")
    return np.random.default_rng(seed)


# ------------------------------------------------------------------------------------ checking

def compare(name: str, got: np.ndarray, want: np.ndarray, tol: float, cpu_out: np.ndarray | None = None,
            abs_tol: float | None = None) -> None:
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    assert np.isfinite(got64).all(), f"{name}: {np.count_nonzero(~np.isfinite(got64))} non-finite (unwritten?)"
    err = got64 - want64
    rel = np.linalg.norm(err) / max(np.linalg.norm(want64), 1e-30)
    mx = np.abs(err).max() if err.size else 0.0
    shown = f"{rel:.2e}" if np.linalg.norm(want64) > 0 else "n/a (reference is 0)"
    line = f"  {name:<34} rel_fro {shown}  max_abs {mx:.2e}  (|ref|max {np.abs(want64).max():.2e})"
    if cpu_out is not None:
        cerr = cpu_out.astype(np.float64) - want64
        line += f"  [cpu device: rel_fro {np.linalg.norm(cerr) / max(np.linalg.norm(want64), 1e-30):.2e}]"
    print(line)
    bad = np.abs(err) > 20 * (abs_tol if abs_tol is not None else tol) * np.abs(want64).max()
    if np.abs(want64).max() > 0 and bad.any():  # where the errors are, to debug from one run's log
        idx = np.argwhere(bad)
        print(f"    {bad.sum()} of {bad.size} elements far off; first {idx[:6].tolist()}; rows with any: "
              f"{np.unique(idx[:, 0]).size if idx.ndim > 1 and idx.shape[1] else 0}; last {idx[-3:].tolist()}")
    if abs_tol is None and np.linalg.norm(want64) == 0:  # (dq at T=1: zero up to rounding)
        abs_tol = 1e-3
    if abs_tol is not None:
        assert mx < abs_tol, f"{name}: max abs error {mx:.3e} >= {abs_tol}"
    else:
        assert rel < tol, f"{name}: relative Frobenius error {rel:.3e} >= {tol}"


def run_twice(g: Gpu, kernel: str, args: dict, outputs: dict, restore: dict | None = None) -> dict:
    """Launch twice (outputs poisoned before each; `restore` rewrites rw inputs); results must match
    bitwise. outputs: name -> (ptr, dtype, count). Returns the first result."""
    results = []
    for _ in range(2):
        for name, (ptr, dtype, count) in outputs.items():
            if restore and name in restore:
                g.write(ptr, restore[name])
            else:
                g.poison(ptr, np.dtype(dtype).itemsize * count)
        g.launch(kernel, args)
        g.sync()
        results.append({n: g.get(p, dt, c) for n, (p, dt, c) in outputs.items()})
    for name in outputs:
        assert results[0][name].tobytes() == results[1][name].tobytes(), f"{kernel} {name}: two launches differ"
    return results[0]


def h16(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float16)


def h16_timing(rng, *shape, scale=1.0):
    """Random fp16 quickly, for timings only: 2^20 fresh values repeated (never zeros)."""
    return np.resize((rng.standard_normal(1 << 20) * scale).astype(np.float16), shape)


# ------------------------------------------------------------------------------------ matmuls

MATMUL_SHAPES = [  # (N, C, OC)
    (512, 64, 64), (1024, 64, 192), (1024, 64, 256), (1024, 256, 64),  # tiny
    (16384, 384, 1152), (16384, 1536, 384), (16384, 384, 256),           # small (S = 2 on sm_90)
    (1000, 72, 200), (77, 40, 33), (129, 13, 70), (3, 8, 5), (300, 136, 264), (2048, 96, 4100),  # ragged
    (5000, 1000, 1000), (6000, 1001, 700), (2048, 72, 2136), (2072, 2136, 70),  # ragged on sm_90's 256x128 tiles
    (16384, 384, 384), (8999, 200, 328),  # sm_90's ping-pong forwards (OC leaves a 128x256 tile a fifth empty)
    (2048, 100, 36),  # sm_90's 192-column weight-gradient tile, loaded element-wise (the small shapes' C = 384: TMA)
    (9000, 136, 200),  # sm_90's wide forward and input gradient below a wave (71 tiles, a block each)
    (1000, 1104, 384), (1000, 384, 1104),  # sm_90's 128 x 192 ping-pong at a ragged M and K (K >= 1024)
]


def _matmul_case(g, rng, N, C, OC, full_check: bool, rows=None):
    inp, weight, bias, dout = h16(rng, N, C), h16(rng, OC, C, scale=0.2), h16(rng, OC), h16(rng, N, OC)
    old = h16(rng, OC, C)
    p_inp, p_w, p_b, p_dout = g.put(inp), g.put(weight), g.put(bias), g.put(dout)
    p_out, p_dinp, p_dw, p_db = g.alloc(N * OC * 2), g.alloc(N * C * 2), g.alloc(OC * C * 2), g.alloc(OC * 2)
    sc = {"N": N, "C": C, "OC": OC}
    x64, w64, b64, g64 = (a.astype(np.float64) for a in (inp, weight, bias, dout))
    r = np.arange(N) if rows is None else rows  # rows of out / dinp checked
    oc = np.arange(OC) if rows is None else np.unique(np.r_[rows % OC, OC - 1])  # rows of dweight checked
    tag = f"N={N} C={C} OC={OC}"

    for with_bias in (True, False):
        res = run_twice(g, "matmul_forward", {"out": p_out, "inp": p_inp, "weight": p_w,
                                              "bias": p_b if with_bias else None, **sc},
                        {"out": (p_out, np.float16, N * OC)})
        got = res["out"].reshape(N, OC)[r]
        want = x64[r] @ w64.T + (b64 if with_bias else 0)
        c_out = None
        if full_check:
            c_out = np.empty(N * OC, np.float16)
            cpu.matmul_forward(c_out, inp.ravel(), weight.ravel(), bias if with_bias else None, N, C, OC)
            c_out = c_out.reshape(N, OC)
        compare(f"fwd {tag} bias={with_bias}", got, want, TOL_FP16, c_out)

    res = run_twice(g, "matmul_backward_input", {"dinp": p_dinp, "dout": p_dout, "weight": p_w, **sc},
                    {"dinp": (p_dinp, np.float16, N * C)})
    _tile_counter_kept(g, "matmul_backward_input", {"dinp": p_dinp, "dout": p_dout, "weight": p_w, **sc},
                       res["dinp"], N * C, tag)
    c_out = None
    if full_check:
        c_out = np.empty(N * C, np.float16)
        cpu.matmul_backward_input(c_out, dout.ravel(), weight.ravel(), None, N, C, OC)
        c_out = c_out.reshape(N, C)
    compare(f"bwd_input {tag}", res["dinp"].reshape(N, C)[r], g64[r] @ w64, TOL_FP16, c_out)
    _gelu_epilogue(g, N, C, OC, {"inp": p_inp, "weight": p_w, "bias": p_b}, r, tag)
    _stats_epilogue(g, N, C, OC, {"inp": p_inp, "weight": p_w}, r, tag)
    _gelu_backward_epilogue(g, rng, N, C, OC, {"dout": p_dout, "weight": p_w}, r, tag,
                            (dout, weight) if full_check else None)

    for accumulate in (0, 1):
        res = run_twice(g, "matmul_backward_weight", {"dweight": p_dw, "dbias": p_db, "dout": p_dout,
                                                      "inp": p_inp, **sc, "accumulate": accumulate},
                        {"dweight": (p_dw, np.float16, OC * C), "dbias": (p_db, np.float16, OC)},
                        restore={"dweight": old.ravel()} if accumulate else None)
        want = g64[:, oc].T @ x64 + (old[oc].astype(np.float64) if accumulate else 0)
        c_dw = c_db = None
        if full_check:
            c_dw, c_db = (old.ravel().copy() if accumulate else np.empty(OC * C, np.float16)), np.empty(OC, np.float16)
            cpu.matmul_backward_weight(c_dw, c_db, dout.ravel(), inp.ravel(), N, C, OC, accumulate)
            c_dw = c_dw.reshape(OC, C)
        compare(f"bwd_weight {tag} acc={accumulate}", res["dweight"].reshape(OC, C)[oc], want, TOL_FP16, c_dw)
        compare(f"bwd_bias {tag}", res["dbias"][oc], g64[:, oc].sum(axis=0), TOL_FP16, c_db)
    # without dbias: dweight still right, nothing written through a null pointer
    res = run_twice(g, "matmul_backward_weight", {"dweight": p_dw, "dbias": None, "dout": p_dout, "inp": p_inp,
                                                  **sc, "accumulate": 0}, {"dweight": (p_dw, np.float16, OC * C)})
    compare(f"bwd_weight {tag} nobias", res["dweight"].reshape(OC, C)[oc], g64[:, oc].T @ x64, TOL_FP16)
    g.free_all()


def _gelu_epilogue(g, N, C, OC, p: dict, r, tag):
    """matmul_forward_gelu's gelu has the bits of the unfused launches (matmul_forward, then gelu_forward on the GPU),
    and its gelu and slope are the float64 ones at the rounded products (matmul_forward's)."""
    sc = {"N": N, "C": C, "OC": OC}
    p_out, p_gelu, p_want, p_slope = (g.alloc(N * OC * 2) for _ in range(4))
    run_twice(g, "matmul_forward", {"out": p_out, "inp": p["inp"], "weight": p["weight"], "bias": p["bias"], **sc},
              {"out": (p_out, np.float16, N * OC)})
    g.launch("gelu_forward", {"out": p_want, "inp": p_out, "N": N * OC})
    unfused = g.get(p_want, np.float16, N * OC)
    fused = run_twice(g, "matmul_forward_gelu", {"slope": p_slope, "out_gelu": p_gelu, "inp": p["inp"],
                                                 "weight": p["weight"], "bias": p["bias"], **sc},
                      {"slope": (p_slope, np.float16, N * OC), "out_gelu": (p_gelu, np.float16, N * OC)})
    assert fused["out_gelu"].tobytes() == unfused.tobytes(), f"fwd_gelu {tag}: out_gelu differs from the unfused"
    pre = g.get(p_out, np.float16, N * OC).reshape(N, OC)[r].astype(np.float64)
    compare(f"fwd_gelu {tag}", fused["out_gelu"].reshape(N, OC)[r], ref.gelu_forward(pre), TOL_FP16)
    compare(f"fwd_gelu_slope {tag}", fused["slope"].reshape(N, OC)[r], ref.gelu_slope(pre), TOL_FP16)


def _stats_epilogue(g, N, C, OC, p: dict, r, tag):
    """matmul_forward_stats' out has matmul_forward's bits (no bias), and its statistics of each row's parts (the
    launch's tile width; V cuts one, and where OC - V exceeds the width, parts past V are empty) are the float64 max
    (exact) and sum of exp of those fp16 values."""
    sc = {"N": N, "C": C, "OC": OC}
    V = 50257 if OC == 50304 else OC - 300 if OC > 600 else max(1, OC - 3)
    width = stats_width(sc, g.arch)
    parts = -(-OC // width)
    p_plain, p_out, p_stats = g.alloc(N * OC * 2), g.alloc(N * OC * 2), g.alloc(N * parts * 8)
    plain = run_twice(g, "matmul_forward", {"out": p_plain, "inp": p["inp"], "weight": p["weight"], "bias": None, **sc},
                      {"out": (p_plain, np.float16, N * OC)})["out"]
    res = run_twice(g, "matmul_forward_stats", {"out": p_out, "stats": p_stats, "inp": p["inp"],
                                                "weight": p["weight"], **sc, "V": V, "width": width},
                    {"out": (p_out, np.float16, N * OC), "stats": (p_stats, np.float32, N * parts * 2)})
    assert res["out"].tobytes() == plain.tobytes(), f"fwd_stats {tag}: out differs from matmul_forward's"
    x = plain.reshape(N, OC)[r].astype(np.float64)
    got = res["stats"].reshape(N, parts, 2)[r]
    want_m, want_s = ref.softmax_parts(x, V, width).transpose(2, 0, 1)
    assert np.array_equal(got[..., 0], want_m), f"fwd_stats {tag} width={width} V={V}: maxima differ"
    assert not got[..., 1][want_s == 0].any(), f"fwd_stats {tag}: an empty part's sum is not 0"
    compare(f"fwd_stats {tag} width={width} V={V}", got[..., 1], want_s, 1e-5)


def _tile_counter_kept(g, kernel: str, args: dict, got: np.ndarray, count: int, tag: str) -> None:
    """An input gradient's tiles taken from its counter (the plan's way, run_twice above) give the bits of the static
    walk (no counter), and leave the counter 0 for the next launch."""
    static = run_twice(g, kernel, {**args, "tile_counter": None}, {"dinp": (args["dinp"], np.float16, count)})["dinp"]
    assert got.tobytes() == static.tobytes(), f"{kernel} {tag}: the counter's tiles give other bits than the walk's"
    assert g.get(g.tile_counter(), np.int32, 1)[0] == 0, f"{kernel} {tag}: the tile counter is not left 0"


def _gelu_backward_epilogue(g, rng, N, C, OC, p: dict, r, tag, host_operands=None):
    """matmul_backward_input_gelu gives the bits of the unfused launches it replaces (matmul_backward_input, then
    gelu_backward on the GPU), which are the rounded products times the slopes rounded once (host_operands: dout and
    weight, for the cpu device's figure beside it)."""
    sc = {"N": N, "C": C, "OC": OC}
    slope = h16(rng, N, C, scale=1.0)
    p_slope, p_prod, p_want, p_dinp = g.put(slope), g.alloc(N * C * 2), g.alloc(N * C * 2), g.alloc(N * C * 2)
    run_twice(g, "matmul_backward_input", {"dinp": p_prod, "dout": p["dout"], "weight": p["weight"], **sc},
              {"dinp": (p_prod, np.float16, N * C)})
    g.launch("gelu_backward", {"dinp": p_want, "slope": p_slope, "dout": p_prod, "N": N * C})
    unfused = g.get(p_want, np.float16, N * C)
    fused = run_twice(g, "matmul_backward_input_gelu", {"dinp": p_dinp, "dout": p["dout"], "weight": p["weight"],
                                                        "slope": p_slope, **sc},
                      {"dinp": (p_dinp, np.float16, N * C)})["dinp"]
    assert fused.tobytes() == unfused.tobytes(), f"bwd_input_gelu {tag}: dinp differs from the unfused"
    _tile_counter_kept(g, "matmul_backward_input_gelu", {"dinp": p_dinp, "dout": p["dout"], "weight": p["weight"],
                                                         "slope": p_slope, **sc}, fused, N * C, tag)
    product = g.get(p_prod, np.float16, N * C)
    rounded_once = (product.astype(np.float32) * slope.ravel().astype(np.float32)).astype(np.float16)
    assert fused.tobytes() == rounded_once.tobytes(), f"bwd_input_gelu {tag}: not the product rounded once"
    want = ref.gelu_backward(product.reshape(N, C)[r].astype(np.float64), slope[r].astype(np.float64))
    c_out = None
    if host_operands is not None:
        c_out = np.empty(N * C, np.float16)
        cpu.matmul_backward_input_gelu(c_out, host_operands[0].ravel(), host_operands[1].ravel(), slope.ravel(), None,
                                       N, C, OC)
        c_out = c_out.reshape(N, C)[r]
    compare(f"bwd_input_gelu {tag}", fused.reshape(N, C)[r], want, TOL_FP16, c_out)


@pytest.mark.parametrize("N,C,OC", MATMUL_SHAPES)
def test_matmul(gpu, rng, N, C, OC):
    _matmul_case(gpu, rng, N, C, OC, full_check=N * C * OC <= 2 ** 31)


@pytest.mark.parametrize("N,C,OC", [(32768, 768, 2304), (32768, 768, 768), (32768, 3072, 768), (2048, 768, 50304)])
def test_matmul_gpt2(gpu, rng, N, C, OC):
    """gpt2-124m shapes (the head at N=2048 rows to keep the data and float64 check small): sampled rows."""
    rows = np.unique(np.r_[rng.choice(N, 96, replace=False), 0, N - 1])
    _matmul_case(gpu, rng, N, C, OC, full_check=False, rows=rows)


def test_loss_in_place_from_the_lm_heads_statistics(gpu, rng):
    """The training step's lm head and loss at gpt2's vocabulary (512 rows): matmul_forward_stats, then
    crossentropy_forward_backward_stats writing dlogits over the logits, against crossentropy_forward_backward out of
    place; and that one in place, bit for bit. Half the targets among the first columns, whose packs are written
    first: the loss once read its target's logit after another thread had written the gradient over it."""
    N, C, V, Vp = 512, 64, 50257, 50304
    sc = {"N": N, "C": C, "OC": Vp}
    width = stats_width(sc, gpu.arch)
    for name in ("crossentropy_forward_backward", "crossentropy_forward_backward_stats"):
        gpu.fn[name] = _ck(gpu.d.cuModuleGetFunction(gpu.module, name.encode()))
    targets = np.r_[rng.integers(0, 64, N // 2), rng.integers(0, V, N - N // 2)].astype(np.int32)
    p_inp, p_w, p_t = gpu.put(h16(rng, N, C)), gpu.put(h16(rng, Vp, C, scale=0.3)), gpu.put(targets)
    logits, dlogits, stats = gpu.alloc(N * Vp * 2), gpu.alloc(N * Vp * 2), gpu.alloc(N * -(-Vp // width) * 8)
    losses = [gpu.alloc(N * 4) for _ in range(3)]
    loss = {"logits": logits, "targets": p_t, "N": N, "V": V, "Vp": Vp, "scale": 1.0 / N}
    gpu.launch("matmul_forward_stats", {"out": logits, "stats": stats, "inp": p_inp, "weight": p_w, **sc, "V": V,
                                        "width": width})
    gpu.launch("crossentropy_forward_backward", loss | {"losses": losses[0], "dlogits": dlogits})
    gpu.launch("crossentropy_forward_backward_stats", loss | {"losses": losses[1], "dlogits": logits, "stats": stats,
                                                              "width": width})
    gpu.sync()
    want_loss, want_d = gpu.get(losses[0], np.float32, N), gpu.get(dlogits, np.float16, N * Vp)
    got_loss, got_d = gpu.get(losses[1], np.float32, N), gpu.get(logits, np.float16, N * Vp)
    rel = np.abs(got_loss.astype(np.float64) - want_loss) / np.abs(want_loss)
    err = np.abs(got_d.astype(np.float64) - want_d)
    ulps = err / np.spacing(np.maximum(np.abs(want_d), np.float16(2 ** -14))).astype(np.float64)
    print(f"\n  in place from the statistics: losses max rel {rel.max():.2e}, dlogits max {ulps.max():.0f} fp16 ulps")
    assert rel.max() < 1e-5 and ulps.max() <= 2
    gpu.launch("matmul_forward", {"out": logits, "inp": p_inp, "weight": p_w, "bias": None, **sc})
    gpu.launch("crossentropy_forward_backward", loss | {"losses": losses[2], "dlogits": logits})
    gpu.sync()
    assert gpu.get(losses[2], np.float32, N).tobytes() == want_loss.tobytes(), "in place: other losses"
    assert gpu.get(logits, np.float16, N * Vp).tobytes() == want_d.tobytes(), "in place: other dlogits"
    gpu.free_all()


# ------------------------------------------------------------------------------------ attention

ATTENTION_SHAPES = [  # (B, T, C, NH)
    (8, 64, 64, 4), (16, 64, 64, 4),                  # tiny (hs 16)
    (4, 256, 384, 6),                                 # small (hs 64; B reduced)
    (2, 100, 96, 3), (3, 77, 40, 5), (2, 130, 120, 2), (1, 200, 256, 2), (2, 33, 48, 1), (1, 1, 64, 4),
    (2, 190, 256, 8), (1, 300, 512, 4), (2, 150, 128, 2), (1, 50, 21, 3),
]  # ragged T; hs 8, 60 and 7 (element-wise loads; 7: odd C too), 128, 48, 32, 64


def _attention_case(g, rng, B, T, C, NH, check_batches=None, scale=1.0):
    qkv = h16(rng, B, T, 3 * C, scale=scale)
    dout = h16(rng, B, T, C)
    bs = np.arange(B) if check_batches is None else np.asarray(check_batches)
    # float64 reference forward on the checked batches; the backward's out and lse are its rounding
    y64, l64 = ref.attention_forward(qkv[bs].astype(np.float64), NH)
    out16 = np.zeros((B, T, C), np.float16)
    lse32 = np.zeros((B, NH, T), np.float32)
    out16[bs], lse32[bs] = y64.astype(np.float16), l64.astype(np.float32)
    p_qkv, p_dout = g.put(qkv), g.put(dout)
    p_out, p_lse, p_dqkv = g.alloc(B * T * C * 2), g.alloc(B * NH * T * 4), g.alloc(B * T * 3 * C * 2)
    sc = {"B": B, "T": T, "C": C, "NH": NH}
    tag = f"B={B} T={T} C={C} NH={NH} hs={C // NH}"
    small = B * NH * T * T <= 2 ** 24

    res = run_twice(g, "attention_forward", {"out": p_out, "lse": p_lse, "qkv": p_qkv, **sc},
                    {"out": (p_out, np.float16, B * T * C), "lse": (p_lse, np.float32, B * NH * T)})
    c_out = c_lse = None
    if small and check_batches is None:
        c_out, c_lse = np.empty(B * T * C, np.float16), np.empty(B * NH * T, np.float32)
        cpu.attention_forward(c_out, c_lse, qkv.ravel(), B, T, C, NH)
        c_out, c_lse = c_out.reshape(B, T, C), c_lse.reshape(B, NH, T)
    compare(f"attn_fwd out {tag}", res["out"].reshape(B, T, C)[bs], y64, TOL_FP16, c_out)
    compare(f"attn_fwd lse {tag}", res["lse"].reshape(B, NH, T)[bs], l64, 0, c_lse, abs_tol=TOL_LSE_ABS)

    if check_batches is not None:  # unchecked batches get the GPU's forward, so the inputs are sane
        gpu_out, gpu_lse = res["out"].reshape(B, T, C).copy(), res["lse"].reshape(B, NH, T).copy()
        gpu_out[bs], gpu_lse[bs] = out16[bs], lse32[bs]
        out16, lse32 = gpu_out, gpu_lse
    g.write(p_out, out16)
    g.write(p_lse, lse32)
    res = run_twice(g, "attention_backward", {"dqkv": p_dqkv, "dout": p_dout, "qkv": p_qkv, "out": p_out,
                                              "lse": p_lse, **sc}, {"dqkv": (p_dqkv, np.float16, B * T * 3 * C)})
    want = ref.attention_backward(dout[bs].astype(np.float64), qkv[bs].astype(np.float64),
                                  out16[bs].astype(np.float64), lse32[bs].astype(np.float64), NH)
    got = res["dqkv"].reshape(B, T, 3 * C)[bs]
    c_d = None
    if small and check_batches is None:
        c_d = np.empty(B * T * 3 * C, np.float16)
        cpu.attention_backward(c_d, dout.ravel(), qkv.ravel(), out16.ravel(), lse32.ravel(), B, T, C, NH)
        c_d = c_d.reshape(B, T, 3 * C)
    for i, part in enumerate(("dq", "dk", "dv")):
        sl = slice(i * C, (i + 1) * C)
        compare(f"attn_bwd {part} {tag}", got[..., sl], want[..., sl], TOL_ATTN_BWD,
                None if c_d is None else c_d[..., sl])
    g.free_all()


@pytest.mark.parametrize("B,T,C,NH", ATTENTION_SHAPES)
def test_attention(gpu, rng, B, T, C, NH):
    _attention_case(gpu, rng, B, T, C, NH)


def test_attention_sharp(gpu, rng):
    """Larger scores (a peaked softmax) at the small model's head size."""
    _attention_case(gpu, rng, 2, 256, 384, 6, scale=3.0)


@pytest.mark.parametrize("B,T,C,NH", [(64, 256, 384, 6), (32, 1024, 768, 12)])
def test_attention_models(gpu, rng, B, T, C, NH):
    """small and gpt2-124m at full batch; two batches checked against float64."""
    _attention_case(gpu, rng, B, T, C, NH, check_batches=[0, B - 1])


# ------------------------------------------------------------------------------------ timings

MODEL_MATMULS = {"gpt2 qkv": (32768, 768, 2304), "gpt2 attn proj": (32768, 768, 768), "gpt2 fc": (32768, 768, 3072),
                 "gpt2 fc proj": (32768, 3072, 768), "gpt2 lm head": (32768, 768, 50304),
                 "small qkv": (16384, 384, 1152), "small attn proj": (16384, 384, 384), "small fc": (16384, 384, 1536),
                 "small fc proj": (16384, 1536, 384), "tiny qkv": (512, 64, 192)}  # (N, C, OC) of each model's
MODEL_ATTENTION = {"gpt2 attention": (32, 1024, 768, 12), "small attention": (64, 256, 384, 6),
                   "tiny attention": (8, 64, 64, 4)}  # (B, T, C, NH)


def matmul_flops(N, C, OC) -> float:
    return 2.0 * N * C * OC


def attention_flops(B, T, C, NH) -> float:
    """Causal forward: half the score matrix, QK^T and PV (the backward is counted as 2.5x this, FA's convention)."""
    return 4.0 * B * NH * T * T * (C // NH) / 2


def time_matmul(g, rng, N, C, OC) -> dict:
    """Milliseconds of matmul_forward (with bias), matmul_backward_input and matmul_backward_weight (with dbias)."""
    p_inp, p_w, p_b = (g.put(h16_timing(rng, N, C)), g.put(h16_timing(rng, OC, C, scale=0.05)),
                       g.put(h16_timing(rng, OC)))
    p_dout = g.put(h16_timing(rng, N, OC, scale=0.05))
    p_out, p_dinp, p_dw, p_db = g.alloc(N * OC * 2), g.alloc(N * C * 2), g.alloc(OC * C * 2), g.alloc(OC * 2)
    sc = {"N": N, "C": C, "OC": OC}
    ms = {"fwd": g.timer(g.prepare("matmul_forward", {"out": p_out, "inp": p_inp, "weight": p_w, "bias": p_b, **sc})),
          "bwd_in": g.timer(g.prepare("matmul_backward_input", {"dinp": p_dinp, "dout": p_dout, "weight": p_w, **sc})),
          "bwd_w": g.timer(g.prepare("matmul_backward_weight", {"dweight": p_dw, "dbias": p_db, "dout": p_dout,
                                                                "inp": p_inp, **sc, "accumulate": 0}))}
    g.free_all()
    return ms


def time_attention(g, rng, B, T, C, NH) -> dict:
    """Milliseconds of attention_forward and attention_backward."""
    p_qkv, p_dout = g.put(h16_timing(rng, B, T, 3 * C)), g.put(h16_timing(rng, B, T, C))
    p_out, p_lse, p_dqkv = g.alloc(B * T * C * 2), g.alloc(B * NH * T * 4), g.alloc(B * T * 3 * C * 2)
    sc = {"B": B, "T": T, "C": C, "NH": NH}
    ms = {"fwd": g.timer(g.prepare("attention_forward", {"out": p_out, "lse": p_lse, "qkv": p_qkv, **sc})),
          "bwd": g.timer(g.prepare("attention_backward", {"dqkv": p_dqkv, "dout": p_dout, "qkv": p_qkv,
                                                          "out": p_out, "lse": p_lse, **sc}))}
    g.free_all()
    return ms


def test_timings(gpu, rng):
    """Not an assertion: TFLOP/s (CUDA events, the mean of 20 calls) at the big and the models' shapes
    (bench/kernel_ab.py puts PyTorch's kernels beside them)."""
    print()
    for label, (N, C, OC) in {"8192^3": (8192, 8192, 8192), **MODEL_MATMULS}.items():
        ms, flop = time_matmul(gpu, rng, N, C, OC), matmul_flops(N, C, OC)
        print(f"  {label:<26} N={N:>6} C={C:>5} OC={OC:>6}"
              f"   fwd {ms['fwd']:8.3f} ms {flop / ms['fwd'] / 1e9:6.1f} TF/s"
              f"   bwd_in {ms['bwd_in']:8.3f} ms {flop / ms['bwd_in'] / 1e9:6.1f}"
              f"   bwd_w {ms['bwd_w']:8.3f} ms {flop / ms['bwd_w'] / 1e9:6.1f}")
    for label, (B, T, C, NH) in MODEL_ATTENTION.items():
        ms, flop = time_attention(gpu, rng, B, T, C, NH), attention_flops(B, T, C, NH)
        print(f"  {label:<26} B={B} T={T} C={C} NH={NH}   fwd {ms['fwd']:8.3f} ms {flop / ms['fwd'] / 1e9:6.1f} TF/s"
              f"   bwd {ms['bwd']:8.3f} ms {2.5 * flop / ms['bwd'] / 1e9:6.1f} TF/s (FA convention, 2.5x fwd)")


# ------------------------------------------------------------------------------------ another arch's code here

@pytest.mark.parametrize("N,C,OC", [(1024, 64, 192), (16384, 384, 1152), (300, 136, 264), (2072, 2136, 70)])
def test_matmul_rtx3090_code(rtx3090_code, rng, N, C, OC):
    """sm_86's matmuls (mma.sync tiles; weight gradients unsplit, no clusters) on this card."""
    _matmul_case(rtx3090_code, rng, N, C, OC, full_check=N * C * OC <= 2 ** 31)


@pytest.mark.parametrize("B,T,C,NH", [(4, 256, 384, 6), (2, 150, 128, 2), (1, 200, 256, 2), (2, 190, 256, 8),
                                      (8, 64, 64, 4)])
def test_attention_rtx3090_code(rtx3090_code, rng, B, T, C, NH):
    """sm_86's attention on this card: head size 64 on mma.sync (the H200's own code takes wgmma there), ragged T,
    head sizes 128, 32 and 16."""
    _attention_case(rtx3090_code, rng, B, T, C, NH)
