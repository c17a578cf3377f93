"""The card's L2-to-SM read rate against how many SMs read (forty-fifth session): a kernel of one 1024-thread block
an SM (96 KiB of shared memory asked, so never two) reads its own 128 KiB region ROUNDS times (every region resident
in L2 after the first pass), 16-byte ld.global.cg (L1 bypassed), eight coalesced loads in flight a thread; G blocks
for G = all SMs .. 16. Beside bench/experiments/matmul_sm_scaling.py: if the matmuls' L2 traffic at the full grid is
near what this reaches on every SM, they are bound by it.
    python bench/experiments/l2_bandwidth.py    (a CUDA card, cuda-bindings; from the root)"""
import ctypes
import sys
from pathlib import Path

import numpy as np
from cuda.bindings import driver

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "gpu")]
from coppelius.realize import nvrtc  # noqa: E402
from cuda_harness import check  # noqa: E402

SOURCE = r"""
#ifndef UNROLL
#define UNROLL 8
#endif
extern "C" __global__ void __launch_bounds__(1024, 1) l2_read(const uint4* __restrict__ buf, unsigned long long n16,
                                                              int rounds, unsigned* sink) {
    unsigned x = 0;
    const uint4* mine = buf + (unsigned long long)blockIdx.x * n16;  // the block's own region, read `rounds` times
    for (int r = 0; r < rounds; ++r)
        for (unsigned c = 0; c + blockDim.x * UNROLL <= n16; c += blockDim.x * UNROLL) {  // each load coalesced
            unsigned v[4 * UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
                asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
                             : "=r"(v[4 * u]), "=r"(v[4 * u + 1]), "=r"(v[4 * u + 2]), "=r"(v[4 * u + 3])
                             : "l"(mine + c + u * blockDim.x + threadIdx.x));
#pragma unroll
            for (int u = 0; u < 4 * UNROLL; ++u) x ^= v[u];
        }
    if (x == 0x9e3779b9u) sink[0] = x;  // never, but the loads must be kept
}
"""
REGION, ROUNDS, SHARED = 128 << 10, 400, 96 * 1024  # a block's region: 132 of them 16.5 MiB


def main() -> None:
    ck = lambda result: check(result, "l2_bandwidth")  # noqa: E731
    attribute = driver.CUdevice_attribute
    ck(driver.cuInit(0))
    dev = ck(driver.cuDeviceGet(0))
    ck(driver.cuCtxSetCurrent(ck(driver.cuDevicePrimaryCtxRetain(dev))))
    major = ck(driver.cuDeviceGetAttribute(attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev))
    minor = ck(driver.cuDeviceGetAttribute(attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
    cubin, _ = nvrtc._compile(f"sm_{major}{minor}", SOURCE.encode(), ())
    module = ck(driver.cuModuleLoadData(cubin))
    fn = ck(driver.cuModuleGetFunction(module, b"l2_read"))
    ck(driver.cuFuncSetAttribute(fn, driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                 SHARED))
    sms = ck(driver.cuDeviceGetAttribute(attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev))
    buf, sink = ck(driver.cuMemAlloc(REGION * sms)), ck(driver.cuMemAlloc(16))
    ck(driver.cuMemsetD8(buf, 1, REGION * sms))
    args = [np.array([int(buf)], np.uint64), np.array([REGION // 16], np.uint64), np.array([ROUNDS], np.int32),
            np.array([int(sink)], np.uint64)]
    params = (ctypes.c_void_p * len(args))(*[a.ctypes.data for a in args])
    start, stop = ck(driver.cuEventCreate(0)), ck(driver.cuEventCreate(0))
    for g in (sms, 99, 66, 33, 16):
        launch = lambda: ck(driver.cuLaunchKernel(fn, g, 1, 1, 1024, 1, 1, SHARED, 0, ctypes.addressof(params), 0))
        launch()
        ck(driver.cuEventRecord(start, 0))
        for _ in range(5):
            launch()
        ck(driver.cuEventRecord(stop, 0))
        ck(driver.cuEventSynchronize(stop))
        ms = ck(driver.cuEventElapsedTime(start, stop)) / 5
        rate = REGION * g * ROUNDS / ms / 1e9
        print(f"G {g:3d}: {rate:6.2f} TB/s over the card, {rate / g * 1000:6.1f} GB/s an SM", flush=True)


if __name__ == "__main__":
    main()
