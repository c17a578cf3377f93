// device_cuda.h: the cuda device. The driver API through dlopen (cuda_driver.h); the image is the
// embedded cubin; one arena allocation; the host block is pinned memory; every ring entry is a
// CUDA graph built once at load (its commands as nodes, each after the commands it waits for, waits.h:
// kernel nodes whose parameters point into the relocated blob, memset nodes, memcpy nodes) and issued
// with one cuGraphLaunch on the device's one stream (tests/gpu/cuda_harness.py chains the same nodes
// in command order from Python: the same bytes, without the commands side by side).
//
// The step-size word. The ABI passes step_size by value in each AdamW launch's parameter block, so
// a patch writes the word into the blob and hands each AdamW node of the instantiated graphs its
// parameters again (cuGraphExecKernelNodeSetParams): the driver copies them at that call, so a
// graph already enqueued keeps the word it was enqueued with and patching needs no synchronization.
// Once bias correction has converged the word stops changing and the patch costs nothing.
//
// Synchronization. Graphs run asynchronously; the host block is read by h2d nodes and written by
// d2h nodes when a graph runs, so the run synchronizes before it touches a host buffer
// (cuda_device_buffer does), and that is where an error of a running kernel surfaces.
#ifndef COPPELIUS_DEVICE_CUDA_H
#define COPPELIUS_DEVICE_CUDA_H
#include <stdint.h>

#include "catalog.h"
#include "cuda_driver.h"
#include "device_tables.h"

// The card the host ELF was built and admitted for (its identity note).
typedef struct {
    const char *target, *card, *arch;  // "h200", "NVIDIA H200", "sm_90"
    int driver_version;                 // the least cuDriverGetVersion that loads the image (13000: CUDA 13.0)
} cuda_card;

typedef struct {
    CUgraphExec exec;
    CUgraphNode node;
    CUDA_KERNEL_NODE_PARAMS params;
} cuda_step_node;

typedef struct {
    cuda_driver driver;
    int driver_loaded, context_retained;
    CUdevice card;
    CUcontext context;
    CUstream stream;
    CUdeviceptr arena;
    uint64_t arena_bytes;
    uint8_t* host;                     // the host block (pinned)
    uint64_t host_bytes;
    loaded_tables l;                   // the checked tables, the blob relocated to the arena
    CUmodule module;
    CUfunction functions[KERNEL_COUNT];
    void** arguments;                  // MAX_PARAMS pointers per launch, into the blob
    CUgraph* graphs;                   // per ring entry
    CUgraphExec* execs;                // per ring entry; NULL for an empty one
    cuda_step_node* step_nodes;        // every AdamW node of every graph
    uint32_t step_node_count;
    float patched;                     // the step-size word the graphs hold
    int has_patched;
    int64_t last;                      // the ring entry issued last (-1: none)
} cuda_device;

// Load the driver, check the card before allocating anything (name, arch, driver version, unified
// addressing, free memory against the arena), allocate, load the image, build every graph.
// 0, or -1 with a one-line refusal naming `where` (the host ELF).
int cuda_device_open(cuda_device* d, const device_tables* tables, uint64_t arena_bytes, uint64_t host_bytes,
                     const uint8_t* image, uint64_t image_bytes, const cuda_card* wanted, const char* where,
                     failure* f);
int cuda_device_patch_step_size(cuda_device* d, float word, failure* f);
int cuda_device_issue(cuda_device* d, uint32_t ring, failure* f);
int cuda_device_synchronize(cuda_device* d, failure* f);
// The host buffer `index`'s memory (the caller synchronizes first).
uint8_t* cuda_device_buffer(cuda_device* d, uint32_t index, uint64_t* bytes);
// Free everything; never fails (it runs after failures too, where the first error is the one to report).
void cuda_device_close(cuda_device* d);
#endif
