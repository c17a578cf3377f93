// device_cuda.h: the cuda device. The driver API through dlopen (cuda_driver.h); the image is the
// embedded cubin; one arena allocation; the host block is pinned memory; every ring entry is a
// CUDA graph built once at load (its commands as nodes, each after the commands it waits for, waits.h:
// kernel nodes whose parameters point into the relocated blob, memset nodes, memcpy nodes) and issued
// with one cuGraphLaunch on the device's one stream (tests/gpu/cuda_harness.py chains the same nodes
// in command order from Python: the same bytes, without the commands side by side).
//
// The step-size word. The ABI passes step_size by value in each AdamW launch's parameter block, so
// a patch writes the word into the blob, and a graph is handed its AdamW nodes' parameters again
// (cuGraphExecKernelNodeSetParams: the driver copies them at that call) when it is next issued, if
// the word changed since: the host never updates a graph the card may still be running (the two
// update graphs alternate, one running while the other is issued). Once bias correction has
// converged the word stops changing and the patch costs nothing.
//
// Synchronization. Graphs run asynchronously; the host block is read by h2d nodes and written by
// d2h nodes when a graph runs, so before the run touches a host buffer it waits for the last issued
// ring entry whose graph copies to or from that buffer (an event recorded after each such launch;
// cuda_device_buffer waits), and that is where an error of a running kernel surfaces. Earlier
// entries are done too (one stream), and later ones never touch the buffer: so the host fills the
// next update's context and reads a step's loss while the card runs the next update.
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
    float word[MAX_STEPS_PER_LAUNCH];  // each step slot's step-size word of its last patch
    uint32_t worded;                   // bit s: slot s has been patched
    uint64_t word_version;             // patches that changed the word so far
    uint64_t* patched;                 // per ring entry: the word_version its graph holds
    int64_t last;                      // the ring entry issued last (-1: none)
    uint64_t* touches;                 // per ring entry: a bit per host buffer its graph copies to or from
    CUevent* done;                     // per ring entry that touches one: recorded after each launch
    int64_t* toucher;                  // per host buffer: the ring entry issued last that touches it (-1: none)
} cuda_device;

// Load the driver, check the card before allocating anything (name, arch, driver version, unified
// addressing, free memory against the arena), allocate, load the image, build every graph.
// 0, or -1 with a one-line refusal naming `where` (the host ELF).
int cuda_device_open(cuda_device* d, const device_tables* tables, uint64_t arena_bytes, uint64_t host_bytes,
                     const uint8_t* image, uint64_t image_bytes, const cuda_card* wanted, const char* where,
                     failure* f);
int cuda_device_patch_step_size(cuda_device* d, float word, uint32_t slot, failure* f);
int cuda_device_issue(cuda_device* d, uint32_t ring, failure* f);
// The host buffer `index`'s memory and size, once the last issued entry that touches it has finished;
// NULL with the refusal when the device reports an error.
uint8_t* cuda_device_buffer(cuda_device* d, uint32_t index, uint64_t* bytes, failure* f);
// Free everything; never fails (it runs after failures too, where the first error is the one to report).
void cuda_device_close(cuda_device* d);
#endif
