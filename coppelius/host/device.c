// device.c: dispatch to the open device (device.h).
#include "device.h"

#include <string.h>

int device_open(device* d, const device_tables* tables, uint64_t arena_bytes, uint64_t host_bytes,
                const uint8_t* image, uint64_t image_bytes, const cuda_card* wanted, const char* where, failure* f) {
    memset(d, 0, sizeof *d);
    d->cuda = strcmp(wanted->target, "cpu") != 0;
    return d->cuda ? cuda_device_open(&d->gpu, tables, arena_bytes, host_bytes, image, image_bytes, wanted, where, f)
                   : cpu_device_open(&d->cpu, tables, arena_bytes, host_bytes, where, f);
}

int device_patch_step_size(device* d, float word, uint32_t slot, failure* f) {
    if (d->cuda) return cuda_device_patch_step_size(&d->gpu, word, slot, f);
    cpu_device_patch_step_size(&d->cpu, word, slot);
    return 0;
}

int device_issue(device* d, uint32_t ring, failure* f) {
    return d->cuda ? cuda_device_issue(&d->gpu, ring, f) : cpu_device_issue(&d->cpu, ring, f);
}

uint8_t* device_host_buffer(device* d, uint32_t index, uint64_t* bytes, failure* f) {
    if (!d->cuda) return cpu_device_buffer(&d->cpu, index, bytes);
    return cuda_device_buffer(&d->gpu, index, bytes, f);
}

void device_close(device* d) {
    if (d->cuda) cuda_device_close(&d->gpu);
    else cpu_device_close(&d->cpu);
}
