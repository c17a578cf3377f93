"""Is there a CUDA device here? Asked without importing anything that needs one."""
import ctypes
import ctypes.util


def cuda_device_count() -> int:
    """Devices the CUDA driver sees; 0 where there is no driver or no device."""
    name = ctypes.util.find_library("cuda") or "libcuda.so.1"
    try:
        driver = ctypes.CDLL(name)
    except OSError:
        return 0
    count = ctypes.c_int(0)
    if driver.cuInit(0) != 0 or driver.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0
    return count.value
