// self.h: the host ELF reading itself. The whole file (/proc/self/exe, or a path for tests) is
// read into memory once; its section headers are checked and looked up by name; the identity
// note (.note.coppelius) is checked against its own digest, and every section it lists
// (.coppelius.NAME) against the sha256 it records, and a native one's whole file against the sha256 in its
// .coppelius_sha256 section, before any of them is used.
//
// The note is what coppelius/formats/elf.py writes: two records named "Coppelius\0", type 1 the
// canonical JSON {"format":"coppelius-host-elf","identity":{...},"sections":{NAME:HEX},"version":1},
// type 2 the 32-byte sha256 of the type-1 descriptor.
#ifndef COPPELIUS_SELF_H
#define COPPELIUS_SELF_H
#include <stddef.h>
#include <stdint.h>

#include "failure.h"

enum { MAX_SECTIONS = 64 };

typedef struct {
    const char* name;      // without ".coppelius."
    const uint8_t* data;
    uint64_t bytes;
} section;

typedef struct {
    const char* path;
    uint8_t* file;         // the whole file
    uint64_t file_bytes;
    uint16_t machine;      // e_machine: 62 x86-64, 183 AArch64
    uint16_t type;         // e_type: 1 ET_REL, 2 ET_EXEC, 3 ET_DYN
    const char* identity;  // the identity object's JSON text (not NUL-terminated: identity_bytes)
    size_t identity_bytes;
    int count;             // the note's sections, in its (sorted) order
    section sections[MAX_SECTIONS];
} self_image;

// Read and verify `path`. 0, or -1 with a one-line refusal naming the path.
int self_open(const char* path, self_image* image, failure* f);
// The verified section `name` (without ".coppelius."), or NULL.
const section* self_section(const self_image* image, const char* name);
void self_close(self_image* image);
#endif
