// device_tables.h: what every device loads from the host ELF's tables (docs/formats.md): the
// launches and their parameter blob, relocations, commands, ring, step words, arena planes and
// host buffers. At load every record is checked against the arena, the host block and the kernel
// catalog, and the blob's relocations get the arena's base address (the device's own address
// space: a host pointer for the cpu device, a CUdeviceptr for the cuda device), before the first
// command runs.
#ifndef COPPELIUS_DEVICE_TABLES_H
#define COPPELIUS_DEVICE_TABLES_H
#include <stdint.h>

#include "catalog.h"
#include "failure.h"
#include "tables.h"

typedef struct {
    table launches, relocations, commands, ring, step_words, planes, buffers;
} device_tables;

typedef struct {
    device_tables t;
    uint64_t base, arena_bytes, host_bytes;  // the arena's address on its device, its size; the host block's size
    uint8_t* parameters;                     // the parameter blob, relocated (the run's own copy)
} loaded_tables;

// Check every table entry and relocate a copy of the blob to `base`. 0, or -1 with a one-line
// refusal naming `where` (the host ELF).
int tables_load(loaded_tables* l, const device_tables* tables, uint64_t base, uint64_t arena_bytes,
                uint64_t host_bytes, const char* where, failure* f);
void tables_unload(loaded_tables* l);
// Launch i decoded, with the bytes each pointer parameter covers (its catalog extent; 0 for a scalar). 0, or -1
// with the reason in `error` (its block outside the blob, or a parameter out of range).
int launch_bytes(const loaded_tables* l, uint32_t i, launch_args* args, uint64_t bytes[MAX_PARAMS], char* error,
                 int error_bytes);
// Record i of a table (i checked by the caller or at load).
void* table_record(const table* t, uint32_t i);
// Where a copy's or memset's bytes start on one side (its destination when `destination`, else its source): an offset
// into the arena (*host = 0: a plane's) or into the host block (*host = 1: a buffer's). Not for a memset's source.
uint64_t command_side(const device_tables* t, const command_record* c, int destination, int* host);
#endif
