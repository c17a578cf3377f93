"""The Python CUDA device, a test harness: the driver API through cuda-bindings, every submission
replayed as a CUDA graph, the same way the native host's cuda device (coppelius/host/device_cuda.c)
does. The product runs the native host ELF; this harness lets the single-kernel GPU tests launch the
catalog's kernels from Python, the Python reference host walk a GPU target's host ELF (its run is
compared with the native one bit for bit) and bench/profile_gpu.py time every command of a piece.

Load, once:
- the image (a cubin) with cuModuleLoadData, and cuModuleGetFunction for each kernel the launch
  table uses (its `kernel` field is the id of formats/kernels.py; the cubin exports them `extern "C"`).
  Each function's parameters, as the cubin lays them out (cuFuncGetParamInfo), must be the
  catalog's ABI (formats/kernels.py: param_layout); another layout is refused before any launch;
- the parameter blob, copied into host memory that lives as long as the device, with the arena's
  device address added at every relocation (the blob holds arena offsets; nothing else is patched);
- one CUDA graph per ring entry: its commands as nodes chained in command order (each depends on
  the one before), kernel nodes taking `kernelParams` (one pointer per ABI parameter, into the
  blob), memset nodes, and memcpy nodes (h2d and d2h from and to the pinned host block, d2d within
  the arena); instantiated once. `issue` is one cuGraphLaunch on the device's one stream.

The step-size word. The ABI passes step_size as a by-value f32 in each AdamW launch's parameter
block, so `patch_step_size` writes the word into the blob and hands each AdamW kernel node of the
instantiated update graph its parameters again (cuGraphExecKernelNodeSetParams, for every launch
of the step_words table). The driver copies the parameters at that call, and the change applies
only to launches of the graph made after it: a launch already enqueued keeps the word it was
enqueued with. So patching needs no synchronization, and the interpreter may patch step t+1's word
while step t's graph still runs. The alternative, the word resident in device memory and written
by a copy node from pinned memory, would change the kernels' ABI and add a host-to-device copy to
every step; the patch costs one driver call per AdamW launch per step (microseconds), and keeps
every other part of the run (the cpu device, admission's step-word check) unchanged.

Synchronization. Everything runs on one stream, in issue order, asynchronously to the host. The
host buffer block (`host`, pinned) is read by h2d nodes and written by d2h nodes when the graph
runs, not when it is issued: the interpreter must call `synchronize()` before it reads or writes
any host buffer (fill, read, read-at-cursor, write, record-stat) and before it finishes the run.
`synchronize` is also where an error of a running kernel is reported.

Every driver error is one CoppeliusError line naming the call, the error and, where there is one,
the launch (`check`). Before anything is allocated, `check_card` holds the card to the one the host
ELF was built and admitted for. `close` frees everything; it never raises, since it runs after
failures too, where the first error is the one to report.
"""
import ctypes
import struct

import numpy as np

from coppelius.errors import CoppeliusError
from coppelius.formats import tables
from coppelius.formats.kernels import KERNEL_NAMES, PTR_KINDS, param_layout
from coppelius.runtime.device import Device

try:
    from cuda.bindings import driver
except ImportError:  # reported by CudaDevice(), so that importing this module never fails
    driver = None

STATIC_SHARED_LIMIT = 48 * 1024  # dynamic shared memory above this needs the function's opt-in
PORTABLE_CLUSTER = 8  # clusters of more blocks need the function's opt-in (sm_90: up to 16)
SPAN = 1 << 30  # memset and memcpy nodes move at most this many bytes each
HINTS = {
    "CUDA_ERROR_NO_BINARY_FOR_GPU": "the image was built for another card: build the target of this card",
    "CUDA_ERROR_OUT_OF_MEMORY": "free the card's memory (nvidia-smi lists its users) or plan a smaller run",
    "CUDA_ERROR_NO_DEVICE": "run on a machine with the card the host ELF names",
}


def check(result, call: str, launch: tuple[str, int] | None = None):
    """The values of a driver call's result; a driver error as one line naming the call (and launch)."""
    error, *values = result
    if error != driver.CUresult.CUDA_SUCCESS:
        where = f" for launch {launch[1]} ({launch[0]})" if launch else ""
        name = getattr(error, "name", str(error))
        raise CoppeliusError(f"CUDA driver: {call}{where} returned {name}; "
                             f"{HINTS.get(name, 'the run stopped there: check the card with nvidia-smi')}")
    return values[0] if len(values) == 1 else tuple(values)


def allow_cluster(function, cluster: int) -> None:
    """Opt the function in to clusters of more than PORTABLE_CLUSTER blocks, when a launch asks for them."""
    if cluster > PORTABLE_CLUSTER:
        allowed = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
        check(driver.cuFuncSetAttribute(function, allowed, 1), "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)")


def cluster_value(cluster: int):
    """The launch attribute putting a launch's blocks in clusters of `cluster` along x (the launch table's field)."""
    attribute = driver.CUlaunchAttribute()
    attribute.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attribute.value.clusterDim.x, attribute.value.clusterDim.y, attribute.value.clusterDim.z = cluster, 1, 1
    return attribute


def launch_in_clusters(function, grid, block, shared: int, stream, cluster: int, extra: int):
    """cuLaunchKernelEx of `function` (parameters by the `extra` buffer) in clusters of `cluster` blocks."""
    config = driver.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid
    config.blockDimX, config.blockDimY, config.blockDimZ = block
    config.sharedMemBytes, config.hStream = shared, stream
    config.attrs, config.numAttrs = [cluster_value(cluster)], 1
    return driver.cuLaunchKernelEx(config, function, None, extra)


def check_card(identity: dict, description: dict) -> None:
    """Refuse a card other than the one the host ELF was built and admitted for: its name, its arch, and
    at least the device memory the plan's arena takes (the identity's memory_bytes)."""
    memory = identity.get("memory_bytes")
    if (description["card"], description["arch"]) == (identity["card"], identity["arch"]) and \
            (memory is None or description["memory_bytes"] >= memory):
        return
    wanted = f"{identity['card']} ({identity['arch']}" + (f", {memory} bytes)" if memory is not None else ")")
    raise CoppeliusError(
        f"card check: this card is {description['card']} ({description['arch']}, {description['memory_bytes']} "
        f"bytes), the host ELF was built and admitted for {wanted} (target {identity.get('target')!r}); "
        f"run it on that card, or build the target whose config/targets/NAME.yaml names this card")


class CudaDevice(Device):
    def __init__(self, ordinal: int = 0):
        if driver is None:
            raise CoppeliusError("CUDA device: the Python package cuda-bindings is not installed; "
                                 "install it (pip install cuda-bindings==13.3.1)")
        try:
            check(driver.cuInit(0), "cuInit")
        except RuntimeError as e:  # cuda-bindings found no libcuda.so.1
            raise CoppeliusError(f"CUDA driver: cuInit failed ({e}); run on a machine with the NVIDIA driver") from None
        self.dev = check(driver.cuDeviceGet(ordinal), f"cuDeviceGet({ordinal})")
        self.ctx = self.stream = self.module = self.arena = self.host_pointer = None
        self.graphs, self.execs, self.keep = [], [], []
        self.host = np.zeros(0, np.uint8)
        self.last = None  # the ring entry issued last, to say where an asynchronous error came from
        self.name = self.describe()["card"]

    def describe(self) -> dict:
        attribute = driver.CUdevice_attribute
        name = check(driver.cuDeviceGetName(256, self.dev), "cuDeviceGetName")
        major = check(driver.cuDeviceGetAttribute(attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self.dev),
                      "cuDeviceGetAttribute")
        minor = check(driver.cuDeviceGetAttribute(attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self.dev),
                      "cuDeviceGetAttribute")
        return {"card": name.split(b"\0")[0].decode(), "arch": f"sm_{major}{minor}",
                "memory_bytes": int(check(driver.cuDeviceTotalMem(self.dev), "cuDeviceTotalMem"))}

    def allocate(self, arena_bytes: int, host_bytes: int) -> None:
        self.ctx = check(driver.cuDevicePrimaryCtxRetain(self.dev), "cuDevicePrimaryCtxRetain")
        check(driver.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
        self.stream = check(driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate")
        self.arena = check(driver.cuMemAlloc(max(1, arena_bytes)), f"cuMemAlloc({arena_bytes} bytes)")
        self.base = int(self.arena)
        self.host_pointer = check(driver.cuMemHostAlloc(max(1, host_bytes), 0), f"cuMemHostAlloc({host_bytes} bytes)")
        self.host = np.ctypeslib.as_array((ctypes.c_uint8 * max(1, host_bytes)).from_address(self.host_pointer))
        self.host = self.host[:host_bytes]

    # ---------------------------------------------------------------- the program
    def load_program(self, image, launches, relocations, commands, ring, step_words, plane_offsets, buffer_offsets):
        self.launches, blob = tables.unpack("launches", launches)
        relocs, _ = tables.unpack("relocations", relocations)
        self.commands, _ = tables.unpack("commands", commands)
        self.ring, _ = tables.unpack("ring", ring)
        self.step_words, _ = tables.unpack("step_words", step_words)
        self.patched = {}  # slot -> the step-size word the graphs hold since the last patch
        self.planes, self.buffers = plane_offsets, buffer_offsets
        self.blob = (ctypes.c_uint8 * max(1, len(blob))).from_buffer_copy(blob or b"\0")
        for r in relocs:  # the one patch a parameter block gets at load: the arena base
            at = int(r["param_offset"])
            struct.pack_into("<Q", self.blob, at, struct.unpack_from("<Q", self.blob, at)[0] + self.base)

        self.module = check(driver.cuModuleLoadData(image), f"cuModuleLoadData ({len(image)}-byte image)")
        self.functions = {}
        for index, launch in enumerate(self.launches):
            kernel = int(launch["kernel"])
            if kernel not in self.functions:
                self.functions[kernel] = self._function(KERNEL_NAMES[kernel], index)
            allow_cluster(self.functions[kernel], int(launch["cluster"]))
            shared = int(launch["shared"])
            if shared > STATIC_SHARED_LIMIT:
                opt_in = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                check(driver.cuFuncSetAttribute(self.functions[kernel], opt_in, shared),
                      f"cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, {shared})", (KERNEL_NAMES[kernel], index))

        self.kernel_nodes = {}  # launch index -> [(graph exec, node, params)]
        for ring_index, entry in enumerate(self.ring):
            graph = check(driver.cuGraphCreate(0), "cuGraphCreate")
            self.graphs.append(graph)
            nodes, previous = [], []
            for c in self.commands[int(entry["offset"]):int(entry["offset"] + entry["length"])]:
                for node, launch, params in self._nodes(graph, previous, c):
                    nodes.append((node, launch, params))
                    previous = [node]
            if not nodes:  # an empty submission: issuing it does nothing
                self.execs.append(None)
                continue
            graph_exec = check(driver.cuGraphInstantiate(graph, 0), f"cuGraphInstantiate (ring entry {ring_index})")
            self.execs.append(graph_exec)
            for node, launch, params in nodes:
                if launch is not None:
                    self.kernel_nodes.setdefault(launch, []).append((graph_exec, node, params))
        self.step_nodes = []
        for w in self.step_words:
            launch = int(w["launch"])
            if launch not in self.kernel_nodes:
                raise CoppeliusError(f"step_words: launch {launch} is in no ring entry; "
                                     f"rebuild the tables with `snakemake`")
            self.step_nodes += [(n, launch) for n in self.kernel_nodes[launch]]

    def _function(self, name: str, index: int):
        """The kernel's function, its parameters held to the catalog's ABI."""
        function = check(driver.cuModuleGetFunction(self.module, name.encode()), f"cuModuleGetFunction({name})",
                         (name, index))
        layout, _ = param_layout(name)
        found = []
        while True:
            error, offset, size = driver.cuFuncGetParamInfo(function, len(found))
            if error != driver.CUresult.CUDA_SUCCESS:
                break
            found.append((offset, size))
        expected = [(offset, 8 if kind in PTR_KINDS else 4) for _, kind, offset in layout]
        if found != expected:
            i = next((i for i, (f, e) in enumerate(zip(found, expected)) if f != e), min(len(found), len(expected)))
            got = f"at byte {found[i][0]} ({found[i][1]} bytes)" if i < len(found) else "missing"
            want = f"byte {expected[i][0]} ({expected[i][1]} bytes)" if i < len(expected) else "no such parameter"
            raise CoppeliusError(f"image: kernel {name} has {len(found)} parameters, parameter {i} {got}; the ABI "
                                 f"(coppelius/formats/kernels.py) has {len(expected)}, parameter {i} at {want}; "
                                 f"rebuild the image from the catalog")
        return function

    def _nodes(self, graph, previous: list, c):
        """[(node, launch index or None, kernel node params)] of one command, chained after `previous`."""
        op, n = int(c["op"]), int(c["bytes"])
        if op == tables.OPS["launch"]:
            index = int(c["a"])
            params, launch = self._kernel_params(index)
            # a programmatic launch (after a launch, as admission holds) hangs from its predecessor's programmatic port
            programmatic = bool(int(c["flags"]) & tables.COMMAND_PROGRAMMATIC)
            node = check(driver.cuGraphAddKernelNode(graph, [] if programmatic else previous,
                                                     0 if programmatic else len(previous), params),
                         "cuGraphAddKernelNode", launch)
            if programmatic:
                edge = driver.CUgraphEdgeData()
                edge.from_port = driver.CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC
                edge.type = driver.CUgraphDependencyType.CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC
                check(driver.cuGraphAddDependencies(graph, previous, [node], [edge], 1),
                      "cuGraphAddDependencies (programmatic)", launch)
            cluster = int(self.launches[index]["cluster"])
            if cluster > 1:  # the kernel reads its split of K from its cluster's size (formats/geometry.py)
                value = driver.CUkernelNodeAttrValue()
                value.clusterDim.x, value.clusterDim.y, value.clusterDim.z = cluster, 1, 1
                check(driver.cuGraphKernelNodeSetAttribute(
                          node, driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, value),
                      f"cuGraphKernelNodeSetAttribute(CLUSTER_DIMENSION {cluster})", launch)
            return [(node, index, params)]
        nodes = []
        for at in range(0, n, SPAN):
            span = min(SPAN, n - at)
            if op == tables.OPS["memset"]:
                p = driver.CUDA_MEMSET_NODE_PARAMS()
                p.dst = self._device(c["dst"], c["dst_offset"] + at)
                p.elementSize, p.width, p.height, p.pitch, p.value = 1, span, 1, 0, int(c["value"]) & 0xFF
                node = check(driver.cuGraphAddMemsetNode(graph, previous, len(previous), p, self.ctx),
                             "cuGraphAddMemsetNode")
            else:
                p = driver.CUDA_MEMCPY3D()
                memory = driver.CUmemorytype
                src, dst = c["src_offset"] + at, c["dst_offset"] + at
                if op == tables.OPS["h2d"]:
                    p.srcMemoryType, p.srcHost = memory.CU_MEMORYTYPE_HOST, self._host(c["src"], src)
                else:
                    p.srcMemoryType, p.srcDevice = memory.CU_MEMORYTYPE_DEVICE, self._device(c["src"], src)
                if op == tables.OPS["d2h"]:
                    p.dstMemoryType, p.dstHost = memory.CU_MEMORYTYPE_HOST, self._host(c["dst"], dst)
                else:
                    p.dstMemoryType, p.dstDevice = memory.CU_MEMORYTYPE_DEVICE, self._device(c["dst"], dst)
                p.WidthInBytes, p.Height, p.Depth = span, 1, 1
                node = check(driver.cuGraphAddMemcpyNode(graph, previous, len(previous), p, self.ctx),
                             "cuGraphAddMemcpyNode")
            nodes.append((node, None, None))
            previous = [node]
        return nodes

    def _kernel_params(self, index: int):
        launch = self.launches[index]
        name = KERNEL_NAMES[int(launch["kernel"])]
        layout, size = param_layout(name)
        if size != int(launch["param_bytes"]):
            raise CoppeliusError(f"launches: launch {index} ({name}) has a {int(launch['param_bytes'])}-byte parameter "
                                 f"block, the ABI {size} bytes; rebuild the realization with `snakemake`")
        block = ctypes.addressof(self.blob) + int(launch["param_offset"])
        pointers = (ctypes.c_void_p * len(layout))(*[block + offset for _, _, offset in layout])
        self.keep.append(pointers)
        p = driver.CUDA_KERNEL_NODE_PARAMS()
        p.func = self.functions[int(launch["kernel"])]
        p.gridDimX, p.gridDimY, p.gridDimZ = (int(g) for g in launch["grid"])
        p.blockDimX, p.blockDimY, p.blockDimZ = (int(b) for b in launch["block"])
        p.sharedMemBytes = int(launch["shared"])
        p.kernelParams = ctypes.addressof(pointers)
        return p, (name, index)

    def _device(self, plane, offset) -> int:
        return self.base + self.planes[int(plane)] + int(offset)

    def _host(self, buffer, offset) -> int:
        return self.host_pointer + self.buffers[int(buffer)] + int(offset)

    # ---------------------------------------------------------------- the run
    def issue(self, ring_index: int) -> None:
        graph_exec = self.execs[ring_index]
        if graph_exec is not None:
            check(driver.cuGraphLaunch(graph_exec, self.stream), f"cuGraphLaunch (ring entry {ring_index})")
        self.last = ring_index

    def patch_step_size(self, word: np.float32, slot: int) -> None:
        word = np.float32(word)
        if self.patched.get(slot) == word:  # once bias correction has converged the word stops changing
            return
        self.patched[slot] = word
        for w in self.step_words[self.step_words["slot"] == slot]:
            struct.pack_into("<f", self.blob, int(w["step_size_offset"]), float(np.float32(word)))
        for (graph_exec, node, params), launch in self.step_nodes:
            check(driver.cuGraphExecKernelNodeSetParams(graph_exec, node, params), "cuGraphExecKernelNodeSetParams",
                  (KERNEL_NAMES[int(self.launches[launch]["kernel"])], launch))

    def synchronize(self) -> None:
        if self.stream is not None:
            after = "" if self.last is None else \
                f" (after ring entry {self.last}, piece {int(self.ring[self.last]['piece'])})"
            check(driver.cuStreamSynchronize(self.stream), "cuStreamSynchronize" + after)

    def close(self) -> None:
        """Free everything this device holds. Never raises: after a failure every call may fail."""
        if self.stream is not None:
            driver.cuStreamSynchronize(self.stream)
        for graph_exec in self.execs:
            if graph_exec is not None:
                driver.cuGraphExecDestroy(graph_exec)
        for graph in self.graphs:
            driver.cuGraphDestroy(graph)
        if self.module is not None:
            driver.cuModuleUnload(self.module)
        if self.stream is not None:
            driver.cuStreamDestroy(self.stream)
        if self.arena is not None:
            driver.cuMemFree(self.arena)
        if self.host_pointer is not None:
            driver.cuMemFreeHost(self.host_pointer)
        if self.ctx is not None:
            driver.cuDevicePrimaryCtxRelease(self.dev)
        self.host = np.zeros(0, np.uint8)
        self.graphs, self.execs, self.keep = [], [], []
        self.ctx = self.stream = self.module = self.arena = self.host_pointer = None
