// device_tables.c: the checks every device makes of the tables at load (device_tables.h).
#include "device_tables.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"

#define REBUILD "rebuild it with `snakemake`"

void* table_record(const table* t, uint32_t i) { return (void*)(t->records + (uint64_t)i * t->record_bytes); }

// The table a copy's or memset's side indexes: the host buffers for an h2d's source or a d2h's destination (*host =
// 1), else the arena's planes. A record of either starts with its offset and its bytes (uint64_t each).
static const table* side_table(const device_tables* t, const command_record* c, int destination, int* host) {
    *host = destination ? c->op == OP_D2H : c->op == OP_H2D;
    return *host ? &t->buffers : &t->planes;
}

uint64_t command_side(const device_tables* t, const command_record* c, int destination, int* host) {
    const uint64_t* record = table_record(side_table(t, c, destination, host), destination ? c->dst : c->src);
    return record[0] + (destination ? c->dst_offset : c->src_offset);
}

static int sizes_ok(const device_tables* t, const char* where, failure* f) {
    const struct { const table* t; uint32_t bytes; const char* name; } kinds[] = {
        {&t->launches, sizeof(launch_record), "launches"}, {&t->relocations, sizeof(relocation_record), "relocations"},
        {&t->commands, sizeof(command_record), "commands"}, {&t->ring, sizeof(ring_record), "ring"},
        {&t->step_words, sizeof(step_word_record), "step_words"}, {&t->planes, sizeof(plane_record), "planes"},
        {&t->buffers, sizeof(buffer_record), "buffers"},
    };
    for (unsigned i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (kinds[i].t->record_bytes != kinds[i].bytes)
            return fail(f, "%s: section .coppelius.%s has %u-byte records, not %u; " REBUILD, where, kinds[i].name,
                        kinds[i].t->record_bytes, kinds[i].bytes);
    return 0;
}

// [offset, offset + bytes) lies in [0, limit)
static int inside(uint64_t offset, uint64_t bytes,
                  uint64_t limit) { return offset <= limit && bytes <= limit - offset; }

static int check_planes_and_buffers(loaded_tables* l, const char* where, failure* f) {
    for (uint32_t i = 0; i < l->t.planes.count; i++) {
        plane_record* p = table_record(&l->t.planes, i);
        if (!inside(p->offset, p->bytes, l->arena_bytes))
            return fail(f, "%s: plane %u [%llu, +%llu) is outside the %llu-byte arena; " REBUILD, where, i,
                        (unsigned long long)p->offset, (unsigned long long)p->bytes,
                        (unsigned long long)l->arena_bytes);
    }
    for (uint32_t i = 0; i < l->t.buffers.count; i++) {
        buffer_record* b = table_record(&l->t.buffers, i);
        if (!inside(b->offset, b->bytes, l->host_bytes))
            return fail(f, "%s: host buffer %u [%llu, +%llu) is outside the %llu-byte host block; " REBUILD, where, i,
                        (unsigned long long)b->offset, (unsigned long long)b->bytes, (unsigned long long)l->host_bytes);
    }
    return 0;
}

// Each relocation adds the arena base to an 8-byte pointer that lies in a launch's block.
static int relocate(loaded_tables* l, const char* where, failure* f) {
    for (uint32_t i = 0; i < l->t.relocations.count; i++) {
        relocation_record* r = table_record(&l->t.relocations, i);
        if (!inside(r->param_offset, 8, l->t.launches.blob_bytes) || r->plane >= l->t.planes.count)
            return fail(f, "%s: relocation %u (param_offset %u, plane %u) is outside the parameter blob or the planes; "
                        REBUILD, where, i, r->param_offset, r->plane);
        uint64_t pointer;
        memcpy(&pointer, l->parameters + r->param_offset, 8);
        pointer += l->base;
        memcpy(l->parameters + r->param_offset, &pointer, 8);
    }
    return 0;
}

int launch_bytes(const loaded_tables* l, uint32_t i, launch_args* args, uint64_t bytes[MAX_PARAMS], char* error,
                 int error_bytes) {
    const launch_record* r = table_record(&l->t.launches, i);
    int64_t elements[MAX_PARAMS];
    if (!inside(r->param_offset, r->param_bytes, l->t.launches.blob_bytes)) {
        snprintf(error, (size_t)error_bytes, "block outside the blob");
        return -1;
    }
    if (decode_launch((int)r->kernel, l->parameters + r->param_offset, r->param_bytes, args, error, error_bytes) != 0 ||
        launch_extents(args, elements, error, error_bytes) != 0)
        return -1;
    for (int p = 0; p < CATALOG[args->kernel].count; p++) {
        param_kind kind = CATALOG[args->kernel].params[p].kind;
        bytes[p] = param_is_pointer(kind) ? (uint64_t)elements[p] * (uint64_t)param_element_bytes(kind) : 0;
    }
    return 0;
}

// Every launch decodes, its pointers lie in the arena; every command's extents lie in their planes and buffers.
static int check_commands(loaded_tables* lt, const char* where, failure* f) {
    uint64_t low = lt->base, high = low + lt->arena_bytes;
    for (uint32_t i = 0; i < lt->t.launches.count; i++) {
        launch_record* l = table_record(&lt->t.launches, i);
        launch_args args;
        uint64_t covered[MAX_PARAMS];
        failure why;
        if (launch_bytes(lt, i, &args, covered, why.line, sizeof why.line) != 0)
            return fail(f, "%s: launch %u does not decode (%s); " REBUILD, where, i, why.line);
        const kernel_abi* abi = &CATALOG[args.kernel];
        if (l->cluster > MAX_CLUSTER || (l->cluster > 1 && l->grid[0] % l->cluster != 0))
            return fail(f, "%s: launch %u (%s) has clusters of %u blocks over a grid of %u; a cluster is at most %d "
                        "blocks and divides the grid; " REBUILD, where, i, abi->name, l->cluster, l->grid[0],
                        MAX_CLUSTER);
        for (int p = 0; p < abi->count; p++) {
            if (!param_is_pointer(abi->params[p].kind) || args.address[p] == 0) continue;
            uint64_t bytes = covered[p];
            if (args.address[p] < low || !inside(args.address[p] - low, bytes, high - low))
                return fail(f,
                            "%s: launch %u (%s) %s covers %llu bytes at arena offset %lld, outside the arena; " REBUILD,
                            where, i, abi->name, abi->params[p].name, (unsigned long long)bytes,
                            (long long)(args.address[p] - low));
        }
    }
    for (uint32_t i = 0; i < lt->t.commands.count; i++) {
        command_record* c = table_record(&lt->t.commands, i);
        int ok = c->op <= OP_D2D;
        if (c->op == OP_LAUNCH) ok = c->a < lt->t.launches.count;
        if (ok && c->op != OP_LAUNCH) {
            int host;
            const table* src_table = side_table(&lt->t, c, 0, &host);
            const table* dst_table = side_table(&lt->t, c, 1, &host);
            ok = c->dst < dst_table->count && (c->op == OP_MEMSET || c->src < src_table->count);
            if (ok) {
                uint64_t* dst = table_record(dst_table, c->dst);  // offset, bytes
                ok = inside(c->dst_offset, c->bytes, dst[1]) && c->value <= 255;
                if (ok && c->op != OP_MEMSET) {
                    uint64_t* src = table_record(src_table, c->src);
                    ok = inside(c->src_offset, c->bytes, src[1]);
                }
            }
        }
        if (!ok)
            return fail(f,
                        "%s: command %u (op %u, src %u, dst %u, %llu bytes) is outside its planes or buffers; " REBUILD,
                        where, i, c->op, c->src, c->dst, (unsigned long long)c->bytes);
        if ((c->flags & ~(uint32_t)COMMAND_PROGRAMMATIC) || (c->flags && c->op != OP_LAUNCH))
            return fail(f, "%s: command %u (op %u) has flags 0x%x; only a launch may be programmatic (0x1); " REBUILD,
                        where, i, c->op, c->flags);
    }
    for (uint32_t i = 0; i < lt->t.ring.count; i++) {
        ring_record* r = table_record(&lt->t.ring, i);
        if (!inside(r->offset, r->length, lt->t.commands.count))
            return fail(f, "%s: ring entry %u (commands %u, +%u) is outside the command stream; " REBUILD, where, i,
                        r->offset, r->length);
        for (uint32_t j = r->offset; j < r->offset + r->length; j++) {  // the kernel waits for a launch, not a copy
            const command_record* c = table_record(&lt->t.commands, j);
            const command_record* before = j > r->offset ? table_record(&lt->t.commands, j - 1) : NULL;
            if (c->flags && !(before && before->op == OP_LAUNCH))
                return fail(f, "%s: command %u is a programmatic launch, but %s in ring entry %u; " REBUILD, where, j,
                            before ? "after a copy or memset" : "first", i);
        }
    }
    for (uint32_t i = 0; i < lt->t.step_words.count; i++) {
        step_word_record* w = table_record(&lt->t.step_words, i);
        if (!inside(w->step_size_offset, 4, lt->t.launches.blob_bytes) || !inside(w->eps_offset, 4,
                lt->t.launches.blob_bytes))
            return fail(f, "%s: step word %u is outside the parameter blob; " REBUILD, where, i);
        if (w->slot >= MAX_STEPS_PER_LAUNCH)
            return fail(f, "%s: step word %u has slot %u, past the %d steps an update piece holds; " REBUILD, where, i,
                        w->slot, MAX_STEPS_PER_LAUNCH);
    }
    return 0;
}

int tables_load(loaded_tables* l, const device_tables* tables, uint64_t base, uint64_t arena_bytes,
                uint64_t host_bytes, const char* where, failure* f) {
    memset(l, 0, sizeof *l);
    l->t = *tables, l->base = base, l->arena_bytes = arena_bytes, l->host_bytes = host_bytes;
    if (sizes_ok(tables, where, f) != 0) return -1;
    if (!(l->parameters = malloc(tables->launches.blob_bytes + 8)))
        return fail(f, "%s: cannot allocate the %llu-byte parameter blob; free memory", where,
                    (unsigned long long)tables->launches.blob_bytes);
    memcpy(l->parameters, tables->launches.blob, tables->launches.blob_bytes);
    if (check_planes_and_buffers(l, where, f) != 0 || relocate(l, where, f) != 0 || check_commands(l, where, f) != 0) {
        tables_unload(l);
        return -1;
    }
    return 0;
}

void tables_unload(loaded_tables* l) {
    free(l->parameters);
    l->parameters = NULL;
}
