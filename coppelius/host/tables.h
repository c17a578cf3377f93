// tables.h: the binary tables the build writes for the run (docs/formats.md, "Table framing"):
// 8-byte magic, u32 version 2, u32 record count, u64 blob bytes, the records, the blob; the
// section is exactly that long. The record layouts below are the document's, byte for byte.
#ifndef COPPELIUS_TABLES_H
#define COPPELIUS_TABLES_H
#include <stdint.h>

#include "failure.h"

typedef struct {
    const uint8_t* records;
    uint32_t count;
    uint32_t record_bytes;
    const uint8_t* blob;
    uint64_t blob_bytes;
} table;

// Check the framing of `bytes` bytes at `data` (section `where`). 0, or -1 with the refusal.
int table_read(const uint8_t* data, uint64_t bytes, const char magic[8], uint32_t record_bytes, const char* where,
               table* out, failure* f);

enum { TABLE_VERSION = 5, MAX_CLUSTER = 16 };  // clusters above 8 blocks: the non-portable sizes of sm_90
enum { MAX_STEPS_PER_LAUNCH = 8 };  // steps an update piece holds, at most: every step word's slot is below it

// The record layouts (packed, little-endian hosts only: x86-64 and AArch64).
typedef struct {
    uint32_t kernel, grid[3], block[3], shared, param_offset, param_bytes, reloc_start, reloc_count, cluster;
} launch_record;                                                                 // COPLNCH\0, 52 bytes
typedef struct { uint32_t param_offset, plane; uint64_t plane_offset; } relocation_record;  // COPRELO\0, 16
typedef struct { uint32_t op, a, src, dst; uint64_t src_offset, dst_offset, bytes; uint32_t value, flags; }
    command_record;                                                              // COPCMDS\0, 48 bytes
typedef struct { uint32_t piece, offset, length; } ring_record;                  // COPRING\0, 12 bytes
typedef struct { uint32_t launch, step_size_offset, eps_offset, step_size, eps, slot; }
    step_word_record;                                                            // COPSTEP\0, 24 bytes
typedef struct { uint64_t offset, bytes; uint32_t dtype, lifetime; } plane_record;        // COPPLAN\0, 24 bytes
typedef struct { uint64_t offset, bytes; } buffer_record;                        // COPBUFS\0, 16 bytes
enum { OP_LAUNCH, OP_MEMSET, OP_H2D, OP_D2H, OP_D2D };                            // command ops
enum { COMMAND_PROGRAMMATIC = 1 };  // a command's flags: a launch that may start as the launch before it finishes

_Static_assert(sizeof(launch_record) == 52, "COPLNCH record");
_Static_assert(sizeof(relocation_record) == 16, "COPRELO record");
_Static_assert(sizeof(command_record) == 48, "COPCMDS record");
_Static_assert(sizeof(ring_record) == 12, "COPRING record");
_Static_assert(sizeof(step_word_record) == 24, "COPSTEP record");
_Static_assert(sizeof(plane_record) == 24, "COPPLAN record");
_Static_assert(sizeof(buffer_record) == 16, "COPBUFS record");
#endif
