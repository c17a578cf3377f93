// device_cpu.c: the cpu device (device_cpu.h).
#include "device_cpu.h"

#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "faults.h"

#define REBUILD "rebuild it with `snakemake`"

static void* record(const table* t, uint32_t i) { return (void*)(t->records + (uint64_t)i * t->record_bytes); }

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

static int check_planes_and_buffers(cpu_device* d, const char* where, failure* f) {
    for (uint32_t i = 0; i < d->t.planes.count; i++) {
        plane_record* p = record(&d->t.planes, i);
        if (!inside(p->offset, p->bytes, d->arena_bytes))
            return fail(f, "%s: plane %u [%llu, +%llu) is outside the %llu-byte arena; " REBUILD, where, i,
                        (unsigned long long)p->offset, (unsigned long long)p->bytes,
                        (unsigned long long)d->arena_bytes);
    }
    for (uint32_t i = 0; i < d->t.buffers.count; i++) {
        buffer_record* b = record(&d->t.buffers, i);
        if (!inside(b->offset, b->bytes, d->host_bytes))
            return fail(f, "%s: host buffer %u [%llu, +%llu) is outside the %llu-byte host block; " REBUILD, where, i,
                        (unsigned long long)b->offset, (unsigned long long)b->bytes, (unsigned long long)d->host_bytes);
    }
    return 0;
}

// Each relocation adds the arena base to an 8-byte pointer that lies in a launch's block.
static int relocate(cpu_device* d, const char* where, failure* f) {
    for (uint32_t i = 0; i < d->t.relocations.count; i++) {
        relocation_record* r = record(&d->t.relocations, i);
        if (!inside(r->param_offset, 8, d->t.launches.blob_bytes) || r->plane >= d->t.planes.count)
            return fail(f, "%s: relocation %u (param_offset %u, plane %u) is outside the parameter blob or the planes; "
                        REBUILD, where, i, r->param_offset, r->plane);
        uint64_t pointer;
        memcpy(&pointer, d->parameters + r->param_offset, 8);
        pointer += (uint64_t)(uintptr_t)d->arena;
        memcpy(d->parameters + r->param_offset, &pointer, 8);
    }
    return 0;
}

// Every launch decodes, its pointers lie in the arena; every command's extents lie in their planes and buffers.
static int check_commands(cpu_device* d, const char* where, failure* f) {
    uint64_t low = (uint64_t)(uintptr_t)d->arena, high = low + d->arena_bytes;
    for (uint32_t i = 0; i < d->t.launches.count; i++) {
        launch_record* l = record(&d->t.launches, i);
        launch_args args;
        int64_t elements[MAX_PARAMS];
        failure why;
        if (!inside(l->param_offset, l->param_bytes, d->t.launches.blob_bytes) ||
            decode_launch((int)l->kernel, d->parameters + l->param_offset, l->param_bytes, &args, why.line,
                          sizeof why.line) != 0 ||
            launch_extents(&args, elements, why.line, sizeof why.line) != 0)
            return fail(f, "%s: launch %u does not decode (%s); " REBUILD, where, i,
                        l->param_offset + (uint64_t)l->param_bytes > d->t.launches.blob_bytes ? "block outside the blob"
                                                                                               : why.line);
        const kernel_abi* abi = &CATALOG[args.kernel];
        for (int p = 0; p < abi->count; p++) {
            if (!param_is_pointer(abi->params[p].kind) || args.address[p] == 0) continue;
            uint64_t bytes = (uint64_t)elements[p] * (uint64_t)param_element_bytes(abi->params[p].kind);
            if (args.address[p] < low || !inside(args.address[p] - low, bytes, high - low))
                return fail(f,
                            "%s: launch %u (%s) %s covers %llu bytes at arena offset %lld, outside the arena; " REBUILD,
                            where, i, abi->name, abi->params[p].name, (unsigned long long)bytes,
                            (long long)(args.address[p] - low));
        }
    }
    for (uint32_t i = 0; i < d->t.commands.count; i++) {
        command_record* c = record(&d->t.commands, i);
        int ok = c->op <= OP_D2D;
        if (c->op == OP_LAUNCH) ok = c->a < d->t.launches.count;
        int device_src = c->op == OP_D2H || c->op == OP_D2D, device_dst = c->op != OP_D2H;
        if (ok && c->op != OP_LAUNCH) {
            const table* src_table = device_src ? &d->t.planes : &d->t.buffers;
            const table* dst_table = device_dst ? &d->t.planes : &d->t.buffers;
            ok = c->dst < dst_table->count && (c->op == OP_MEMSET || c->src < src_table->count);
            if (ok) {
                uint64_t* dst = record(dst_table, c->dst);  // offset, bytes: the first two fields of both kinds
                ok = inside(c->dst_offset, c->bytes, dst[1]) && c->value <= 255;
                if (ok && c->op != OP_MEMSET) {
                    uint64_t* src = record(src_table, c->src);
                    ok = inside(c->src_offset, c->bytes, src[1]);
                }
            }
        }
        if (!ok)
            return fail(f,
                        "%s: command %u (op %u, src %u, dst %u, %llu bytes) is outside its planes or buffers; " REBUILD,
                        where, i, c->op, c->src, c->dst, (unsigned long long)c->bytes);
    }
    for (uint32_t i = 0; i < d->t.ring.count; i++) {
        ring_record* r = record(&d->t.ring, i);
        if (!inside(r->offset, r->length, d->t.commands.count))
            return fail(f, "%s: ring entry %u (commands %u, +%u) is outside the command stream; " REBUILD, where, i,
                        r->offset, r->length);
    }
    for (uint32_t i = 0; i < d->t.step_words.count; i++) {
        step_word_record* w = record(&d->t.step_words, i);
        if (!inside(w->step_size_offset, 4, d->t.launches.blob_bytes) || !inside(w->eps_offset, 4,
                d->t.launches.blob_bytes))
            return fail(f, "%s: step word %u is outside the parameter blob; " REBUILD, where, i);
    }
    return 0;
}

int cpu_device_open(cpu_device* d, const device_tables* tables, uint64_t arena_bytes, uint64_t host_bytes,
                    const char* where, failure* f) {
    memset(d, 0, sizeof *d);
    d->t = *tables;
    if (sizes_ok(tables, where, f) != 0) return -1;
    d->arena_bytes = arena_bytes, d->host_bytes = host_bytes;
    d->arena = aligned_alloc(256, (arena_bytes + 255) / 256 * 256 + 256);
    d->host = aligned_alloc(256, (host_bytes + 255) / 256 * 256 + 256);
    d->parameters = malloc(tables->launches.blob_bytes + 8);
    if (!d->arena || !d->host || !d->parameters) {
        cpu_device_close(d);
        return fail(f, "%s: cannot allocate the %llu-byte arena and %llu-byte host block; free memory or use a smaller "
                    "model or batch", where, (unsigned long long)arena_bytes, (unsigned long long)host_bytes);
    }
    memset(d->arena, 0, arena_bytes);
    memset(d->host, 0, host_bytes);
    memcpy(d->parameters, tables->launches.blob, tables->launches.blob_bytes);
    if (check_planes_and_buffers(d, where, f) != 0 || relocate(d, where, f) != 0 || check_commands(d, where, f) != 0) {
        cpu_device_close(d);
        return -1;
    }
    return 0;
}

void cpu_device_patch_step_size(cpu_device* d, float word) {
    for (uint32_t i = 0; i < d->t.step_words.count; i++) {
        step_word_record* w = record(&d->t.step_words, i);
        memcpy(d->parameters + w->step_size_offset, &word, 4);
    }
}

int cpu_device_issue(cpu_device* d, uint32_t ring, failure* f) {
    ring_record* r = record(&d->t.ring, ring);
    uint64_t low = (uint64_t)(uintptr_t)d->arena, high = low + d->arena_bytes;
    for (uint32_t i = r->offset; i < r->offset + r->length; i++) {
        command_record* c = record(&d->t.commands, i);
        if (c->op == OP_LAUNCH) {
            fault_point("launch");
            launch_record* l = record(&d->t.launches, c->a);
            launch_args args;
            if (decode_launch((int)l->kernel, d->parameters + l->param_offset, l->param_bytes, &args, f->line,
                              sizeof f->line) != 0 ||
                run_launch(&args, low, high, f->line, sizeof f->line) != 0)
                return -1;
            continue;
        }
        uint8_t* dst = c->op == OP_D2H ? d->host + ((buffer_record*)record(&d->t.buffers, c->dst))->offset
                                       : d->arena + ((plane_record*)record(&d->t.planes, c->dst))->offset;
        dst += c->dst_offset;
        if (c->op == OP_MEMSET) {
            memset(dst, (int)c->value, c->bytes);
            continue;
        }
        const uint8_t* src = c->op == OP_H2D ? d->host + ((buffer_record*)record(&d->t.buffers, c->src))->offset
                                             : d->arena + ((plane_record*)record(&d->t.planes, c->src))->offset;
        memmove(dst, src + c->src_offset, c->bytes);
    }
    return 0;
}

uint8_t* cpu_device_buffer(cpu_device* d, uint32_t index, uint64_t* bytes) {
    buffer_record* b = record(&d->t.buffers, index);
    *bytes = b->bytes;
    return d->host + b->offset;
}

void cpu_device_close(cpu_device* d) {
    free(d->arena), free(d->host), free(d->parameters);
    d->arena = d->host = d->parameters = NULL;
}
