"""Is there a CUDA device here? Asked without importing anything that needs one."""
import ctypes
import ctypes.util


def _driver():
    """The CUDA driver library, or None where it cannot be loaded."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("cuda") or "libcuda.so.1")
    except OSError:
        return None


def cuda_device_count() -> int:
    """Devices the CUDA driver sees; 0 where there is no driver or no device."""
    driver, count = _driver(), ctypes.c_int(0)
    if driver is None or driver.cuInit(0) != 0 or driver.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0
    return count.value


def cuda_card_name() -> str | None:
    """Device 0's name as the driver reports it (cuDeviceGetName); None where there is no device."""
    if cuda_device_count() == 0:
        return None
    driver, device, name = _driver(), ctypes.c_int(0), ctypes.create_string_buffer(256)
    if driver.cuDeviceGet(ctypes.byref(device), 0) != 0 or driver.cuDeviceGetName(name, 255, device) != 0:
        return None
    return name.value.decode()


def card_target(card: str | None = None) -> str | None:
    """The target (config/targets/NAME.yaml) whose card is `card`, by default device 0's: the GPU tests and
    benchmarks build for it. None where there is no device or no profile names it."""
    from coppelius.config import TARGETS_DIR, target_profile
    card = card or cuda_card_name()
    names = sorted(path.stem for path in TARGETS_DIR.glob("*.yaml"))
    return next((name for name in names if card is not None and target_profile(name)["card"] == card), None)
