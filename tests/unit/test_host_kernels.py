"""The cpu device's C kernels (coppelius/host) against the numpy reference device, kernel by kernel.

Each case draws random inputs, computes the expected outputs with coppelius/runtime/cpu.py (the
numpy reference kernels with fp16 storage), writes the inputs to files, and runs the real C
kernel through a small C driver (tests/unit/host_kernel_driver.c, compiled here with zig cc)
that decodes a parameter block and dispatches exactly as the host runtime does. Every tensor
the kernel writes is compared with its stated tolerance and its max difference printed
(`pytest -s` shows them). Each kernel runs twice with 2 threads and once with 1 and 3 threads:
all four outputs must be the same bits.
"""
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from coppelius.formats.elf import host_machine
from coppelius.formats.geometry import encoder_run_length, layernorm_backward_blocks
from coppelius.host.build import HOST_DIR, compile_program
from coppelius.formats.kernels import ACCESS, KERNEL_NAMES, KERNELS, PTR_KINDS, param_layout
from coppelius.kernels import reference
from coppelius.runtime import cpu

DRIVER_SOURCE = Path(__file__).with_name("host_kernel_driver.c")
QEMU, SYSROOT = shutil.which("qemu-aarch64"), "/usr/aarch64-linux-gnu"
B, T, C, NH, V, VP = 2, 8, 32, 4, 37, 40
N = B * T
# (relative to the value, relative to the tensor's largest value) allowed between C and numpy.
# Exact: the kernel does the reference's float32 operations in its order. fp16 outputs whose sums
# are ordered differently may round to the neighbouring half (2^-11 relative) or two.
EXACT = (0.0, 0.0)
HALF_SUMS = (2.0 ** -10, 2.0 ** -12)
FLOAT_SUMS = (1e-5, 1e-6)
TOLERANCE = {
    "encoder_forward": {"out": EXACT}, "encoder_backward": {"dwte": EXACT, "dwpe": EXACT},
    "encoder_sort": {"order": EXACT, "first": EXACT},
    "residual_forward": {"out": EXACT}, "cast_half": {"out": EXACT}, "argmax_forward": {"predictions": EXACT},
    "nonfinite_check": {"flag": EXACT}, "adamw": {"params": EXACT, "m": EXACT, "v": EXACT, "half": EXACT},
    "layernorm_forward": {"out": HALF_SUMS, "mean": FLOAT_SUMS, "rstd": FLOAT_SUMS},
    "residual_layernorm_forward": {"residual": EXACT, "out": HALF_SUMS, "mean": FLOAT_SUMS, "rstd": FLOAT_SUMS},
    "layernorm_backward": {"dinp": HALF_SUMS, "partials": FLOAT_SUMS},
    "layernorm_backward_weight": {"dweight": HALF_SUMS, "dbias": HALF_SUMS},
    "matmul_forward": {"out": HALF_SUMS}, "matmul_backward_input": {"dinp": HALF_SUMS},
    "matmul_forward_gelu": {"slope": HALF_SUMS, "out_gelu": HALF_SUMS},
    "matmul_backward_input_gelu": {"dinp": HALF_SUMS},
    "matmul_backward_weight": {"dweight": HALF_SUMS, "dbias": HALF_SUMS},
    "attention_forward": {"out": HALF_SUMS, "lse": FLOAT_SUMS}, "attention_backward": {"dqkv": HALF_SUMS},
    "gelu_forward": {"out": HALF_SUMS}, "gelu_backward": {"dinp": EXACT},
    "crossentropy_forward": {"losses": FLOAT_SUMS}, "crossentropy_backward": {"dlogits": HALF_SUMS},
    "crossentropy_forward_backward": {"losses": FLOAT_SUMS, "dlogits": HALF_SUMS},
    "matmul_forward_stats": {"out": HALF_SUMS, "stats": FLOAT_SUMS},
    "crossentropy_forward_backward_stats": {"losses": FLOAT_SUMS, "dlogits": HALF_SUMS},
}


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    out = tmp_path_factory.mktemp("driver") / "driver"
    sources = [p for p in sorted(HOST_DIR.glob("*.c")) if p.name != "main.c"] + [DRIVER_SOURCE]
    compile_program(host_machine(), sources, out, include_dirs=[HOST_DIR])
    return out


def _half(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float16).ravel()


def _case(kernel: str, rng) -> tuple[dict, dict]:
    """(arrays by parameter name, scalars by name) of one random launch."""
    if kernel == "encoder_forward":
        return {"out": np.zeros(N * C, np.float16), "tokens": rng.integers(0, VP, N).astype(np.int32),
                "wte": _half(rng, VP, C), "wpe": _half(rng, T, C)}, {"B": B, "T": T, "C": C, "Vp": VP}
    if kernel == "encoder_sort":
        tokens = rng.integers(0, 6, N).astype(np.int32)  # repeated tokens: their positions keep their order
        tokens[-1] = VP - 1
        return {"order": np.full(N, -1, np.int32), "first": np.full(VP + 1, -1, np.int32), "tokens": tokens}, \
            {"N": N, "Vp": VP}
    if kernel == "encoder_backward":
        tokens = rng.integers(0, 6, N).astype(np.int32)  # repeated tokens: the scatter-sum's order matters
        order, first = np.zeros(N, np.int32), np.zeros(VP + 1, np.int32)
        cpu.encoder_sort(order, first, tokens, N, VP)
        return {"dwte": _half(rng, VP, C), "dwpe": _half(rng, T, C), "dout": _half(rng, B, T, C),
                "order": order, "first": first}, {"B": B, "T": T, "C": C, "Vp": VP}
    if kernel == "layernorm_forward":
        return {"out": np.zeros(N * C, np.float16), "mean": np.zeros(N, np.float32), "rstd": np.zeros(N, np.float32),
                "inp": _half(rng, N, C, scale=3.0) + np.float16(0.5), "weight": _half(rng, C), "bias": _half(rng, C)}, \
            {"N": N, "C": C}
    if kernel == "residual_layernorm_forward":
        return {"residual": np.zeros(N * C, np.float16), "out": np.zeros(N * C, np.float16),
                "mean": np.zeros(N, np.float32), "rstd": np.zeros(N, np.float32),
                "inp1": _half(rng, N, C, scale=2.0) + np.float16(0.5), "inp2": _half(rng, N, C, scale=2.0),
                "weight": _half(rng, C), "bias": _half(rng, C)}, {"N": N, "C": C}
    if kernel == "layernorm_backward":
        x = _half(rng, N, C)
        xf = x.astype(np.float32).reshape(N, C)
        mean = xf.mean(axis=1)
        rstd = (1 / np.sqrt(((xf - mean[:, None]) ** 2).mean(axis=1) + np.float32(1e-5))).astype(np.float32)
        return {"dinp": _half(rng, N, C), "partials": np.full(layernorm_backward_blocks(N) * 2 * C, np.nan, np.float32),
                "dout": _half(rng, N, C), "inp": x, "weight": _half(rng, C), "mean": mean, "rstd": rstd}, \
            {"N": N, "C": C}
    if kernel == "layernorm_backward_weight":
        n = 6000  # the most blocks (1024), of 6 rows: partials of several rows each
        return {"dweight": np.zeros(C, np.float16), "dbias": np.zeros(C, np.float16),
                "partials": (rng.standard_normal(layernorm_backward_blocks(n) * 2 * C) * 4).astype(np.float32)}, \
            {"N": n, "C": C}
    rows, width, out_width = 18, 40, 72  # not multiples of the C kernels' 4-row, 32-column tiles
    if kernel == "matmul_forward":
        return {"out": np.zeros(rows * out_width, np.float16), "inp": _half(rng, rows, width),
                "weight": _half(rng, out_width, width, scale=0.2), "bias": _half(rng, out_width)}, \
            {"N": rows, "C": width, "OC": out_width}
    if kernel == "matmul_forward_gelu":
        return {"slope": np.zeros(rows * out_width, np.float16), "out_gelu": np.zeros(rows * out_width, np.float16),
                "inp": _half(rng, rows, width), "weight": _half(rng, out_width, width, scale=0.2),
                "bias": _half(rng, out_width)}, {"N": rows, "C": width, "OC": out_width}
    if kernel == "matmul_forward_stats":
        # values that are multiples of 1/32 below 2^6 in every sum: out is exact in any order, so the stats of C and
        # numpy are of the same fp16 values; parts of 16 columns over V = 37 of 72: one cut by V, two empty
        inp = (rng.integers(-4, 5, (rows, width)) / 4).astype(np.float16).ravel()
        weight = (rng.integers(-4, 5, (out_width, width)) / 8).astype(np.float16).ravel()
        return {"out": np.zeros(rows * out_width, np.float16), "stats": np.full(rows * 5 * 2, np.nan, np.float32),
                "inp": inp, "weight": weight}, {"N": rows, "C": width, "OC": out_width, "V": 37, "width": 16}
    if kernel == "matmul_backward_input":
        return {"dinp": np.zeros(rows * width, np.float16), "dout": _half(rng, rows, out_width),
                "weight": _half(rng, out_width, width, scale=0.2), "tile_counter": np.zeros(1, np.int32)}, \
            {"N": rows, "C": width, "OC": out_width}
    if kernel == "matmul_backward_input_gelu":
        return {"dinp": np.zeros(rows * width, np.float16), "dout": _half(rng, rows, out_width),
                "weight": _half(rng, out_width, width, scale=0.2), "slope": _half(rng, rows, width),
                "tile_counter": np.zeros(1, np.int32)}, {"N": rows, "C": width, "OC": out_width}
    if kernel == "matmul_backward_weight":
        return {"dweight": _half(rng, out_width, width), "dbias": np.zeros(out_width, np.float16),
                "dout": _half(rng, rows, out_width), "inp": _half(rng, rows, width)}, \
            {"N": rows, "C": width, "OC": out_width, "accumulate": 1}
    if kernel in ("attention_forward", "attention_backward"):
        qkv = _half(rng, B, T, 3 * C)
        out, lse = np.zeros(N * C, np.float16), np.zeros(B * NH * T, np.float32)
        cpu.attention_forward(out, lse, qkv, B, T, C, NH)
        if kernel == "attention_forward":
            return {"out": np.zeros_like(out), "lse": np.zeros_like(lse), "qkv": qkv}, {"B": B, "T": T, "C": C,
                    "NH": NH}
        return {"dqkv": np.zeros(N * 3 * C, np.float16), "dout": _half(rng, B, T, C), "qkv": qkv, "out": out,
                "lse": lse}, {"B": B, "T": T, "C": C, "NH": NH}
    if kernel in ("gelu_forward", "gelu_backward", "residual_forward"):
        n = 5000
        x = _half(rng, n, scale=3.0)
        if kernel == "gelu_forward":
            return {"out": np.zeros(n, np.float16), "inp": x}, {"N": n}
        if kernel == "gelu_backward":
            return {"dinp": np.zeros(n, np.float16), "slope": _half(rng, n), "dout": x}, {"N": n}
        return {"out": np.zeros(n, np.float16), "inp1": x, "inp2": _half(rng, n)}, {"N": n}
    logits = _half(rng, N, VP, scale=2.0)
    targets = rng.integers(0, V, N).astype(np.int32)
    if kernel == "crossentropy_forward":
        return {"losses": np.zeros(N, np.float32), "logits": logits, "targets": targets}, {"N": N, "V": V, "Vp": VP}
    if kernel == "crossentropy_backward":
        return {"dlogits": _half(rng, N, VP), "logits": logits, "targets": targets}, \
            {"N": N, "V": V, "Vp": VP, "scale": np.float32(1024 / N)}
    if kernel == "crossentropy_forward_backward":
        return {"losses": np.zeros(N, np.float32), "dlogits": _half(rng, N, VP), "logits": logits,
                "targets": targets}, {"N": N, "V": V, "Vp": VP, "scale": np.float32(1024 / N)}
    if kernel == "crossentropy_forward_backward_stats":
        parts = 16  # 3 parts of the 40 columns, the last cut by V = 37
        stats = reference.softmax_parts(logits.astype(np.float32).reshape(N, VP), V, parts).ravel()
        return {"losses": np.zeros(N, np.float32), "dlogits": _half(rng, N, VP), "logits": logits, "stats": stats,
                "targets": targets}, {"N": N, "V": V, "Vp": VP, "width": parts, "scale": np.float32(1024 / N)}
    if kernel == "argmax_forward":
        logits[3 * VP + 5] = logits[3 * VP + 9] = np.float16(60000)  # a tie: the first index wins
        return {"predictions": np.full(N, -1, np.int32), "logits": logits}, {"N": N, "V": V, "Vp": VP}
    n = 3000
    if kernel == "nonfinite_check":
        grads = _half(rng, n)
        grads[1234] = np.float16(np.inf)
        return {"flag": np.zeros(1, np.int32), "grads": grads}, {"N": n}
    if kernel == "adamw":
        return {"params": rng.standard_normal(n).astype(np.float32),
                "m": rng.standard_normal(n).astype(np.float32) * 0.1,
                "v": rng.random(n).astype(np.float32) * 0.01, "grads": _half(rng, n), "half": np.zeros(n, np.float16),
                "flag": np.zeros(1, np.int32)}, \
            {"N": n, "beta1": np.float32(0.9), "beta2": np.float32(0.95), "decay": np.float32(3e-4),
             "step_size": np.float32(2.7e-3), "eps": np.float32(1e-5)}
    assert kernel == "cast_half"
    x = rng.standard_normal(n).astype(np.float32) * 100
    x[:4] = [65519.0, 65520.0, 6e-8, -2.9802322e-08]  # round-to-even at the top, subnormals at the bottom
    return {"out": np.zeros(n, np.float16), "inp": x}, {"N": n}


def _scalar_words(kernel: str, scalars: dict) -> bytes:
    words = []
    for name, kind in KERNELS[kernel]:
        if kind in PTR_KINDS:
            continue
        value = scalars[name]
        words.append(np.float32(value).tobytes() if kind == "f32" else np.array(value,
                "<u4" if kind == "u32" else "<i4").tobytes())
    return b"".join(words)


def _run_driver(driver, directory: Path, kernel: str, arrays: dict, scalars: dict, runs: int, threads: int,
                aliases: dict | None = None) -> list:
    """Each run's outputs; aliases: pointer -> the pointer of `arrays` whose buffer it shares (in place)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "kernel.txt").write_text(kernel + "\n")
    (directory / "scalars.bin").write_bytes(_scalar_words(kernel, scalars))
    for name, array in arrays.items():
        (directory / f"{name}.bin").write_bytes(array.tobytes())
    for name, target in (aliases or {}).items():
        (directory / f"{name}.alias").write_text(target + "\n")
        arrays = arrays | {name: arrays[target]}
    command = [*(driver if isinstance(driver, list) else [str(driver)]), str(directory), str(runs), str(threads)]
    run = subprocess.run(command, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    return [{name: np.frombuffer((directory / f"{name}.{r}.out").read_bytes(), arrays[name].dtype)
             for name in arrays} for r in range(runs)]


def test_the_c_catalog_is_the_python_catalog(driver):
    printed = subprocess.run([str(driver), "--catalog"], capture_output=True, text=True, check=True).stdout.split("\n")
    expected = []
    for kernel in (KERNEL_NAMES[i] for i in sorted(KERNEL_NAMES)):  # in the stable ids of the launch table
        layout, size = param_layout(kernel)
        expected += [f"{kernel} {name} {kind} {offset} {ACCESS[kernel].get(name, '-')}"
                     for name, kind, offset in layout]
        expected.append(f"{kernel} - block {size}")
    assert printed[:-1] == expected


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_kernel_matches_the_numpy_reference(driver, tmp_path, kernel):
    rng = np.random.default_rng(sorted(KERNELS).index(kernel))
    arrays, scalars = _case(kernel, rng)
    expected = {name: array.copy() for name, array in arrays.items()}
    with np.errstate(over="ignore"):  # cast_half's 65520 rounds to infinity, as it should
        getattr(cpu, kernel)(**expected, **scalars)
    twice = _run_driver(driver, tmp_path / "two", kernel, arrays, scalars, runs=2, threads=2)
    once = _run_driver(driver, tmp_path / "one", kernel, arrays, scalars, runs=1, threads=1)
    three = _run_driver(driver, tmp_path / "three", kernel, arrays, scalars, runs=1, threads=3)
    got = twice[0]
    for name in arrays:
        for other in (twice[1], once[0], three[0]):
            assert other[name].tobytes() == got[name].tobytes(), f"{kernel}.{name} depends on the run or threads"
    for name, array in arrays.items():
        if name not in TOLERANCE[kernel]:
            assert got[name].tobytes() == array.tobytes(), f"{kernel} changed its input {name}"
            continue
        c, ref = got[name].astype(np.float64), expected[name].astype(np.float64)
        assert np.array_equal(np.isfinite(c), np.isfinite(ref)), f"{kernel}.{name}: finiteness differs"
        finite = np.isfinite(ref)
        c, ref = c[finite], ref[finite]
        diff = float(np.abs(c - ref).max()) if c.size else 0.0
        relative, of_max = TOLERANCE[kernel][name]
        allowed = relative * np.abs(ref) + of_max * (float(np.abs(ref).max()) if ref.size else 0.0)
        print(f"{kernel}.{name}: max |C - numpy| = {diff:.3g} over {ref.size} values "
              f"(tolerance {relative:g} x |value| + {of_max:g} x max |value|)")
        assert (np.abs(c - ref) <= allowed).all(), f"{kernel}.{name}: max difference {diff:.3g} is over tolerance"


def test_adamw_skips_a_flagged_step_and_matmul_takes_null_bias(driver, tmp_path):
    rng = np.random.default_rng(99)
    arrays, scalars = _case("adamw", rng)
    arrays["flag"][0] = 1
    got = _run_driver(driver, tmp_path / "adamw", "adamw", arrays, scalars, runs=1, threads=2)[0]
    for name in arrays:
        assert got[name].tobytes() == arrays[name].tobytes()
    arrays, scalars = _case("matmul_forward", rng)
    del arrays["bias"]
    expected = {name: array.copy() for name, array in arrays.items()}
    cpu.matmul_forward(**expected, bias=None, **scalars)
    got = _run_driver(driver, tmp_path / "matmul", "matmul_forward", arrays, scalars, runs=1, threads=2)[0]
    assert np.allclose(got["out"].astype(np.float32), expected["out"].astype(np.float32), rtol=2 ** -10, atol=1e-3)
    arrays, scalars = _case("matmul_backward_weight", rng)
    del arrays["dbias"]
    scalars["accumulate"] = 0
    expected = {name: array.copy() for name, array in arrays.items()}
    cpu.matmul_backward_weight(**expected, dbias=None, **scalars)
    got = _run_driver(driver, tmp_path / "weight", "matmul_backward_weight", arrays, scalars, runs=1, threads=2)[0]
    assert np.allclose(got["dweight"].astype(np.float32), expected["dweight"].astype(np.float32), rtol=2 ** -10,
                       atol=1e-2)


def test_a_buffer_outside_the_arena_is_refused(driver, tmp_path):
    rng = np.random.default_rng(7)
    arrays, scalars = _case("gelu_forward", rng)
    arrays["inp"] = arrays["inp"][:100]  # N says 5000 elements: the buffer is too short
    directory = tmp_path / "short"
    directory.mkdir()
    (directory / "kernel.txt").write_text("gelu_forward\n")
    (directory / "scalars.bin").write_bytes(_scalar_words("gelu_forward", scalars))
    for name, array in arrays.items():
        (directory / f"{name}.bin").write_bytes(array.tobytes())
    run = subprocess.run([str(driver), str(directory), "1", "2"], capture_output=True, text=True)
    assert run.returncode == 2
    assert "outside the arena" in run.stderr and run.stderr.count("\n") == 1


@pytest.fixture(scope="module")
def aarch64_driver(tmp_path_factory):
    if QEMU is None or not Path(SYSROOT).is_dir():
        pytest.skip("qemu-aarch64 or the AArch64 C library is not installed (apt-get install qemu-user "
                    "libc6-arm64-cross)")
    out = tmp_path_factory.mktemp("aarch64") / "driver"
    sources = [p for p in sorted(HOST_DIR.glob("*.c")) if p.name != "main.c"] + [DRIVER_SOURCE]
    compile_program("aarch64", sources, out, include_dirs=[HOST_DIR])
    return out


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_the_aarch64_build_computes_the_same_bits(driver, aarch64_driver, tmp_path, kernel):
    """The same kernel built for AArch64 and run under qemu-user gives the x86-64 build's bits."""
    rng = np.random.default_rng(sorted(KERNELS).index(kernel))
    arrays, scalars = _case(kernel, rng)
    native = _run_driver(driver, tmp_path / "x86_64", kernel, arrays, scalars, runs=1, threads=2)[0]
    emulated = _run_driver([QEMU, "-L", SYSROOT, str(aarch64_driver)], tmp_path / "aarch64", kernel, arrays, scalars,
                           runs=1, threads=2)[0]
    for name in arrays:
        assert emulated[name].tobytes() == native[name].tobytes(), f"{kernel}.{name} differs between machines"


def test_every_half_converts_exactly(driver, tmp_path):
    """All 65536 binary16 values through half -> float -> half (residual_forward with +0), as numpy does it:
    subnormals, infinities and NaNs included (a NaN stays a NaN of its sign)."""
    halves = np.arange(65536, dtype=np.uint16).view(np.float16)
    arrays = {"out": np.zeros(65536, np.float16), "inp1": halves.copy(), "inp2": np.zeros(65536, np.float16)}
    got = _run_driver(driver, tmp_path, "residual_forward", arrays, {"N": 65536}, runs=1, threads=2)[0]["out"]
    with np.errstate(invalid="ignore"):  # the NaN inputs are the point
        expected = (halves.astype(np.float32) + np.float32(0)).astype(np.float16)
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(got), nan) and np.array_equal(np.signbit(got[nan]), np.signbit(expected[nan]))
    assert got[~nan].tobytes() == expected[~nan].tobytes()


def test_floats_round_to_the_nearest_even_half(driver, tmp_path):
    """cast_half on a million float bit patterns (every exponent, ties included) against numpy's astype."""
    rng = np.random.default_rng(11)
    bits = rng.integers(0, 2 ** 32, 1 << 20, dtype=np.uint64).astype(np.uint32)
    bits[:4096] = (np.arange(4096, dtype=np.uint32) << 13) | 0x33000000  # exact halfway cases near the subnormals
    floats = bits.view(np.float32)
    got = _run_driver(driver, tmp_path, "cast_half", {"out": np.zeros(floats.size, np.float16), "inp": floats},
                      {"N": floats.size}, runs=1, threads=2)[0]["out"]
    with np.errstate(over="ignore", invalid="ignore"):
        expected = floats.astype(np.float16)
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(got), nan)
    assert got[~nan].tobytes() == expected[~nan].tobytes()


def test_encoder_sort_groups_positions_by_token_in_order(driver, tmp_path):
    """encoder_sort on a skewed stream: each token's positions ascending, first[v] where they start."""
    rng = np.random.default_rng(7)
    n, Vp = 3000, 600
    tokens = rng.integers(0, Vp, n).astype(np.int32)
    tokens[rng.random(n) < 0.3] = 11
    arrays = {"order": np.full(n, -1, np.int32), "first": np.full(Vp + 1, -1, np.int32), "tokens": tokens}
    got = _run_driver(driver, tmp_path, "encoder_sort", arrays, {"N": n, "Vp": Vp}, runs=1, threads=2)[0]
    want_first = np.searchsorted(np.sort(tokens), np.arange(Vp + 1))
    assert got["first"].tolist() == want_first.tolist()
    assert got["order"].tolist() == sorted(range(n), key=lambda p: (tokens[p], p))


def test_encoder_backward_sums_in_the_devices_run_order(driver, tmp_path):
    """dwte's order (formats/geometry.py: encoder_run_length), written out here loop by loop: a row's positions in
    runs of ceil(n / 8), each run summed from +0 in position order, the runs' sums added in order, then the old
    row; the C kernel and the cpu device must both give exactly these bits."""
    rng = np.random.default_rng(40)
    b, t, c, Vp = 4, 70, 24, 600
    n = b * t
    tokens = rng.integers(0, 6, n).astype(np.int32)
    tokens[rng.random(n) < 0.5] = 3  # a frequent token: its sum crosses every run
    tokens[5] = 7  # a token held once: one run
    # small dout values, and in each channel of the frequent token's rows ten pairs of +16000 and -16000: its
    # exact sum stays small, while fp32 loses small values beside a running 16000 in one grouping and not in
    # another, so that the written-out order is told apart from plain position order (checked below)
    dout = rng.random((n, c)) * 0.01
    for channel in range(c):
        pairs = rng.permutation(np.flatnonzero(tokens == 3))[:20].reshape(10, 2)
        dout[pairs[:, 0], channel], dout[pairs[:, 1], channel] = 16000.0, -16000.0
    order, first = np.zeros(n, np.int32), np.zeros(Vp + 1, np.int32)
    cpu.encoder_sort(order, first, tokens, n, Vp)
    arrays = {"dwte": _half(rng, Vp, c, scale=0.01), "dwpe": _half(rng, t, c), "dout": dout.astype(np.float16).ravel(),
              "order": order, "first": first}
    scalars = {"B": b, "T": t, "C": c, "Vp": Vp}
    rows = arrays["dout"].astype(np.float32).reshape(n, c)
    want = arrays["dwte"].astype(np.float32).reshape(Vp, c).copy()
    for v in range(8):
        positions = [p for p in range(n) if tokens[p] == v]
        length = encoder_run_length(len(positions))
        total = np.zeros(c, np.float32)
        for start in range(0, len(positions), length):
            part = np.zeros(c, np.float32)
            for p in positions[start:start + length]:
                part += rows[p]
            total += part
        want[v] += total
    want = want.astype(np.float16).ravel()
    plain = np.zeros((Vp, c), np.float32)
    np.add.at(plain, tokens, rows)  # one sum a row from +0 in position order, then the old row
    plain += arrays["dwte"].astype(np.float32).reshape(Vp, c)
    order_matters = int((plain.astype(np.float16).ravel() != want).sum())
    print(f"{order_matters} values would differ in plain position order")
    assert order_matters > 0
    numpy_device = {name: array.copy() for name, array in arrays.items()}
    cpu.encoder_backward(**numpy_device, **scalars)
    c_kernel = _run_driver(driver, tmp_path, "encoder_backward", arrays, scalars, runs=1, threads=2)[0]
    for got in (numpy_device["dwte"], c_kernel["dwte"]):
        print(f"{int((got != want).sum())} of {want.size} dwte values differ from the written-out order")
        assert got.tobytes() == want.tobytes()


def test_the_c_lm_head_stats_are_matmul_forward_and_crossentropy(driver, tmp_path):
    """In C: matmul_forward_stats' out is matmul_forward's (null bias) bit for bit and its stats those of out's fp16
    values (float64 here), empty parts past V and a part cut by V included; crossentropy_forward_backward_stats fed
    with those stats gives crossentropy_forward_backward's losses and dlogits, in place (dlogits = logits) too."""
    rng = np.random.default_rng(24)
    rows, channels, OC, V, width = 12, 24, 40, 20, 8  # parts [16, 20) cut by V, [24, 32) and [32, 40) empty
    P = OC // width
    inp, weight = _half(rng, rows, channels), _half(rng, OC, channels, scale=0.5)
    scalars = {"N": rows, "C": channels, "OC": OC}
    plain = _run_driver(driver, tmp_path / "plain", "matmul_forward", {"out": np.zeros(rows * OC, np.float16),
                        "inp": inp, "weight": weight}, scalars, runs=1, threads=2)[0]["out"]
    fused = _run_driver(driver, tmp_path / "fused", "matmul_forward_stats",
                        {"out": np.zeros(rows * OC, np.float16), "stats": np.full(rows * P * 2, np.nan, np.float32),
                         "inp": inp, "weight": weight}, scalars | {"V": V, "width": width}, runs=1, threads=2)[0]
    assert fused["out"].tobytes() == plain.tobytes()
    stats, x = fused["stats"].reshape(rows, P, 2), plain.astype(np.float64).reshape(rows, OC)
    want = reference.softmax_parts(x, V, width)
    empty = np.arange(P) * width >= V
    assert empty.sum() == 2 and np.all(stats[:, empty, 0] == -np.inf) and np.all(stats[:, empty, 1] == 0.0)
    m_diff = float(np.abs(stats[:, ~empty, 0] - want[:, ~empty, 0]).max())
    s_diff = float((np.abs(stats[:, ~empty, 1] - want[:, ~empty, 1]) / want[:, ~empty, 1]).max())
    print(f"C matmul_forward_stats: max |m - float64| {m_diff:.3g} (tolerance 0), max relative |s - float64| "
          f"{s_diff:.3g} (tolerance 1e-5)")
    assert m_diff == 0.0 and s_diff <= 1e-5

    targets = rng.integers(0, V, rows).astype(np.int32)
    loss_scalars = {"N": rows, "V": V, "Vp": OC, "scale": np.float32(1024 / rows)}
    whole = _run_driver(driver, tmp_path / "whole", "crossentropy_forward_backward",
                        {"losses": np.zeros(rows, np.float32), "dlogits": np.zeros(rows * OC, np.float16),
                         "logits": plain, "targets": targets}, loss_scalars, runs=1, threads=2)[0]
    parts = _run_driver(driver, tmp_path / "parts", "crossentropy_forward_backward_stats",
                        {"losses": np.zeros(rows, np.float32), "dlogits": np.zeros(rows * OC, np.float16),
                         "logits": plain, "stats": fused["stats"], "targets": targets},
                        loss_scalars | {"width": width}, runs=1, threads=2)[0]
    in_place = _run_driver(driver, tmp_path / "in_place", "crossentropy_forward_backward_stats",
                           {"losses": np.zeros(rows, np.float32), "logits": plain, "stats": fused["stats"],
                            "targets": targets}, loss_scalars | {"width": width}, runs=1, threads=2,
                           aliases={"dlogits": "logits"})[0]
    assert in_place["losses"].tobytes() == parts["losses"].tobytes()
    assert in_place["dlogits"].tobytes() == parts["dlogits"].tobytes()
    loss, got = whole["losses"].astype(np.float64), parts["losses"].astype(np.float64)
    d, want_d = parts["dlogits"].astype(np.float64), whole["dlogits"].astype(np.float64)
    relative, of_max = FLOAT_SUMS
    print(f"C crossentropy_forward_backward_stats against crossentropy_forward_backward: max |loss diff| "
          f"{np.abs(got - loss).max():.3g} (tolerance {relative:g} x |value| + {of_max:g} x max |value|), max "
          f"|dlogits diff| {np.abs(d - want_d).max():.3g} (tolerance 2^-10 x |value| + 2^-12 x max |value|); in place: "
          f"the same bits")
    assert np.all(np.abs(got - loss) <= relative * np.abs(loss) + of_max * np.abs(loss).max())
    relative, of_max = HALF_SUMS
    assert np.all(np.abs(d - want_d) <= relative * np.abs(want_d) + of_max * np.abs(want_d).max())
    assert np.all(d.reshape(rows, OC)[:, V:] == 0)


@pytest.mark.parametrize("kernel, change, reason", [
    ("matmul_forward_stats", {"width": 0}, "matmul_forward_stats: width is 0"),
    ("matmul_forward_stats", {"V": 73}, "matmul_forward_stats: V is 73, not in 1..OC (72)"),
    ("crossentropy_forward_backward_stats", {"width": 0}, "crossentropy_forward_backward_stats: width is 0"),
    ("crossentropy_forward_backward_stats", {"width": -8}, "crossentropy_forward_backward_stats: width is -8"),
])
def test_the_stats_kernels_check_their_sizes(driver, tmp_path, kernel, change, reason):
    arrays, scalars = _case(kernel, np.random.default_rng(3))
    directory = tmp_path / "case"
    directory.mkdir()
    (directory / "kernel.txt").write_text(kernel + "\n")
    (directory / "scalars.bin").write_bytes(_scalar_words(kernel, scalars | change))
    for name, array in arrays.items():
        (directory / f"{name}.bin").write_bytes(array.tobytes())
    run = subprocess.run([str(driver), str(directory), "1", "2"], capture_output=True, text=True)
    assert run.returncode == 2 and reason in run.stderr, run.stderr
