"""The CUDA device on a real card: copies, memsets, relocated launches, the patched step word, driver
errors and the card check, on a tiny CUDA source compiled here by NVRTC with hand-built tables; then,
once the CUDA kernels and their realization exist, a few training steps against the cpu device."""
import struct
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from coppelius.errors import CoppeliusError
from coppelius.formats import tables
from coppelius.formats.kernels import KERNEL_IDS, PTR_KINDS, param_layout
from reference_host.sections import RunTables
from cuda_harness import CudaDevice, check_card

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]

# Two catalog kernels with their ABI signatures (f16 as raw 16-bit words: no cuda_fp16.h needed).
# adamw here is no optimizer: it adds step_size, so that the step word a launch saw can be read back,
# and writes its other scalars where they can be checked.
SOURCE = r"""
__device__ unsigned short to_half(float x) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
    return h;
}
extern "C" __global__ void cast_half(unsigned short* out, const float* inp, int N) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) out[i] = to_half(inp[i]);
}
extern "C" __global__ void adamw(float* params, float* m, float* v, const unsigned short* grads, unsigned short* half,
                                 const int* flag, int N, float beta1, float beta2, float decay, float step_size,
                                 float eps) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N || *flag) return;
    params[i] += step_size;
    m[i] = beta1 + beta2;
    v[i] = decay * eps;
    half[i] = to_half(params[i]);
}
"""
WRONG_ABI = r'extern "C" __global__ void cast_half(float* out, int N) { if (threadIdx.x < N) out[threadIdx.x] = 1; }'


def compile_cubin(source: str, arch: str) -> bytes:
    from cuda.bindings import nvrtc
    _, program = nvrtc.nvrtcCreateProgram(source.encode(), b"test.cu", 0, [], [])
    options = [f"--gpu-architecture={arch}".encode()]
    (result,) = nvrtc.nvrtcCompileProgram(program, len(options), options)
    if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, size = nvrtc.nvrtcGetProgramLogSize(program)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(program, log)
        raise AssertionError(log.decode())
    _, size = nvrtc.nvrtcGetCUBINSize(program)
    cubin = b" " * size
    nvrtc.nvrtcGetCUBIN(program, cubin)
    return cubin


@pytest.fixture(scope="module")
def cubin():
    device = CudaDevice()
    return compile_cubin(SOURCE, device.describe()["arch"])


class Tables:
    """Hand-built launch table, relocations, commands, ring and step words for one program."""
    PLANES = [0, 1 << 16, 2 << 16, 3 << 16, 4 << 16, 5 << 16, 6 << 16]  # arena offsets, 64 KiB apart
    BUFFERS = [0, 1 << 16, 2 << 16, 3 << 16]                            # host block offsets

    def __init__(self):
        self.launches, self.relocations, self.commands, self.ring, self.words = [], [], [], [], []
        self.blob = bytearray()
        self.piece = None

    def begin(self):
        self.piece = len(self.commands)

    def end(self) -> int:
        self.ring.append((len(self.ring), self.piece, len(self.commands) - self.piece))
        return len(self.ring) - 1

    def command(self, op, a=0, src=0, dst=0, src_offset=0, dst_offset=0, nbytes=0, value=0):
        self.commands.append((tables.OPS[op], a, src, dst, src_offset, dst_offset, nbytes, value, 0))

    def launch(self, kernel, n, shared=0, **args):
        """args: pointers as (plane, offset), scalars as numbers; n work items in blocks of 128."""
        layout, size = param_layout(kernel)
        start, block = len(self.blob), bytearray(size)
        first = len(self.relocations)
        for name, kind, offset in layout:
            if kind in PTR_KINDS:
                plane, plane_offset = args[name]
                struct.pack_into("<Q", block, offset, self.PLANES[plane] + plane_offset)
                self.relocations.append((start + offset, plane, plane_offset))
            else:
                struct.pack_into({"f32": "<f", "i32": "<i", "u32": "<I"}[kind], block, offset, args[name])
        self.blob += block
        index = len(self.launches)
        self.launches.append((KERNEL_IDS[kernel], (-(-n // 128), 1, 1), (128, 1, 1), shared, start, size, first,
                              len(self.relocations) - first, 1))
        if kernel == "adamw":
            fields = {name: offset for name, _, offset in layout}
            step, eps = start + fields["step_size"], start + fields["eps"]
            self.words.append((index, step, eps, struct.unpack_from("<I", self.blob, step)[0],
                               struct.unpack_from("<I", self.blob, eps)[0], 0))
        self.command("launch", a=index)
        return index

    def load(self, device, image, arena_bytes=7 << 16, host_bytes=4 << 16):
        device.allocate(arena_bytes, host_bytes)
        device.load_program(
            image, tables.pack("launches", np.array(self.launches, tables.LAUNCH), bytes(self.blob)),
            tables.pack("relocations", np.array(self.relocations, tables.RELOCATION)),
            tables.pack("commands", np.array(self.commands, tables.COMMAND)),
            tables.pack("ring", np.array(self.ring, tables.RING)),
            tables.pack("step_words", np.array(self.words, tables.STEP_WORD)), self.PLANES, self.BUFFERS)
        return device


@pytest.fixture
def device():
    d = CudaDevice()
    yield d
    d.close()


def host(device, buffer, dtype, count):
    return device.host[Tables.BUFFERS[buffer]:][:np.dtype(dtype).itemsize * count].view(dtype)


def test_memset_and_copies(device, cubin):
    t = Tables()
    t.begin()
    t.command("memset", dst=2, dst_offset=16, nbytes=1000, value=0xAB)
    t.command("h2d", src=0, dst=0, src_offset=8, dst_offset=24, nbytes=4096)
    t.command("d2d", src=0, dst=1, src_offset=24, dst_offset=40, nbytes=4096)
    t.command("d2h", src=1, dst=1, src_offset=40, dst_offset=0, nbytes=4096)
    t.command("d2h", src=2, dst=2, src_offset=0, dst_offset=0, nbytes=1032)
    ring = t.end()
    t.load(device, cubin)
    data = np.random.default_rng(1).integers(0, 256, 4104, dtype=np.uint8)
    host(device, 0, np.uint8, 4104)[:] = data
    host(device, 1, np.uint8, 4096)[:] = 7
    device.issue(ring)
    device.synchronize()
    assert (host(device, 1, np.uint8, 4096) == data[8:]).all()
    memset = host(device, 2, np.uint8, 1032)
    assert (memset[16:1016] == 0xAB).all()


def test_launch_with_relocated_pointers(device, cubin):
    n = 1000
    t = Tables()
    t.begin()
    t.command("h2d", src=0, dst=3, dst_offset=256, nbytes=4 * n)
    t.launch("cast_half", n, out=(4, 512), inp=(3, 256), N=n)
    t.command("d2h", src=4, dst=1, src_offset=512, nbytes=2 * n)
    ring = t.end()
    t.load(device, cubin)
    values = np.random.default_rng(2).standard_normal(n).astype(np.float32) * 100
    host(device, 0, np.float32, n)[:] = values
    device.issue(ring)
    device.synchronize()
    assert (host(device, 1, np.float16, n) == values.astype(np.float16)).all()


def adamw_program(n):
    t = Tables()
    t.begin()  # ring 0: the parameters and the flag
    t.command("h2d", src=0, dst=0, nbytes=4 * n)
    t.command("memset", dst=5, nbytes=4, value=0)
    init = t.end()
    t.begin()  # ring 1: the update, and its results back
    t.launch("adamw", n, params=(0, 0), m=(1, 0), v=(2, 0), grads=(3, 0), half=(4, 0), flag=(5, 0), N=n,
             beta1=0.9, beta2=0.95, decay=0.1, step_size=0.5, eps=2.0)
    t.command("d2h", src=0, dst=1, nbytes=4 * n)
    t.command("d2h", src=1, dst=2, nbytes=4)
    t.command("d2h", src=2, dst=2, dst_offset=4, nbytes=4)
    t.command("d2h", src=4, dst=3, nbytes=2 * n)
    update = t.end()
    t.begin()  # ring 2: a non-finite step: the flag set
    t.command("memset", dst=5, nbytes=1, value=1)
    flag = t.end()
    return t, init, update, flag


def test_patched_step_word_takes_effect_on_the_next_issue(device, cubin):
    n = 300
    t, init, update, flag = adamw_program(n)
    t.load(device, cubin)
    x = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    host(device, 0, np.float32, n)[:] = x
    device.issue(init)
    device.issue(update)  # the built-in word, 0.5
    device.synchronize()
    expected = x + np.float32(0.5)
    assert (host(device, 1, np.float32, n) == expected).all()
    assert host(device, 2, np.float32, 2)[0] == np.float32(0.9) + np.float32(0.95)
    assert host(device, 2, np.float32, 2)[1] == np.float32(0.1) * np.float32(2.0)
    assert (host(device, 3, np.float16, n) == expected.astype(np.float16)).all()
    # patches between issues, no synchronization: each launch keeps the word it was issued with
    for word in (0.25, 0.125, 2.0 ** -10):
        device.patch_step_size(np.float32(word), 0)
        device.issue(update)
        expected = expected + np.float32(word)
    device.synchronize()
    assert (host(device, 1, np.float32, n) == expected).all()
    device.issue(flag)  # a skipped step changes nothing
    device.patch_step_size(np.float32(7.0), 0)
    device.issue(update)
    device.synchronize()
    assert (host(device, 1, np.float32, n) == expected).all()


def test_large_spans_split_into_nodes(device, cubin):
    """Memsets and copies above the 1 GiB node span: every byte moved, the tail too."""
    n = (3 << 29) + 4096  # 1.5 GiB and a page
    t = Tables()
    t.PLANES = [0, n, 2 * n]
    t.begin()
    t.command("memset", dst=0, nbytes=n, value=0x5A)
    t.command("memset", dst=1, nbytes=n, value=0)
    t.command("d2d", src=0, dst=1, nbytes=n)
    t.command("d2h", src=1, dst=0, src_offset=n - 4096, nbytes=4096)
    t.command("d2h", src=1, dst=1, src_offset=(1 << 30) - 2048, nbytes=4096)
    ring = t.end()
    t.load(device, cubin, arena_bytes=3 * n)
    device.issue(ring)
    device.synchronize()
    assert (host(device, 0, np.uint8, 4096) == 0x5A).all() and (host(device, 1, np.uint8, 4096) == 0x5A).all()


def test_driver_error_is_one_line_naming_the_call(device, cubin):
    t = Tables()
    t.begin()
    t.command("memset", dst=0, nbytes=4, value=0)
    t.end()
    with pytest.raises(CoppeliusError) as error:
        t.load(device, b"\x7fELF not a cubin" * 8)
    message = str(error.value)
    assert "\n" not in message and "cuModuleLoadData" in message and "CUDA_ERROR_INVALID_IMAGE" in message


def test_driver_error_names_the_launch(cubin):
    t = Tables()
    t.begin()
    t.launch("cast_half", 1000, out=(4, 0), inp=(3, 0), N=1000)
    t.launch("cast_half", 1000, shared=1 << 20, out=(4, 0), inp=(3, 0), N=1000)  # more than any card has
    t.end()
    device = CudaDevice()
    try:
        with pytest.raises(CoppeliusError) as error:
            t.load(device, cubin)
    finally:
        device.close()
    message = str(error.value)
    assert "\n" not in message and "CUDA_ERROR_" in message and "launch 1 (cast_half)" in message, message


def test_kernel_abi_refused(device):
    t = Tables()
    t.begin()
    t.launch("cast_half", 10, out=(4, 0), inp=(3, 0), N=10)
    t.end()
    with pytest.raises(CoppeliusError, match="kernel cast_half has 2 parameters"):
        t.load(device, compile_cubin(WRONG_ABI, device.describe()["arch"]))


def test_card_check(device):
    description = device.describe()
    assert description["memory_bytes"] > 0 and description["arch"].startswith("sm_")
    check_card({"target": "this", "card": description["card"], "arch": description["arch"]}, description)
    profile = yaml.safe_load((ROOT / "config/targets/rtx3090.yaml").read_text())
    with pytest.raises(CoppeliusError) as error:
        check_card({"target": "rtx3090", "card": profile["card"], "arch": profile["arch"],
                    "memory_bytes": profile["memory_bytes"]}, description)
    message = str(error.value)
    assert "\n" not in message
    for part in (description["card"], description["arch"], str(description["memory_bytes"]), profile["card"]):
        assert part in message
    with pytest.raises(CoppeliusError, match="card check"):  # the right card, less memory than admitted
        check_card({"target": "this", "card": description["card"], "arch": description["arch"],
                    "memory_bytes": description["memory_bytes"] + 1}, description)


def test_close_frees_everything(cubin):
    t, init, update, _ = adamw_program(10)
    device = t.load(CudaDevice(), cubin)
    device.issue(init)
    device.issue(update)
    device.close()
    assert device.host.size == 0
    device.close()  # twice is harmless


# ---------------------------------------------------------------------------------------------- end to end
def test_training_steps_match_the_cpu_device_and_repeat_bitwise(tmp_path, gpu_target):
    from coppelius.config import resolve
    from coppelius.formats import tokens as token_file
    from coppelius.initialize import write_initial_checkpoint
    from coppelius.plan.build import build_plan
    from coppelius.realize import realize
    from coppelius.realize.tables import realized_tables
    from coppelius.runtime.cpu import CpuDevice
    from reference_host.interpreter import Run

    for rel in ("coppelius/kernels/cuda/kernels.cu", "coppelius/realize/nvrtc.py"):
        if not (ROOT / rel).exists():
            pytest.skip(f"{rel} is not written yet: no CUDA realization to run")
    defaults = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    cfg = resolve(defaults | {"target": gpu_target, "model": "tiny", "batch": 4, "steps": 4, "interval": 2,
                              "eval_contexts": 1, "corpus": str(ROOT / "coppelius")})
    plan = build_plan(cfg)
    try:
        realization = realize(plan, cfg.target)
    except CoppeliusError as e:
        if "not realized yet" in str(e):
            pytest.skip(f"realize: {e}")
        raise
    sections = {**realization, **realized_tables(realization)}
    program = SimpleNamespace(path=tmp_path / "host.elf", plan=plan, sections=sections, sha256="0" * 64,
                              tables=RunTables(sections, "host.elf"),
                              machine="x86_64", certificate={"step_horizon": 1 << 53},
                              identity={"target": gpu_target, "card": cfg.target["card"], "arch": cfg.target["arch"],
                                        "plan_sha256": "0" * 64})
    checkpoint_path = tmp_path / "init.ckpt"
    write_initial_checkpoint(str(checkpoint_path), cfg.model, cfg.learner, cfg.seed)
    n = plan["run"]["tokens_per_step"]
    text = b"".join(p.read_bytes() for p in sorted((ROOT / "coppelius").rglob("*.py")))
    tokens_path = tmp_path / "train.bin"
    token_file.write(tokens_path, np.frombuffer(text[:cfg.run.steps * n + 1], np.uint8).astype(np.uint16))

    class SynchronizedRun(Run):
        """The interpreter, synchronizing before every host-buffer access (what the CUDA device needs)."""
        def buffer(self, *args, **kwargs):
            self.device.synchronize()
            return super().buffer(*args, **kwargs)

    def train(device, name):
        try:
            if isinstance(device, CudaDevice):
                check_card(program.identity, device.describe())
            record = SynchronizedRun(program, device, str(checkpoint_path), str(tokens_path), str(tmp_path / name),
                                     "train", validation_path=str(tokens_path)).execute()
        finally:
            getattr(device, "close", lambda: None)()
        return [s["loss"] for s in record["steps"]] + [record["initial_loss"], record["final_loss"]]

    reference = train(CpuDevice(), "cpu")
    first, second = train(CudaDevice(), "gpu1"), train(CudaDevice(), "gpu2")
    print("cpu", reference, "\ngpu", first)
    assert first == second, "two GPU runs of the same program gave different losses"
    assert np.allclose(first, reference, rtol=1e-2, atol=0), (first, reference)
