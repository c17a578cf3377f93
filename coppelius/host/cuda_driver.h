// cuda_driver.h: the part of the CUDA driver API the cuda device calls, declared here and
// resolved at run time from libcuda.so.1 with dlopen/dlsym, so the host ELF needs no toolkit to
// build and nothing but the NVIDIA driver to run. The types and values are the driver API's
// (cuda.h, CUDA 12/13; the structures are the versions the unsuffixed entry points take).
#ifndef COPPELIUS_CUDA_DRIVER_H
#define COPPELIUS_CUDA_DRIVER_H
#include <stddef.h>
#include <stdint.h>

#include "failure.h"

typedef int CUresult;  // 0: CUDA_SUCCESS
typedef int CUdevice;
typedef uint64_t CUdeviceptr;
typedef struct CUctx_st* CUcontext;
typedef struct CUmod_st* CUmodule;
typedef struct CUfunc_st* CUfunction;
typedef struct CUstream_st* CUstream;
typedef struct CUgraph_st* CUgraph;
typedef struct CUgraphNode_st* CUgraphNode;
typedef struct CUgraphExec_st* CUgraphExec;
typedef struct CUevent_st* CUevent;

enum {
    CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
    CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14,
    CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4,
    CU_STREAM_NON_BLOCKING = 1,
    CU_EVENT_DISABLE_TIMING = 2,
    CU_MEMORYTYPE_HOST = 1,
    CU_MEMORYTYPE_DEVICE = 2,
};

typedef struct {
    CUfunction func;
    unsigned int gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    void** kernelParams;
    void** extra;
} CUDA_KERNEL_NODE_PARAMS;

typedef struct {
    CUdeviceptr dst;
    size_t pitch;
    unsigned int value, elementSize;
    size_t width, height;
} CUDA_MEMSET_NODE_PARAMS;

typedef struct {
    size_t srcXInBytes, srcY, srcZ, srcLOD;
    int srcMemoryType;
    const void* srcHost;
    CUdeviceptr srcDevice;
    void* srcArray;
    void* reserved0;
    size_t srcPitch, srcHeight;
    size_t dstXInBytes, dstY, dstZ, dstLOD;
    int dstMemoryType;
    void* dstHost;
    CUdeviceptr dstDevice;
    void* dstArray;
    void* reserved1;
    size_t dstPitch, dstHeight;
    size_t WidthInBytes, Height, Depth;
} CUDA_MEMCPY3D;

// CUlaunchAttributeValue (a kernel node's attribute value): a 64-byte union; its clusterDim is x, y, z first.
typedef union {
    struct { unsigned int x, y, z; } clusterDim;
    char pad[64];
} CUlaunchAttributeValue;

// CUgraphEdgeData: a programmatic edge (type 1) leaves its kernel node's programmatic port (1), so the dependent
// kernel may start once every block of this one has called griddepcontrol.launch_dependents (launch.cuh).
typedef struct {
    unsigned char from_port, to_port, type, reserved[5];
} CUgraphEdgeData;
enum { CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC = 1, CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC = 1 };

_Static_assert(sizeof(CUDA_KERNEL_NODE_PARAMS) == 56, "CUDA_KERNEL_NODE_PARAMS");
_Static_assert(sizeof(CUlaunchAttributeValue) == 64, "CUlaunchAttributeValue");
_Static_assert(sizeof(CUDA_MEMSET_NODE_PARAMS) == 40, "CUDA_MEMSET_NODE_PARAMS");
_Static_assert(sizeof(CUDA_MEMCPY3D) == 200, "CUDA_MEMCPY3D");
_Static_assert(sizeof(CUgraphEdgeData) == 8, "CUgraphEdgeData");

// Every entry point, with the exported symbol it is resolved from.
#define CUDA_ENTRY_POINTS(X)                                                                                  \
    X(cuInit, "cuInit", CUresult (*)(unsigned int))                                                           \
    X(cuDriverGetVersion, "cuDriverGetVersion", CUresult (*)(int*))                                           \
    X(cuDeviceGetCount, "cuDeviceGetCount", CUresult (*)(int*))                                               \
    X(cuDeviceGet, "cuDeviceGet", CUresult (*)(CUdevice*, int))                                               \
    X(cuDeviceGetName, "cuDeviceGetName", CUresult (*)(char*, int, CUdevice))                                 \
    X(cuDeviceGetAttribute, "cuDeviceGetAttribute", CUresult (*)(int*, int, CUdevice))                        \
    X(cuDeviceTotalMem, "cuDeviceTotalMem_v2", CUresult (*)(size_t*, CUdevice))                               \
    X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", CUresult (*)(CUcontext*, CUdevice))               \
    X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", CUresult (*)(CUdevice))                      \
    X(cuCtxSetCurrent, "cuCtxSetCurrent", CUresult (*)(CUcontext))                                            \
    X(cuMemGetInfo, "cuMemGetInfo_v2", CUresult (*)(size_t*, size_t*))                                        \
    X(cuMemAlloc, "cuMemAlloc_v2", CUresult (*)(CUdeviceptr*, size_t))                                        \
    X(cuMemFree, "cuMemFree_v2", CUresult (*)(CUdeviceptr))                                                   \
    X(cuMemHostAlloc, "cuMemHostAlloc", CUresult (*)(void**, size_t, unsigned int))                           \
    X(cuMemFreeHost, "cuMemFreeHost", CUresult (*)(void*))                                                    \
    X(cuStreamCreate, "cuStreamCreate", CUresult (*)(CUstream*, unsigned int))                                \
    X(cuStreamDestroy, "cuStreamDestroy_v2", CUresult (*)(CUstream))                                          \
    X(cuStreamSynchronize, "cuStreamSynchronize", CUresult (*)(CUstream))                                     \
    X(cuEventCreate, "cuEventCreate", CUresult (*)(CUevent*, unsigned int))                                   \
    X(cuEventRecord, "cuEventRecord", CUresult (*)(CUevent, CUstream))                                        \
    X(cuEventSynchronize, "cuEventSynchronize", CUresult (*)(CUevent))                                        \
    X(cuEventDestroy, "cuEventDestroy_v2", CUresult (*)(CUevent))                                             \
    X(cuModuleLoadData, "cuModuleLoadData", CUresult (*)(CUmodule*, const void*))                             \
    X(cuModuleUnload, "cuModuleUnload", CUresult (*)(CUmodule))                                               \
    X(cuModuleGetFunction, "cuModuleGetFunction", CUresult (*)(CUfunction*, CUmodule, const char*))           \
    X(cuFuncSetAttribute, "cuFuncSetAttribute", CUresult (*)(CUfunction, int, int))                           \
    X(cuFuncGetParamInfo, "cuFuncGetParamInfo", CUresult (*)(CUfunction, size_t, size_t*, size_t*))           \
    X(cuGraphCreate, "cuGraphCreate", CUresult (*)(CUgraph*, unsigned int))                                   \
    X(cuGraphAddKernelNode, "cuGraphAddKernelNode",                                                           \
      CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t, const CUDA_KERNEL_NODE_PARAMS*))        \
    X(cuGraphKernelNodeSetAttribute, "cuGraphKernelNodeSetAttribute",                                         \
      CUresult (*)(CUgraphNode, int, const CUlaunchAttributeValue*))                                          \
    X(cuGraphAddMemsetNode, "cuGraphAddMemsetNode",                                                           \
      CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t, const CUDA_MEMSET_NODE_PARAMS*,         \
                   CUcontext))                                                                                \
    X(cuGraphAddMemcpyNode, "cuGraphAddMemcpyNode",                                                           \
      CUresult (*)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t, const CUDA_MEMCPY3D*, CUcontext))       \
    X(cuGraphAddDependencies, "cuGraphAddDependencies_v2",                                                    \
      CUresult (*)(CUgraph, const CUgraphNode*, const CUgraphNode*, const CUgraphEdgeData*, size_t))          \
    X(cuGraphInstantiate, "cuGraphInstantiateWithFlags", CUresult (*)(CUgraphExec*, CUgraph, unsigned long long)) \
    X(cuGraphLaunch, "cuGraphLaunch", CUresult (*)(CUgraphExec, CUstream))                                    \
    X(cuGraphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams",                                       \
      CUresult (*)(CUgraphExec, CUgraphNode, const CUDA_KERNEL_NODE_PARAMS*))                                 \
    X(cuGraphExecDestroy, "cuGraphExecDestroy", CUresult (*)(CUgraphExec))                                    \
    X(cuGraphDestroy, "cuGraphDestroy", CUresult (*)(CUgraph))                                                \
    X(cuGetErrorName, "cuGetErrorName", CUresult (*)(CUresult, const char**))

typedef struct {
    void* library;
#define CUDA_FIELD(name, symbol, type) __typeof__(type) name;
    CUDA_ENTRY_POINTS(CUDA_FIELD)
#undef CUDA_FIELD
} cuda_driver;

// Load libcuda.so.1 and resolve every entry point. 0, or -1 with a one-line refusal saying that no
// NVIDIA driver is present (naming `card`, the card the host ELF was built for).
int cuda_driver_load(cuda_driver* driver, const char* where, const char* card, failure* f);
void cuda_driver_unload(cuda_driver* driver);
// One check() for every driver call: 0 on success, else -1 with the line "CUDA driver: CALL returned
// NAME; WHAT TO DO" (the same words as the Python harness tests/gpu/cuda_harness.py).
int cuda_check(const cuda_driver* driver, CUresult result, const char* call, failure* f);
#endif
