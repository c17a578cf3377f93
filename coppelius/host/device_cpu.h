// device_cpu.h: the cpu device. The arena and the host block are ordinary memory; a submission
// (ring entry) runs its commands in order on the calling thread: memsets and copies directly,
// launches through the kernel catalog (catalog.c) on the worker pool. Everything the tables
// say is checked once at load (device_tables.c), before the first command runs.
#ifndef COPPELIUS_DEVICE_CPU_H
#define COPPELIUS_DEVICE_CPU_H
#include <stdint.h>

#include "failure.h"
#include "device_tables.h"

typedef struct {
    uint8_t* arena;
    uint64_t arena_bytes;
    uint8_t* host;             // the host block: the host program's buffers
    uint64_t host_bytes;
    loaded_tables l;           // the checked tables, the blob relocated to the arena
} cpu_device;

// Allocate the arena and host block (zeroed, 256-aligned), check every table entry and relocate
// the parameter blob. 0, or -1 with a one-line refusal naming `where` (the host ELF).
int cpu_device_open(cpu_device* d, const device_tables* tables, uint64_t arena_bytes, uint64_t host_bytes,
                    const char* where, failure* f);
// Write the binary32 step size into every AdamW launch's step-size word.
void cpu_device_patch_step_size(cpu_device* d, float word, uint32_t slot);
// Run ring entry `ring` (checked at load). 0, or -1 if a kernel refused its arguments.
int cpu_device_issue(cpu_device* d, uint32_t ring, failure* f);
// The host buffer `index`'s memory (index checked at load by the program check).
uint8_t* cpu_device_buffer(cpu_device* d, uint32_t index, uint64_t* bytes);
void cpu_device_close(cpu_device* d);
#endif
