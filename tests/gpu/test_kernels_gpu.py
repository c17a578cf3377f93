"""The project's CUDA kernels (all but the six tensor-core ones) on a real card, against the cpu
device's numpy kernels on the same fp16 data.

Each test draws fresh random inputs (the seed is printed), launches the kernel from the realized
cubin for the card's arch with the catalog's geometry and a parameter block packed per
param_layout, twice: the two results must be bitwise identical (determinism). Then each output
tensor is compared with the cpu device's function (coppelius/runtime/cpu.py) run on the same
arrays; the max abs difference is printed and held to the tolerance stated beside each call:
  exact     the same operations in the same order (encoder, residual, cast, argmax, flag, adamw);
  fp16 n    |gpu - cpu| <= n ulp of fp16 at |cpu| (n * 2^-10 * |cpu|; near 0, at a small fraction
            of the tensor's largest value), where the GPU sums in another fixed order or uses
            CUDA's tanhf/expf;
  f32 r     relative r on fp32 outputs (mean, rstd, losses).

COPPELIUS_TEST_CUBIN may name a cubin built elsewhere for this card (the lent machine has no
pinned NVRTC); otherwise the test compiles one with coppelius.realize.nvrtc.
"""
import ctypes
import os
import time
from pathlib import Path

import numpy as np
import pytest

from coppelius.formats.geometry import geometry, layernorm_backward_blocks
from coppelius.formats.kernels import ACCESS, KERNELS, PTR_KINDS, param_layout
from coppelius.kernels import reference as ref
from coppelius.runtime import cpu

pytestmark = pytest.mark.gpu
F16_ULP = 2.0 ** -10


def check(result, what="driver call"):
    status, *values = result if isinstance(result, tuple) else (result,)
    if int(status) != 0:
        raise AssertionError(f"{what} failed: {status}")
    return values[0] if len(values) == 1 else (values or None)


class Card:
    def __init__(self):
        from cuda.bindings import driver
        self.driver = d = driver
        check(d.cuInit(0), "cuInit")
        device = check(d.cuDeviceGet(0))
        attr = d.CUdevice_attribute
        major = check(d.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device))
        minor = check(d.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device))
        self.arch = f"sm_{major}{minor}"
        self.context = check(d.cuDevicePrimaryCtxRetain(device))
        check(d.cuCtxSetCurrent(self.context))
        path = os.environ.get("COPPELIUS_TEST_CUBIN")
        if path:
            self.cubin = Path(path).read_bytes()
        else:
            from coppelius.realize.nvrtc import compile_cubin
            self.cubin = compile_cubin(self.arch)[0]
        self.module = check(d.cuModuleLoadData(self.cubin), f"cuModuleLoadData ({self.arch})")
        self.functions = {}

    def function(self, name):
        if name not in self.functions:
            self.functions[name] = check(self.driver.cuModuleGetFunction(self.module, name.encode()), name)
        return self.functions[name]

    def alloc(self, array: np.ndarray) -> int:
        pointer = int(check(self.driver.cuMemAlloc(max(1, array.nbytes))))
        if array.nbytes:
            check(self.driver.cuMemcpyHtoD(pointer, np.ascontiguousarray(array).ctypes.data, array.nbytes))
        return pointer

    def launch(self, kernel: str, args: dict, extra: int = 0, timed: int = 0):
        """Uploads the arrays of args, launches kernel once (or `timed` times, returning the median
        microseconds too), and returns the downloaded arrays it writes. Parameters go by
        kernelParams (a pointer per parameter into the block), as the cuda device passes them, or
        with extra=SIZE as one buffer of SIZE bytes."""
        d = self.driver
        layout, size = param_layout(kernel)
        block = ctypes.create_string_buffer(size)
        pointers, scalars = {}, {}
        for name, kind, offset in layout:
            value = args[name]
            if kind in PTR_KINDS:
                pointers[name] = 0 if value is None else self.alloc(value)
                ctypes.memmove(ctypes.addressof(block) + offset, ctypes.byref(ctypes.c_uint64(pointers[name])), 8)
            else:
                word = {"i32": np.int32, "u32": np.uint32, "f32": np.float32}[kind](value)
                ctypes.memmove(ctypes.addressof(block) + offset, word.tobytes(), 4)
                if kind != "f32":
                    scalars[name] = int(value)
        grid, threads, shared = geometry(kernel, scalars, self.arch)  # the card's: sm_90 stages layernorm_backward
        if extra:
            size_word = ctypes.c_size_t(extra)
            config = (ctypes.c_void_p * 5)(1, ctypes.addressof(block), 2, ctypes.addressof(size_word), 0)
            params, extras = None, ctypes.addressof(config)
        else:
            addresses = (ctypes.c_void_p * len(layout))(*[ctypes.addressof(block) + o for _, _, o in layout])
            params, extras = ctypes.addressof(addresses), 0
        f = self.function(kernel)

        def go():
            check(d.cuLaunchKernel(f, *grid, *threads, shared, 0, params, extras), f"cuLaunchKernel {kernel}")
        elapsed = None
        if timed:
            go()
            start, stop = check(d.cuEventCreate(0)), check(d.cuEventCreate(0))
            times = []
            for _ in range(timed):  # outputs that accumulate are garbage after this: timing only
                check(d.cuEventRecord(start, 0))
                go()
                check(d.cuEventRecord(stop, 0))
                check(d.cuEventSynchronize(stop))
                times.append(check(d.cuEventElapsedTime(start, stop)) * 1000)
            elapsed = float(np.median(times))
        else:
            go()
        check(d.cuCtxSynchronize(), f"{kernel} run")
        out = {}
        for name, pointer in pointers.items():
            if pointer and "w" in ACCESS[kernel][name]:
                host = np.empty_like(args[name])
                check(d.cuMemcpyDtoH(host.ctypes.data, pointer, host.nbytes))
                out[name] = host
        for pointer in pointers.values():
            if pointer:
                check(d.cuMemFree(pointer))
        return (out, elapsed) if timed else out


@pytest.fixture(scope="module")
def card():
    return Card()


@pytest.fixture
def rng():
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}")
    return np.random.default_rng(seed)


def run(card, kernel, **args):
    """GPU outputs (launched twice: bitwise identical) and the cpu device's on copies of the same args."""
    first = card.launch(kernel, {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()})
    second = card.launch(kernel, {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()})
    for name in first:
        assert first[name].tobytes() == second[name].tobytes(), f"{kernel}.{name}: two launches differ"
    want = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    getattr(cpu, kernel)(**want)
    return first, want


def compare(kernel, name, got, want, ulps=None, rel=None, floor=1e-3, atol=0.0, signed_zeros=True):
    """ulps=0: bitwise equal (or equal values, +0 == -0, with signed_zeros=False); ulps=n: fp16
    within n ulp of the cpu value, or of `floor` times the tensor's largest |value| where that is
    more (fp32 rounding where a sum cancels, near 0);
    rel: fp32 relative, plus atol."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    diff = np.abs(g - w)
    worst = float(diff.max()) if diff.size else 0.0
    print(f"{kernel}.{name}: max |gpu - cpu| = {worst:.3g} over {got.size} values "
          f"(max |cpu| {float(np.abs(w).max()):.3g}; {int((diff > 0).sum())} differ)")
    if ulps == 0 and signed_zeros:
        assert got.tobytes() == want.tobytes(), f"{kernel}.{name} not bitwise equal; max diff {worst}"
    elif ulps == 0:
        assert np.array_equal(got, want), f"{kernel}.{name} not equal; max diff {worst}"
    elif ulps is not None:
        bound = ulps * F16_ULP * np.maximum(np.abs(w), floor * np.abs(w).max())
        assert (diff <= bound).all(), f"{kernel}.{name}: {int((diff > bound).sum())} values beyond {ulps} fp16 ulp"
    else:
        assert (diff <= rel * np.abs(w) + atol).all(), f"{kernel}.{name} beyond relative {rel} + {atol}"


def half(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)).astype(np.float16).ravel()


# ---------------------------------------------------------------- encoder

@pytest.mark.parametrize("C", [96, 13])  # 16-byte packs, and element by element
def test_encoder_forward(card, rng, C):
    B, T, Vp = 3, 37, 80
    got, want = run(card, "encoder_forward", out=half(rng, B * T * C),
                    tokens=rng.integers(0, Vp, B * T, dtype=np.int32), wte=half(rng, Vp, C), wpe=half(rng, T, C),
                    B=B, T=T, C=C, Vp=Vp)
    compare("encoder_forward", "out", got["out"], want["out"], ulps=0)  # exact: one fp32 add, one rounding


def sorted_positions(card, tokens, Vp):
    """encoder_sort's order and first on the card, held bitwise equal to the cpu device's (a stable sort)."""
    n = tokens.size
    got, want = run(card, "encoder_sort", order=np.full(n, -1, np.int32), first=np.full(Vp + 1, -1, np.int32),
                    tokens=tokens, N=n, Vp=Vp)
    compare("encoder_sort", "order", got["order"], want["order"], ulps=0)
    compare("encoder_sort", "first", got["first"], want["first"], ulps=0)
    return got["order"], got["first"]


# a row's positions in runs of ceil(n / 8) (formats/geometry.py: encoder_run_length); rows of 1 .. 8 positions take
# a warp, longer ones the block
@pytest.mark.parametrize("C, Vp, skew", [(200, 320, 0.0), (200, 320, 0.6), (13, 70, 0.3), (384, 256, 0.2),
                                         (200, 600, 0.6), (13, 600, 0.3), (96, 5000, 0.05)])
def test_encoder_backward(card, rng, C, Vp, skew):
    B, T = 4, 160
    tokens = rng.integers(0, Vp, B * T, dtype=np.int32)
    tokens[rng.random(B * T) < skew] = 7  # a very frequent token: its runs span the block's warps
    order, first = sorted_positions(card, tokens, Vp)
    got, want = run(card, "encoder_backward", dwte=half(rng, Vp, C), dwpe=half(rng, T, C), dout=half(rng, B * T, C),
                    order=order, first=first, B=B, T=T, C=C, Vp=Vp)
    # exact: every sum in the runs' order from 0, as np.add.at and sum(axis=0) add; a row no
    # token hits is left as it is (the cpu device adds +0 to it, which turns a -0 into +0)
    compare("encoder_backward", "dwte", got["dwte"], want["dwte"], ulps=0, signed_zeros=False)
    compare("encoder_backward", "dwpe", got["dwpe"], want["dwpe"], ulps=0)


@pytest.mark.parametrize("B, T, C, Vp, V", [(32, 1024, 768, 50304, 50257), (64, 256, 384, 256, 256)])
def test_encoder_backward_model_sized(card, rng, B, T, C, Vp, V):
    """gpt2-124m's sizes, and the small byte-level model's (few rows, many positions each)."""
    p = 1.0 / np.arange(1, V + 1)  # Zipf: low ids frequent, as in GPT-2's vocabulary (top one: 9%, 16%)
    tokens = rng.choice(V, size=B * T, p=p / p.sum()).astype(np.int32)
    t0 = time.perf_counter()
    order, first = sorted_positions(card, tokens, Vp)
    args = dict(dwte=half(rng, Vp, C, scale=0.01), dwpe=half(rng, T, C), dout=half(rng, B * T, C, scale=0.01),
                order=order, first=first, B=B, T=T, C=C, Vp=Vp)
    got, want = run(card, "encoder_backward", **args)
    print(f"four launches and the cpu reference: {time.perf_counter() - t0:.1f} s")
    compare("encoder_backward", "dwte", got["dwte"], want["dwte"], ulps=0, signed_zeros=False)
    compare("encoder_backward", "dwpe", got["dwpe"], want["dwpe"], ulps=0)
    _, us = card.launch("encoder_backward", args, timed=10)
    sort_args = dict(order=order, first=first, tokens=tokens, N=B * T, Vp=Vp)
    _, sort_us = card.launch("encoder_sort", sort_args, timed=10)
    print(f"encoder_sort + encoder_backward B={B} T={T} C={C} Vp={Vp}: {sort_us:.1f} + {us:.1f} us (median of 10)")


# ---------------------------------------------------------------- layernorm

# C 96, 384 and 520 / 768: rows held in registers at 1, 2 and 3 packs a lane; 13 (unaligned) and 1100 are not
@pytest.mark.parametrize("N, C", [(77, 96), (77, 13), (300, 768), (300, 384), (64, 520), (50, 1100)])
def test_layernorm_forward(card, rng, N, C):
    got, want = run(card, "layernorm_forward", out=half(rng, N * C), mean=np.zeros(N, np.float32),
                    rstd=np.zeros(N, np.float32), inp=half(rng, N, C, scale=3.0) + np.float16(0.5),
                    weight=half(rng, C), bias=half(rng, C), N=N, C=C)
    compare("layernorm_forward", "out", got["out"], want["out"], ulps=2)  # warp order vs numpy's pairwise sums
    compare("layernorm_forward", "mean", got["mean"], want["mean"], rel=1e-5, atol=1e-6)  # |x| <= ~15
    compare("layernorm_forward", "rstd", got["rstd"], want["rstd"], rel=1e-5)


@pytest.mark.parametrize("N, C", [(77, 96), (77, 13), (300, 768), (300, 384), (64, 520), (50, 1100)])
def test_residual_layernorm_forward(card, rng, N, C):
    """The fused launch against the numpy device, and bit for bit against the card's two kernels it replaces."""
    args = dict(residual=half(rng, N * C), out=half(rng, N * C), mean=np.zeros(N, np.float32),
                rstd=np.zeros(N, np.float32), inp1=half(rng, N, C, scale=2.0) + np.float16(0.5),
                inp2=half(rng, N, C, scale=2.0), weight=half(rng, C), bias=half(rng, C), N=N, C=C)
    got, want = run(card, "residual_layernorm_forward", **args)
    compare("residual_layernorm_forward", "residual", got["residual"], want["residual"], ulps=0)
    compare("residual_layernorm_forward", "out", got["out"], want["out"], ulps=2)
    compare("residual_layernorm_forward", "mean", got["mean"], want["mean"], rel=1e-5, atol=1e-6)
    compare("residual_layernorm_forward", "rstd", got["rstd"], want["rstd"], rel=1e-5)
    residual = card.launch("residual_forward", dict(out=half(rng, N * C), inp1=args["inp1"], inp2=args["inp2"],
                                                    N=N * C))["out"]
    norm = card.launch("layernorm_forward", dict(out=half(rng, N * C), mean=np.zeros(N, np.float32),
                                                 rstd=np.zeros(N, np.float32), inp=residual, weight=args["weight"],
                                                 bias=args["bias"], N=N, C=C))
    compare("residual_layernorm_forward", "residual (two kernels)", got["residual"], residual, ulps=0)
    for name in ("out", "mean", "rstd"):
        compare("residual_layernorm_forward", f"{name} (two kernels)", got[name], norm[name], ulps=0)


# on sm_90, C 96, 768 and 384 stage their rows through shared memory (5000 rows: blocks of 5, an odd last batch, and
# blocks with none); 13 (unaligned) and 1600 (past LAYERNORM_STAGED_WIDTH) load straight to registers
@pytest.mark.parametrize("N, C", [(77, 96), (77, 13), (1000, 768), (5000, 384), (40000, 1600)])
def test_layernorm_backward(card, rng, N, C):
    inp, weight, bias = half(rng, N, C, scale=2.0), half(rng, C), half(rng, C)
    mean, rstd = np.zeros(N, np.float32), np.zeros(N, np.float32)
    cpu.layernorm_forward(np.zeros(N * C, np.float16), mean, rstd, inp, weight, bias, N, C)
    partials = np.full(layernorm_backward_blocks(N) * 2 * C, np.nan, np.float32)
    got, want = run(card, "layernorm_backward", dinp=half(rng, N * C), partials=partials, dout=half(rng, N, C),
                    inp=inp, weight=weight, mean=mean, rstd=rstd, N=N, C=C)
    # dinp: row sums over a thread's 8 channels, the warp, then the warps in order; partials: a block's rows in order
    compare("layernorm_backward", "dinp", got["dinp"], want["dinp"], ulps=2, floor=1e-2)
    compare("layernorm_backward", "partials", got["partials"], want["partials"], rel=1e-4, atol=1e-3)
    # the weight gradients from the card's partials: the GPU's fixed order against numpy's sums of the same values
    got_w, want_w = run(card, "layernorm_backward_weight", dweight=half(rng, C), dbias=half(rng, C),
                        partials=got["partials"], N=N, C=C)
    for name in ("dweight", "dbias"):
        compare("layernorm_backward_weight", name, got_w[name], want_w[name], ulps=2, floor=1e-2)


# ---------------------------------------------------------------- element-wise

def test_gelu_forward(card, rng):
    N = 10007
    got, want = run(card, "gelu_forward", out=half(rng, N), inp=half(rng, N, scale=3.0), N=N)
    compare("gelu_forward", "out", got["out"], want["out"], ulps=1)  # CUDA tanhf against numpy's


def test_gelu_backward(card, rng):
    N = 10007
    got, want = run(card, "gelu_backward", dinp=half(rng, N), slope=half(rng, N), dout=half(rng, N, scale=3.0), N=N)
    compare("gelu_backward", "dinp", got["dinp"], want["dinp"], ulps=0)  # one rounding of an exact product


def test_residual_forward(card, rng):
    N = 10007
    got, want = run(card, "residual_forward", out=half(rng, N), inp1=half(rng, N), inp2=half(rng, N), N=N)
    compare("residual_forward", "out", got["out"], want["out"], ulps=0)


def test_cast_half(card, rng):
    N = 10007
    got, want = run(card, "cast_half", out=half(rng, N), inp=(rng.standard_normal(N) * 100).astype(np.float32), N=N)
    compare("cast_half", "out", got["out"], want["out"], ulps=0)


@pytest.mark.parametrize("poison", [None, np.inf, -np.inf, np.nan])
def test_nonfinite_check(card, rng, poison):
    N = 10007
    grads = half(rng, N)
    if poison is not None:
        grads[rng.integers(N)] = poison
    got, want = run(card, "nonfinite_check", flag=np.zeros(1, np.int32), grads=grads, N=N)
    compare("nonfinite_check", "flag", got["flag"], want["flag"], ulps=0)
    assert int(got["flag"][0]) == (poison is not None)


@pytest.mark.parametrize("skip", [0, 1])
def test_adamw(card, rng, skip):
    N = 10007
    got, want = run(card, "adamw", params=rng.standard_normal(N).astype(np.float32),
                    m=(rng.standard_normal(N) * 0.1).astype(np.float32), v=rng.random(N).astype(np.float32) * 0.01,
                    grads=half(rng, N, scale=64.0), half=half(rng, N), flag=np.array([skip], np.int32), N=N,
                    beta1=np.float32(0.9), beta2=np.float32(0.95), decay=np.float32(1e-5),
                    step_size=np.float32(3e-4), eps=np.float32(1e-8 * 1024))
    for name in ("params", "m", "v", "half"):  # exact: the reference's operations, uncontracted
        compare("adamw", name, got[name], want[name], ulps=0)


# ---------------------------------------------------------------- loss, prediction

@pytest.mark.parametrize("V, Vp", [(1000, 1024), (50257, 50304), (77, 77), (250, 256)])
def test_crossentropy(card, rng, V, Vp):
    N = 43  # Vp <= 256: a warp a row, 8 rows a block, the last block's 5 warps past the rows
    logits = half(rng, N, Vp, scale=4.0)
    targets = rng.integers(0, V, N, dtype=np.int32)
    got, want = run(card, "crossentropy_forward", losses=np.zeros(N, np.float32), logits=logits, targets=targets,
                    N=N, V=V, Vp=Vp)
    compare("crossentropy_forward", "losses", got["losses"], want["losses"], rel=1e-5, atol=1e-6)
    losses = got["losses"]
    scale = np.float32(1024.0 / N)
    got, want = run(card, "crossentropy_backward", dlogits=half(rng, N * Vp), logits=logits, targets=targets,
                    N=N, V=V, Vp=Vp, scale=scale)
    d = got["dlogits"].reshape(N, Vp)
    assert not d[:, V:].any(), "padding columns must be exactly 0"
    # softmax divides by a sum of V terms added in another order: a few fp16 ulp
    compare("crossentropy_backward", "dlogits", got["dlogits"], want["dlogits"], ulps=2)
    # the fused kernel of the training step: the bits of the two above
    fused, _ = run(card, "crossentropy_forward_backward", losses=np.zeros(N, np.float32), dlogits=half(rng, N * Vp),
                   logits=logits, targets=targets, N=N, V=V, Vp=Vp, scale=scale)
    assert fused["dlogits"].tobytes() == got["dlogits"].tobytes(), "fused dlogits differ from crossentropy_backward's"
    assert fused["losses"].tobytes() == losses.tobytes(), "fused losses differ from crossentropy_forward's"
    # from statistics a matmul_forward_stats would leave (float64 here; parts of `width` columns, the last ones cut
    # by V, with width 8 some past it empty): the fused kernel's results but for the sums' order
    x = logits.reshape(N, Vp).astype(np.float64)
    for width in (8, 256):
        stats = ref.softmax_parts(x, V, width).astype(np.float32)
        got, want = run(card, "crossentropy_forward_backward_stats", losses=np.zeros(N, np.float32),
                        dlogits=half(rng, N * Vp), logits=logits, stats=stats.ravel(), targets=targets, N=N, V=V,
                        Vp=Vp, width=width, scale=scale)
        name = f"crossentropy_forward_backward_stats width={width}"
        assert not got["dlogits"].reshape(N, Vp)[:, V:].any(), "padding columns must be exactly 0"
        compare(name, "losses", got["losses"], want["losses"], rel=1e-5, atol=1e-6)
        compare(name, "dlogits", got["dlogits"], want["dlogits"], ulps=2)
        compare(f"{name} against the fused", "losses", got["losses"], fused["losses"], rel=1e-5, atol=1e-6)
        compare(f"{name} against the fused", "dlogits", got["dlogits"], fused["dlogits"], ulps=2)


@pytest.mark.parametrize("V, Vp", [(1000, 1024), (77, 77)])
def test_argmax_forward(card, rng, V, Vp):
    N = 64
    logits = half(rng, N, Vp).reshape(N, Vp)
    logits[:, V:] = 100  # padding never wins
    logits[::3, 5] = logits[::3, V - 2] = 9  # ties: the first index wins
    got, want = run(card, "argmax_forward", predictions=np.zeros(N, np.int32), logits=logits.ravel(), N=N, V=V, Vp=Vp)
    compare("argmax_forward", "predictions", got["predictions"], want["predictions"], ulps=0)


# ---------------------------------------------------------------- the launch ABI, the cubin's numbers

def test_a_parameter_block_passed_whole_through_extra(card, rng):
    """The catalog's block also works handed over as one buffer (CU_LAUNCH_PARAM_BUFFER_POINTER),
    but only with the size the cubin records, up to the end of the last parameter: the 8-byte
    rounded size of param_layout (24 bytes for cast_half's 20) was refused on the H200 with
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (driver 580.159.04)."""
    N = 1001
    inp = (rng.standard_normal(N) * 10).astype(np.float32)
    layout, _ = param_layout("cast_half")
    end = layout[-1][2] + 4  # N, an i32, is the last parameter
    out = card.launch("cast_half", {"out": np.zeros(N, np.float16), "inp": inp, "N": N}, extra=end)
    assert out["out"].tobytes() == inp.astype(np.float16).tobytes()


def test_kernel_info_agrees_with_the_driver(card):
    from coppelius.realize.nvrtc import kernel_info
    d = card.driver
    attr = d.CUfunction_attribute
    info = kernel_info(card.cubin)
    for name in sorted(KERNELS):
        f = card.function(name)
        registers = check(d.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_NUM_REGS, f))
        shared = check(d.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f))
        threads = check(d.cuFuncGetAttribute(attr.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f))
        print(f"{name}: registers {registers} (cubin {info[name]['registers']}), static shared {shared} "
              f"(cubin {info[name]['shared_bytes']}), max threads {threads} (cubin {info[name]['max_threads']})")
        assert registers == info[name]["registers"]
        assert shared == info[name]["shared_bytes"]


@pytest.mark.parametrize("kernel", ["layernorm_forward", "layernorm_backward", "crossentropy_backward", "gelu_forward",
                                    "adamw"])
def test_gpt2_sized_timings(card, rng, kernel):
    """Times only (no reference): how long the memory-bound kernels take at gpt2-124m's sizes."""
    N, C, V, Vp = 32768, 768, 50257, 50304
    if kernel == "layernorm_forward":
        args = dict(out=np.empty(N * C, np.float16), mean=np.zeros(N, np.float32), rstd=np.zeros(N, np.float32),
                    inp=half(rng, N * C), weight=half(rng, C), bias=half(rng, C), N=N, C=C)
        moved = 2 * N * C * 2
    elif kernel == "layernorm_backward":
        args = dict(dinp=half(rng, N * C), partials=np.zeros(layernorm_backward_blocks(N) * 2 * C, np.float32),
                    dout=half(rng, N * C), inp=half(rng, N * C), weight=half(rng, C), mean=np.zeros(N, np.float32),
                    rstd=np.ones(N, np.float32), N=N, C=C)
        moved = 4 * N * C * 2
    elif kernel == "crossentropy_backward":
        N = 4096
        logits = half(rng, N * Vp)
        args = dict(dlogits=np.empty_like(logits), logits=logits, targets=np.zeros(N, np.int32), N=N, V=V, Vp=Vp,
                    scale=np.float32(1.0))
        moved = 2 * N * Vp * 2
    elif kernel == "gelu_forward":
        N = 4 * C * 32768
        args = dict(out=np.empty(N, np.float16), inp=half(rng, N), N=N)
        moved = 2 * N * 2
    else:
        N = 124_475_904
        args = dict(params=np.ones(N, np.float32), m=np.zeros(N, np.float32), v=np.zeros(N, np.float32),
                    grads=np.ones(N, np.float16), half=np.empty(N, np.float16), flag=np.zeros(1, np.int32), N=N,
                    beta1=np.float32(0.9), beta2=np.float32(0.95), decay=np.float32(0), step_size=np.float32(1e-4),
                    eps=np.float32(1e-5))
        moved = N * (4 * 6 + 2 * 2)
    _, us = card.launch(kernel, args, timed=10)
    print(f"{kernel} at N={N}: {us:.1f} us, {moved / us / 1e6:.2f} TB/s of compulsory traffic")
