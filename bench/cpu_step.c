// cpu_step.c: the native cpu training step, timed (bench/cpu_step.py builds and runs it).
//
// It loads a plan's tables (docs/formats.md layouts, written by cpu_step.py into a folder) into
// the C cpu device of coppelius/host, walks the host program for train with the runtime's
// walker, and does each step's host work as the runtime does: fill, checkpoint payload chunks
// into the staging buffer, token ids at the cursor, the AdamW step size patched into the step
// words, submissions, the per-step loss. It publishes nothing: checkpoint and result steps are
// counted and skipped (a benchmark of the step, not a run).
//
//   cpu_step DIR CHECKPOINT TOKENS THREADS
// DIR holds launches, relocations, commands, ring, step_words, planes, buffers, program .bin
// and run.txt: "arena_bytes host_bytes lr beta1 beta2 tokens_per_step".
// Prints one line per step ("step T loss L", "skipped" when its gradients were not finite; a step's
// loss is recorded a step late, as the runtime does) and "tokens_per_second X" over the steps (from
// the step size's patch to the end of its update's submission, which the cpu device runs at once).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device_cpu.h"
#include "program.h"
#include "threads.h"
#include "tokens.h"

typedef struct {
    cpu_device device;
    FILE* checkpoint;
    token_stream tokens;
    uint64_t cursor, t, recorded, tokens_per_step, steps;
    double lr, beta1, beta2, started, update_seconds;  // started: at the step size's patch, 0 once submitted
    failure f;
} bench;

static double now(void) {
    struct timespec s;
    clock_gettime(CLOCK_MONOTONIC, &s);
    return (double)s.tv_sec + 1e-9 * (double)s.tv_nsec;
}

static uint8_t* load(const char* dir, const char* name, uint64_t* bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE* file = fopen(path, "rb");
    if (!file) { fprintf(stderr, "cpu_step: cannot open %s\n", path); exit(1); }
    fseek(file, 0, SEEK_END);
    long size = ftell(file);
    fseek(file, 0, SEEK_SET);
    uint8_t* data = malloc((size_t)size + 1);
    if (!data || fread(data, 1, (size_t)size, file) != (size_t)size) { fprintf(stderr, "cpu_step: cannot read %s\n",
            path); exit(1); }
    fclose(file);
    *bytes = (uint64_t)size;
    return data;
}

static void table_or_exit(const char* dir, const char* name, const char* magic, uint32_t record_bytes, table* t) {
    uint64_t bytes;
    uint8_t* data = load(dir, name, &bytes);
    failure f;
    if (table_read(data, bytes, magic, record_bytes, name, t, &f) != 0) { fprintf(stderr, "%s\n", f.line); exit(1); }
}

static int step(void* context, const program_step* s) {
    bench* b = context;
    uint64_t bytes;
    switch (s->op) {
    case STEP_SUBMIT: case STEP_REISSUE:
        if (cpu_device_issue(&b->device, s->ring, &b->f)) return 1;
        if (b->started > 0) b->update_seconds += now() - b->started, b->steps++, b->started = 0;
        return 0;
    case STEP_FILL:
        memset(cpu_device_buffer(&b->device, s->buffer, &bytes) + s->offset, (int)s->value, s->bytes);
        return 0;
    case STEP_READ: {
        uint8_t* into = cpu_device_buffer(&b->device, s->buffer, &bytes);
        if (fseek(b->checkpoint, (long)(4096 + s->offset), SEEK_SET) != 0 || fread(into, 1, s->bytes,
                b->checkpoint) != s->bytes)
            return fail(&b->f, "checkpoint: payload bytes [%llu, +%llu) cannot be read", (unsigned long long)s->offset,
                        (unsigned long long)s->bytes), 1;
        return 0;
    }
    case STEP_READ_AT_CURSOR: {
        int32_t* ids = (int32_t*)cpu_device_buffer(&b->device, s->buffer, &bytes);
        if (b->cursor + s->count > (uint64_t)b->tokens.count)
            return fail(&b->f, "%s: too few tokens for the run", b->tokens.path), 1;
        for (uint64_t i = 0; i < s->count; i++) ids[i] = b->tokens.ids[b->cursor + i];
        return 0;
    }
    case STEP_CURSOR_FROM_CHECKPOINT: b->cursor = 0, b->t = 0; return 0;  // the initial checkpoint's
    case STEP_CURSOR_ADVANCE: b->cursor += s->count; return 0;
    case STEP_ADAMW_SCALARS:
        b->t++;
        cpu_device_patch_step_size(&b->device, step_size(b->lr, b->beta1, b->beta2, b->t));
        b->started = now();
        return 0;
    case STEP_RECORD_STAT: {
        if (s->value != 1) return 0;  // the step's loss only: the oldest update not yet recorded
        const float* losses = (const float*)cpu_device_buffer(&b->device, s->buffer, &bytes);
        double sum = 0.0;
        for (uint64_t i = 0; i < b->tokens_per_step; i++) sum += losses[i];
        int32_t skipped;  // after the losses
        memcpy(&skipped, losses + b->tokens_per_step, 4);
        printf("step %llu loss %.6f%s\n", (unsigned long long)++b->recorded, sum / (double)b->tokens_per_step,
               skipped ? " skipped" : "");
        return 0;
    }
    default:  // write, checkpoint-begin/-publish, write-status, write-timestamps, operation: not benchmarked
        return 0;
    }
}

int main(int argc, char** argv) {
    if (argc != 5) { fprintf(stderr, "usage: cpu_step DIR CHECKPOINT TOKENS THREADS\n"); return 2; }
    const char* dir = argv[1];
    bench b;
    memset(&b, 0, sizeof b);
    char path[4096];
    snprintf(path, sizeof path, "%s/run.txt", dir);
    FILE* run = fopen(path, "r");
    unsigned long long arena_bytes, host_bytes, tokens_per_step;
    if (!run || fscanf(run, "%llu %llu %lf %lf %lf %llu", &arena_bytes, &host_bytes, &b.lr, &b.beta1, &b.beta2,
                       &tokens_per_step) != 6) {
        fprintf(stderr, "cpu_step: bad %s\n", path);
        return 1;
    }
    fclose(run);
    b.tokens_per_step = tokens_per_step;
    device_tables t;
    table program_records;
    table_or_exit(dir, "launches.bin", "COPLNCH", sizeof(launch_record), &t.launches);
    table_or_exit(dir, "relocations.bin", "COPRELO", sizeof(relocation_record), &t.relocations);
    table_or_exit(dir, "commands.bin", "COPCMDS", sizeof(command_record), &t.commands);
    table_or_exit(dir, "ring.bin", "COPRING", sizeof(ring_record), &t.ring);
    table_or_exit(dir, "step_words.bin", "COPSTEP", sizeof(step_word_record), &t.step_words);
    table_or_exit(dir, "planes.bin", "COPPLAN", sizeof(plane_record), &t.planes);
    table_or_exit(dir, "buffers.bin", "COPBUFS", sizeof(buffer_record), &t.buffers);
    table_or_exit(dir, "program.bin", "COPHPRG", sizeof(program_step), &program_records);
    program p;
    if (program_check(&program_records, t.ring.count, t.buffers.count, "program.bin", &p, &b.f) != 0 ||
        tokens_open(argv[3], &b.tokens, &b.f) != 0 ||
        cpu_device_open(&b.device, &t, arena_bytes, host_bytes, dir, &b.f) != 0) {
        fprintf(stderr, "%s\n", b.f.line);
        return 1;
    }
    b.checkpoint = fopen(argv[2], "rb");
    if (!b.checkpoint) { fprintf(stderr, "cpu_step: cannot open %s\n", argv[2]); return 1; }
    printf("threads %d\n", threads_start(atoi(argv[4])));
    if (program_walk(&p, OPERATION_TRAIN, 0, 0, step, &b) != 0) {  // no generate tokens, no validation passes
        fprintf(stderr, "%s\n", b.f.line);
        return 1;
    }
    printf("steps %llu seconds %.4f tokens_per_second %.1f\n", (unsigned long long)b.steps, b.update_seconds,
           (double)(b.steps * b.tokens_per_step) / b.update_seconds);
    threads_stop();
    return 0;
}
