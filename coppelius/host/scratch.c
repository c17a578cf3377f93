// scratch.c: the kernels' reusable float32 buffers (scratch.h).
#include "scratch.h"

#include <stdio.h>
#include <stdlib.h>

#include "threads.h"

static struct { float* data; long count; } slots[SCRATCH_SLOTS];

float* scratch(int slot, long count) {
    if (slot < 0 || slot >= SCRATCH_SLOTS || count < 0) {
        fprintf(stderr, "cpu device: scratch slot %d of %ld floats is out of range; this is a bug\n", slot, count);
        exit(70);
    }
    if (count > slots[slot].count) {
        free(slots[slot].data);
        slots[slot].data = malloc((size_t)count * sizeof(float));
        slots[slot].count = slots[slot].data ? count : 0;
        if (!slots[slot].data) {
            fprintf(stderr, "cpu device: cannot allocate %ld bytes of kernel scratch; free memory or use a smaller "
                    "batch\n", count * (long)sizeof(float));
            exit(71);
        }
    }
    return slots[slot].data;
}

typedef struct { float* out; const half* in; } convert_job;

static void convert_range(void* context, long start, long end) {
    convert_job* job = context;
    halves_to_floats(job->out + start, job->in + start, end - start);
}

void halves_to_floats_parallel(float* out, const half* in, long n) {
    convert_job job = {out, in};
    parallel_for(n, 1 << 14, convert_range, &job);
}
