"""Compatibility checks: the card profile (config/targets/NAME.yaml) supplies what the program needs:
its arch, every launch's registers, shared memory and threads per block, the arena's bytes, and
the driver branch and unified addressing.

Per-kernel demands come from the realization's kernel_info (for GPU targets read from the cubins
by the realize stage: registers, static shared bytes, max threads per block, parameter bytes); the
launch geometry and dynamic shared bytes from the launch table.
"""
import json

from ..errors import CoppeliusError
from ..formats.cubin import read_cubin
from ..formats.kernels import param_layout
from .common import KERNEL_NAMES, Realized, Refusal

BLOCK_MAX = (1024, 1024, 64)              # CUDA's block dimension limits (every sm_xx)
GRID_MAX = ((1 << 31) - 1, 65535, 65535)  # and grid dimension limits
PARAM_LIMIT = 4096                        # bytes of by-value kernel parameters every driver takes
REGISTER_UNIT, WARP = 8, 32               # registers are allocated per warp in units of 8 per thread
# The oldest driver branch that runs each arch's cubins, and that loads cubins of each CUDA major.
ARCH_DRIVER = {"sm_80": 450, "sm_86": 455, "sm_87": 510, "sm_89": 520, "sm_90": 520, "sm_100": 570,
               "sm_103": 575, "sm_120": 570, "sm_121": 580}
TOOLKIT_DRIVER = {11: 450, 12: 525, 13: 580}


def kernel_info(realization: dict) -> dict:
    try:
        info = json.loads(realization["kernel_info"])
    except (KeyError, ValueError) as e:
        raise Refusal(f"the realization's kernel_info is missing or not JSON ({e})") from None
    if not isinstance(info, dict) or info.get("format") != "coppelius-kernel-info" or \
            not isinstance(info.get("kernels"), dict):
        raise Refusal("the realization's kernel_info is not a coppelius-kernel-info record; rebuild it")
    return info


def _gpu(profile: dict) -> bool:
    return profile["arch"] != "numpy"


# ---------------------------------------------------------------------------- the cubin itself
def cubin_facts(image: bytes) -> tuple[str, dict] | None:
    """(arch, {kernel: {registers, shared_bytes, max_threads, ...}}) re-read from the cubin image
    admission certifies; None when the image is not an ELF (the cpu manifest)."""
    if image[:4] != b"\x7fELF":
        return None
    try:
        return read_cubin(image)
    except CoppeliusError as error:
        raise Refusal(f"the program image: {error}") from None


# ---------------------------------------------------------------------------- card-arch
def check_arch(plan, realization, realized, profile):
    arch = profile["arch"]
    if plan["target"]["arch"] != arch:
        raise Refusal(f"the plan was built for arch {plan['target']['arch']} (target {plan['target']['name']}); "
                      f"the card {profile['card']} is {arch}")
    info = kernel_info(realization)
    if info.get("arch") != arch:
        raise Refusal(f"the kernels were realized for arch {info.get('arch')}; the card {profile['card']} is {arch}")
    image = realization.get("image", b"")
    cubin = cubin_facts(image)
    if cubin is not None and cubin[0] != arch:
        raise Refusal(f"the program image is a cubin for {cubin[0]}; the card {profile['card']} is {arch}")
    if image[:1] == b"{":
        try:
            built = json.loads(image).get("arch")
        except ValueError:
            raise Refusal("the program image starts as JSON but is not") from None
        if built != arch:
            raise Refusal(f"the program image is for arch {built}; the card {profile['card']} is {arch}")
    return f"plan, kernels{', cubin' if cubin else ''} and card are all {arch}"


# ---------------------------------------------------------------------------- card-kernels
def check_kernels(plan, realization, realized, profile):
    """Every launch fits the card and its kernel: threads, registers, shared memory, parameters."""
    info, r = kernel_info(realization)["kernels"], Realized(plan, realization)
    gpu = _gpu(profile)
    cubin = cubin_facts(realization.get("image", b""))
    used = sorted({KERNEL_NAMES[int(l["kernel"])] for l in r.launches if int(l["kernel"]) in KERNEL_NAMES})
    for kernel in used:
        k = info.get(kernel)
        if not isinstance(k, dict) or any(not isinstance(k.get(f), int) or k.get(f) < 0
                                          for f in ("registers", "shared_bytes", "max_threads", "param_bytes")):
            raise Refusal(f"kernel {kernel}: kernel_info gives no registers/shared_bytes/max_threads/param_bytes "
                          f"({k!r})")
        size = param_layout(kernel)[1]
        if k["param_bytes"] != size or size > PARAM_LIMIT:
            raise Refusal(f"kernel {kernel}: the realized kernel takes {k['param_bytes']} parameter bytes; "
                          f"the catalog's ABI is {size} (at most {PARAM_LIMIT})")
        if cubin is not None:
            found = cubin[1].get(kernel)
            if found is None:
                raise Refusal(f"kernel {kernel}: the cubin image defines no such kernel")
            for field in ("registers", "shared_bytes", "max_threads"):
                value = found[field]
                if k[field] != value:
                    raise Refusal(f"kernel {kernel}: kernel_info says {field} {k[field]}, the cubin says {value}")
    if not gpu:
        return (f"{len(r.launches)} launches of {len(used)} kernels, each in kernel_info with the catalog's "
                f"parameter bytes; the numpy device runs no blocks, so no thread, register or shared limits apply")
    worst = {"threads": 0, "registers": 0, "shared": 0}
    for i, l in enumerate(r.launches):
        kernel = KERNEL_NAMES[int(l["kernel"])]
        k = info[kernel]
        grid, block, dynamic = [int(g) for g in l["grid"]], [int(b) for b in l["block"]], int(l["shared"])
        where = f"launch {i} ({kernel})"
        if min(grid + block) < 1 or any(b > m for b, m in zip(block, BLOCK_MAX)) or \
                any(g > m for g, m in zip(grid, GRID_MAX)):
            raise Refusal(f"{where}: grid {grid} block {block} outside CUDA's limits (block <= {list(BLOCK_MAX)}, "
                          f"grid <= {list(GRID_MAX)}, every dimension >= 1)")
        threads = block[0] * block[1] * block[2]
        if threads > profile["threads_per_block"]:
            raise Refusal(f"{where}: {threads} threads per block; {profile['card']} takes "
                          f"{profile['threads_per_block']}")
        if k["max_threads"] and threads > k["max_threads"]:
            raise Refusal(f"{where}: {threads} threads per block; the compiled kernel takes at most {k['max_threads']}")
        per_thread = -(-k["registers"] // REGISTER_UNIT) * REGISTER_UNIT
        units = per_thread * -(-threads // WARP) * WARP if k["registers"] else 0
        if units > profile["registers_per_block"]:
            raise Refusal(f"{where}: {k['registers']} registers x {threads} threads = {units} registers per block "
                          f"(allocated per warp in units of {REGISTER_UNIT}); {profile['card']} has "
                          f"{profile['registers_per_block']}")
        shared = k["shared_bytes"] + dynamic
        if shared > profile["shared_bytes_per_block"]:
            raise Refusal(f"{where}: {k['shared_bytes']} static + {dynamic} dynamic = {shared} shared bytes per block; "
                          f"{profile['card']} has {profile['shared_bytes_per_block']}")
        worst = {"threads": max(worst["threads"], threads), "registers": max(worst["registers"], units),
                 "shared": max(worst["shared"], shared)}
    return (f"{len(r.launches)} launches of {len(used)} kernels fit{' (checked against the cubin)' if cubin else ''}: "
            f"at most {worst['threads']} threads, {worst['registers']} registers and {worst['shared']} shared bytes "
            f"per block")


# ---------------------------------------------------------------------------- card-memory
def check_memory(plan, realization, realized, profile):
    need, host, have = plan["arena"]["bytes"], plan["host"]["bytes"], profile["memory_bytes"]
    system = "system" in profile["memory_kinds"]
    total = need + (host if system else 0)
    if total > have:
        what = (f"arena needs {need:,} bytes + the {host:,}-byte pinned host block (the same system memory) = "
                f"{total:,} bytes" if system else f"arena needs {need:,} bytes")
        raise Refusal(f"{what}; {profile['card']} has {have:,} available ({total - have:,} too many): lower batch "
                      f"or use a larger card")
    if plan["target"]["memory_kinds"] != profile["memory_kinds"]:
        raise Refusal(f"the plan's arena is {plan['target']['memory_kinds']} memory; {profile['card']} offers "
                      f"{profile['memory_kinds']}")
    alignment = profile["alignment"]
    if plan["arena"]["alignment"] != alignment:
        raise Refusal(f"the plan aligns planes to {plan['arena']['alignment']} bytes; {profile['card']} needs "
                      f"{alignment}")
    for p in plan["arena"]["planes"]:
        if p["offset"] % alignment:
            raise Refusal(f"plane {p['name']} at offset {p['offset']} is not {alignment}-byte aligned")
    return f"arena {need:,}{f' + host {host:,}' if system else ''} of {have:,} bytes"


# ---------------------------------------------------------------------------- card-driver
def toolkit_major(info: dict) -> int | None:
    """The CUDA major version NVRTC compiled the kernels with: kernel_info's "nvrtc", "MAJOR.MINOR"
    (realize/nvrtc.py: gpu_kernel_info); None where it is absent (the cpu image)."""
    major = str(info.get("nvrtc", "")).split(".")[0]
    return int(major) if major.isdigit() else None


def check_driver(plan, realization, realized, profile):
    branch, unified = profile.get("driver_branch"), profile.get("unified_addressing")
    if not _gpu(profile):
        if branch is not None:
            raise Refusal(f"the numpy reference device needs no driver; the profile {profile['name']} names driver "
                          f"branch {branch}")
        return "numpy reference: no driver, no unified addressing needed"
    arch = profile["arch"]
    if arch not in ARCH_DRIVER:
        raise Refusal(f"arch {arch} has no known oldest driver branch (known: {', '.join(sorted(ARCH_DRIVER))})")
    major = toolkit_major(kernel_info(realization))
    need = max(ARCH_DRIVER[arch], TOOLKIT_DRIVER.get(major, 0) if major else 0)
    if not isinstance(branch, int) or branch < need:
        why = f"{arch} cubins" + (f" built by CUDA {major}" if major else "")
        raise Refusal(f"driver branch {branch} on {profile['card']}; {why} need branch {need} or later")
    if unified is not True:
        raise Refusal(f"{profile['card']}: unified addressing is {unified}; the CUDA device maps the pinned host block "
                      f"and the arena into one address space" +
                      (" and the arena is system memory" if "system" in profile["memory_kinds"] else "") +
                      ": it must be true")
    return f"driver branch {branch} >= {need} for {arch}; unified addressing"
