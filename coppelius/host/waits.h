// waits.h: which earlier commands of a ring entry each command waits for. Two commands are ordered when one of them
// writes a byte the other reads or writes: device bytes (each launch pointer over its catalog extent, with its
// catalog access; a copy's or a memset's range) or host bytes (a copy's host side). Nothing else of the command
// stream's order is needed, so the cuda device's graph of an entry runs the other commands side by side (a weight
// gradient beside the next input gradient), and every byte still ends with the value the stream's order gives it.
// A wait that another wait implies (through the commands that one waits for) is left out.
#ifndef COPPELIUS_WAITS_H
#define COPPELIUS_WAITS_H
#include <stdint.h>

#include "device_tables.h"
#include "failure.h"

typedef struct {
    uint32_t count;   // commands of the entry
    uint32_t* start;  // command i's waits: list[start[i] .. start[i + 1]), ascending, each below i (entry indices)
    uint32_t* list;
} entry_waits;

// The waits of the `count` commands from command `first` (one ring entry), from the loaded (relocated) tables.
// 0, or -1 with a one-line reason.
int entry_waits_find(const loaded_tables* l, uint32_t first, uint32_t count, entry_waits* w, failure* f);
// Whether command i of the entry waits for command j.
int entry_waits_for(const entry_waits* w, uint32_t i, uint32_t j);
void entry_waits_free(entry_waits* w);
#endif
