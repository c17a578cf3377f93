// waits.c: the waits of a ring entry's commands (waits.h).
#include "waits.h"

#include <stdlib.h>
#include <string.h>

#include "catalog.h"

enum { MAX_RANGES = MAX_PARAMS };

typedef struct {
    uint64_t start, end;  // [start, end): device addresses (the relocated blob's), or host block offsets
    uint8_t host, writes;
} byte_range;

static int add_range(byte_range* r, int n, uint64_t start, uint64_t bytes, int host, int writes) {
    if (bytes == 0) return n;
    r[n].start = start, r[n].end = start + bytes, r[n].host = (uint8_t)host, r[n].writes = (uint8_t)writes;
    return n + 1;
}

// The byte ranges command c touches: how many (at most MAX_RANGES), or -1 with the reason.
static int command_ranges(const loaded_tables* l, const command_record* c, byte_range* r, failure* f) {
    const device_tables* t = &l->t;
    if (c->op == OP_LAUNCH) {
        launch_args args;
        uint64_t bytes[MAX_PARAMS];
        char error[256];
        if (launch_bytes(l, c->a, &args, bytes, error, sizeof error) != 0)
            return fail(f, "launch %u: %s; rebuild it with `snakemake`", c->a, error);
        int n = 0;
        for (int i = 0; i < CATALOG[args.kernel].count; i++)  // a scalar's bytes are 0, a null pointer's address
            if (args.address[i] != 0)
                n = add_range(r, n, args.address[i], bytes[i], 0, launch_access(&args, i) != ACCESS_R);
        return n;
    }
    int n = 0, host;
    if (c->op != OP_MEMSET) {  // (the arena's sides at its address, as the launches' pointers are)
        const uint64_t src = command_side(t, c, 0, &host);
        n = add_range(r, 0, host ? src : l->base + src, c->bytes, host, 0);
    }
    const uint64_t dst = command_side(t, c, 1, &host);
    return add_range(r, n, host ? dst : l->base + dst, c->bytes, host, 1);
}

static int conflict(const byte_range* a, int na, const byte_range* b, int nb) {
    for (int i = 0; i < na; i++)
        for (int j = 0; j < nb; j++)
            if (a[i].host == b[j].host && (a[i].writes || b[j].writes) && a[i].start < b[j].end &&
                b[j].start < a[i].end)
                return 1;
    return 0;
}

int entry_waits_find(const loaded_tables* l, uint32_t first, uint32_t count, entry_waits* w, failure* f) {
    memset(w, 0, sizeof *w);
    size_t words = ((size_t)count + 63) / 64, capacity = (size_t)count + 1;
    byte_range* ranges = calloc((size_t)count * MAX_RANGES + 1, sizeof(byte_range));
    int* range_count = calloc((size_t)count + 1, sizeof(int));
    // bit j of row i: i runs after j (j is a wait of i, or a wait of one of its waits, and so on)
    uint64_t* before = calloc((size_t)count * words + 1, sizeof(uint64_t));
    w->count = count;
    w->start = calloc((size_t)count + 1, sizeof(uint32_t));
    w->list = malloc(capacity * sizeof(uint32_t));
    int status = ranges && range_count && before && w->start && w->list
                     ? 0
                     : fail(f, "cuda device: cannot allocate a ring entry's waits (%u commands); free memory", count);
    for (uint32_t i = 0; i < count && status == 0; i++) {
        byte_range* mine = ranges + (size_t)i * MAX_RANGES;
        int n = command_ranges(l, table_record(&l->t.commands, first + i), mine, f);
        if (n < 0) {
            status = -1;
            break;
        }
        range_count[i] = n;
        uint64_t* covered = before + (size_t)i * words;
        uint32_t begin = w->start[i], end = begin;
        for (uint32_t j = i; j-- > 0;) {  // the latest first: an earlier conflict is often implied by a later wait
            if (covered[j / 64] >> (j % 64) & 1 || !conflict(ranges + (size_t)j * MAX_RANGES, range_count[j], mine, n))
                continue;
            if (end == capacity) {
                uint32_t* grown = realloc(w->list, 2 * capacity * sizeof(uint32_t));
                if (!grown) {
                    status = fail(f, "cuda device: cannot allocate a ring entry's waits; free memory");
                    break;
                }
                w->list = grown, capacity *= 2;
            }
            w->list[end++] = j;
            const uint64_t* theirs = before + (size_t)j * words;
            for (size_t k = 0; k < words; k++) covered[k] |= theirs[k];
            covered[j / 64] |= (uint64_t)1 << (j % 64);
        }
        for (uint32_t a = begin, b = end; a + 1 < b; a++, b--) {  // ascending
            uint32_t x = w->list[a];
            w->list[a] = w->list[b - 1], w->list[b - 1] = x;
        }
        w->start[i + 1] = end;
    }
    free(ranges), free(range_count), free(before);
    if (status != 0) entry_waits_free(w);
    return status;
}

int entry_waits_for(const entry_waits* w, uint32_t i, uint32_t j) {
    for (uint32_t k = w->start[i]; k < w->start[i + 1]; k++)
        if (w->list[k] == j) return 1;
    return 0;
}

void entry_waits_free(entry_waits* w) {
    free(w->start), free(w->list);
    memset(w, 0, sizeof *w);
}
