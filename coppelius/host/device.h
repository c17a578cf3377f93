// device.h: the one interface the run drives a device through. A target's host ELF runs on the
// cpu device (device_cpu.c, the reference kernels in C) or the cuda device (device_cuda.c, the
// embedded cubin through the NVIDIA driver); the run calls only these five functions.
#ifndef COPPELIUS_DEVICE_H
#define COPPELIUS_DEVICE_H
#include <stdint.h>

#include "device_cpu.h"
#include "device_cuda.h"

typedef struct {
    int cuda;  // which of the two is open
    cpu_device cpu;
    cuda_device gpu;
} device;

// Open the device of `wanted->target` ("cpu" or a card). 0, or -1 with a one-line refusal.
int device_open(device* d, const device_tables* tables, uint64_t arena_bytes, uint64_t host_bytes,
                const uint8_t* image, uint64_t image_bytes, const cuda_card* wanted, const char* where, failure* f);
// The step-size word of every AdamW launch of step slot `slot` (an update piece's steps_per_launch steps).
int device_patch_step_size(device* d, float word, uint32_t slot, failure* f);
int device_issue(device* d, uint32_t ring, failure* f);
// Host buffer `index` (checked at load): its memory and size, once everything issued before has
// finished with it (the cuda device waits only for those that touch it); NULL with the refusal when
// the device reports an error.
uint8_t* device_host_buffer(device* d, uint32_t index, uint64_t* bytes, failure* f);
void device_close(device* d);
#endif
