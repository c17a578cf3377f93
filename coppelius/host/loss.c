// loss.c: crossentropy_forward, crossentropy_backward, crossentropy_forward_backward, argmax_forward
// (kernels.h); items are rows of logits (N, Vp), of which the first V columns are real tokens.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels.h"
#include "mathf.h"
#include "threads.h"

typedef struct {
    float* losses; half* dlogits; int32_t* predictions; const half* logits; const int32_t* targets;
    int V, Vp; float scale;
} loss_job;

static float* row_buffer(int V) {
    float* buffer = malloc((size_t)V * 2 * sizeof(float));
    if (!buffer) { fprintf(stderr, "cpu device: crossentropy: out of memory\n"); exit(71); }
    return buffer;
}

static void check_target(const char* kernel, long row, int target, int V) {
    if (target < 0 || target >= V) {
        fprintf(stderr, "cpu device: %s: target %ld is %d, not below the vocab %d; the token check before the run "
                "missed it: this is a bug\n", kernel, row, target, V);
        exit(70);
    }
}

// z = logits - max (first V columns), e = exp(z); returns sum(e)
static float softmax_terms(float* z, float* e, const half* row, int V) {
    halves_to_floats(z, row, V);
    float top = max_f(z, V);
    for (int j = 0; j < V; j++) z[j] -= top;
    for (int j = 0; j < V; j++) e[j] = exp_f(z[j]);
    return sum_f(e, V);
}

// Per row: losses[n] = log(sum exp z) - z[target] when job->losses; when job->dlogits,
// dlogits[n] = (e / sum(e) - onehot(target)) * scale, padding columns 0. One softmax serves both.
static void rows_range(void* context, long start, long end) {
    const loss_job* job = context;
    const char* kernel = !job->dlogits ? "crossentropy_forward"
                         : job->losses ? "crossentropy_forward_backward" : "crossentropy_backward";
    float* z = row_buffer(job->V);
    float* e = z + job->V;
    for (long n = start; n < end; n++) {
        int target = job->targets[n];
        check_target(kernel, n, target, job->V);
        float total = softmax_terms(z, e, job->logits + n * job->Vp, job->V);
        if (job->losses) job->losses[n] = logf(total) - z[target];
        if (!job->dlogits) continue;
        half* d = job->dlogits + n * job->Vp;
        for (int j = 0; j < job->V; j++)
            d[j] = float_to_half((e[j] / total - (j == target ? 1.0f : 0.0f)) * job->scale);
        for (int j = job->V; j < job->Vp; j++) d[j] = 0;
    }
    free(z);
}

void crossentropy_forward(float* losses, const half* logits, const int32_t* targets, int N, int V, int Vp) {
    loss_job job = {losses, NULL, NULL, logits, targets, V, Vp, 0.0f};
    parallel_for(N, 4, rows_range, &job);
}

void crossentropy_backward(half* dlogits, const half* logits, const int32_t* targets, int N, int V, int Vp,
                           float scale) {
    loss_job job = {NULL, dlogits, NULL, logits, targets, V, Vp, scale};
    parallel_for(N, 4, rows_range, &job);
}

void crossentropy_forward_backward(float* losses, half* dlogits, const half* logits, const int32_t* targets, int N,
                                   int V, int Vp, float scale) {
    loss_job job = {losses, dlogits, NULL, logits, targets, V, Vp, scale};
    parallel_for(N, 4, rows_range, &job);
}

// the first index of the maximum, a NaN counting as the maximum (numpy's argmax)
static void argmax_range(void* context, long start, long end) {
    const loss_job* job = context;
    for (long n = start; n < end; n++) {
        const half* row = job->logits + n * job->Vp;
        int best = 0;
        float top = half_to_float(row[0]);
        for (int j = 1; j < job->V && top == top; j++) {
            float x = half_to_float(row[j]);
            if (x > top || x != x) best = j, top = x;
        }
        job->predictions[n] = best;
    }
}

void argmax_forward(int32_t* predictions, const half* logits, int N, int V, int Vp) {
    loss_job job = {NULL, NULL, predictions, logits, NULL, V, Vp, 0.0f};
    parallel_for(N, 16, argmax_range, &job);
}
