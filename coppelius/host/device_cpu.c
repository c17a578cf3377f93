// device_cpu.c: the cpu device (device_cpu.h).
#include "device_cpu.h"

#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "faults.h"

int cpu_device_open(cpu_device* d, const device_tables* tables, uint64_t arena_bytes, uint64_t host_bytes,
                    const char* where, failure* f) {
    memset(d, 0, sizeof *d);
    d->arena_bytes = arena_bytes, d->host_bytes = host_bytes;
    d->arena = aligned_alloc(256, (arena_bytes + 255) / 256 * 256 + 256);
    d->host = aligned_alloc(256, (host_bytes + 255) / 256 * 256 + 256);
    if (!d->arena || !d->host) {
        cpu_device_close(d);
        return fail(f, "%s: cannot allocate the %llu-byte arena and %llu-byte host block; free memory or use a smaller "
                    "model or batch", where, (unsigned long long)arena_bytes, (unsigned long long)host_bytes);
    }
    memset(d->arena, 0, arena_bytes);
    memset(d->host, 0, host_bytes);
    if (tables_load(&d->l, tables, (uint64_t)(uintptr_t)d->arena, arena_bytes, host_bytes, where, f) != 0) {
        cpu_device_close(d);
        return -1;
    }
    return 0;
}

void cpu_device_patch_step_size(cpu_device* d, float word, uint32_t slot) {
    for (uint32_t i = 0; i < d->l.t.step_words.count; i++) {
        step_word_record* w = table_record(&d->l.t.step_words, i);
        if (w->slot == slot) memcpy(d->l.parameters + w->step_size_offset, &word, 4);
    }
}

int cpu_device_issue(cpu_device* d, uint32_t ring, failure* f) {
    ring_record* r = table_record(&d->l.t.ring, ring);
    uint64_t low = (uint64_t)(uintptr_t)d->arena, high = low + d->arena_bytes;
    for (uint32_t i = r->offset; i < r->offset + r->length; i++) {
        command_record* c = table_record(&d->l.t.commands, i);
        if (c->op == OP_LAUNCH) {
            fault_point("launch");
            launch_record* l = table_record(&d->l.t.launches, c->a);
            launch_args args;
            if (decode_launch((int)l->kernel, d->l.parameters + l->param_offset, l->param_bytes, &args, f->line,
                              sizeof f->line) != 0 ||
                run_launch(&args, low, high, f->line, sizeof f->line) != 0)
                return -1;
            continue;
        }
        int host;
        const uint64_t dst_at = command_side(&d->l.t, c, 1, &host);
        uint8_t* dst = (host ? d->host : d->arena) + dst_at;
        if (c->op == OP_MEMSET) {
            memset(dst, (int)c->value, c->bytes);
            continue;
        }
        const uint64_t src_at = command_side(&d->l.t, c, 0, &host);
        memmove(dst, (host ? d->host : d->arena) + src_at, c->bytes);
    }
    return 0;
}

uint8_t* cpu_device_buffer(cpu_device* d, uint32_t index, uint64_t* bytes) {
    buffer_record* b = table_record(&d->l.t.buffers, index);
    *bytes = b->bytes;
    return d->host + b->offset;
}

void cpu_device_close(cpu_device* d) {
    free(d->arena), free(d->host);
    tables_unload(&d->l);
    d->arena = d->host = d->l.parameters = NULL;
}
