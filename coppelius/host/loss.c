// loss.c: crossentropy_forward, crossentropy_backward, crossentropy_forward_backward,
// crossentropy_forward_backward_stats, argmax_forward and softmax_stats (kernels.h); items are rows of
// logits (N, Vp), of which the first V columns are real tokens.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels.h"
#include "mathf.h"
#include "threads.h"

typedef struct {
    float* losses; half* dlogits; int32_t* predictions; const half* logits; const int32_t* targets;
    const float* stats;  // (N, P, 2) parts of each row's max and sum of exp, P = ceil(Vp / width); NULL: the row's own
    int V, Vp, width; float scale;
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

// z -= top, e = exp(z) over n values
static void softmax_terms(float* z, float* e, int n, float top) {
    for (int j = 0; j < n; j++) z[j] -= top;
    for (int j = 0; j < n; j++) e[j] = exp_f(z[j]);
}

// A row's max, and its sum of exp in *total, from its P parts (max, sum of exp) merged in order: the larger
// max, both sums rescaled to it; (-inf, 0) while every part so far is empty.
static float merge_parts(const float* parts, long P, float* total) {
    float top = -INFINITY, sum = 0.0f;
    for (long j = 0; j < P; j++) {
        float m = parts[2 * j], s = parts[2 * j + 1];
        float next = m > top ? m : top;
        sum = next == -INFINITY ? 0.0f : sum * exp_f(top - next) + s * exp_f(m - next);
        top = next;
    }
    *total = sum;
    return top;
}

// Per row: losses[n] = log(sum exp z) - z[target] when job->losses; when job->dlogits,
// dlogits[n] = (e / sum(e) - onehot(target)) * scale, padding columns 0. One softmax serves both; its max and
// sum come from job->stats when given. The row is read whole before dlogits (which may be logits) is written.
static void rows_range(void* context, long start, long end) {
    const loss_job* job = context;
    const char* kernel = !job->dlogits ? "crossentropy_forward"
                         : !job->losses ? "crossentropy_backward"
                         : job->stats ? "crossentropy_forward_backward_stats" : "crossentropy_forward_backward";
    long parts = job->stats ? ((long)job->Vp + job->width - 1) / job->width : 0;
    float* z = row_buffer(job->V);
    float* e = z + job->V;
    for (long n = start; n < end; n++) {
        int target = job->targets[n];
        check_target(kernel, n, target, job->V);
        halves_to_floats(z, job->logits + n * job->Vp, job->V);
        float total, top = job->stats ? merge_parts(job->stats + n * parts * 2, parts, &total) : max_f(z, job->V);
        softmax_terms(z, e, job->V, top);
        if (!job->stats) total = sum_f(e, job->V);
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
    loss_job job = {losses, NULL, NULL, logits, targets, NULL, V, Vp, 0, 0.0f};
    parallel_for(N, 4, rows_range, &job);
}

void crossentropy_backward(half* dlogits, const half* logits, const int32_t* targets, int N, int V, int Vp,
                           float scale) {
    loss_job job = {NULL, dlogits, NULL, logits, targets, NULL, V, Vp, 0, scale};
    parallel_for(N, 4, rows_range, &job);
}

void crossentropy_forward_backward(float* losses, half* dlogits, const half* logits, const int32_t* targets, int N,
                                   int V, int Vp, float scale) {
    loss_job job = {losses, dlogits, NULL, logits, targets, NULL, V, Vp, 0, scale};
    parallel_for(N, 4, rows_range, &job);
}

void crossentropy_forward_backward_stats(float* losses, half* dlogits, const half* logits, const float* stats,
                                         const int32_t* targets, int N, int V, int Vp, int width, float scale) {
    loss_job job = {losses, dlogits, NULL, logits, targets, stats, V, Vp, width, scale};
    parallel_for(N, 4, rows_range, &job);
}

typedef struct { float* stats; const half* x; int cols, V, width; } stats_job;

// Per row of x (N, cols), each part j of width columns cut at V: its max m and the sum of exp(x - m), as the
// softmax above computes them; an empty part gets (-inf, 0) (the max and the sum of no values)
static void stats_range(void* context, long start, long end) {
    const stats_job* job = context;
    long parts = ((long)job->cols + job->width - 1) / job->width;
    int most = job->width < job->V ? job->width : job->V;  // the longest part
    float* z = row_buffer(most > 0 ? most : 1);
    float* e = z + most;
    for (long n = start; n < end; n++) {
        const half* row = job->x + n * job->cols;
        float* out = job->stats + n * parts * 2;
        for (long j = 0; j < parts; j++) {
            long from = j * job->width, count = job->V - from < most ? job->V - from : most;
            if (count < 0) count = 0;
            halves_to_floats(z, row + from, count);
            float top = max_f(z, (int)count);
            softmax_terms(z, e, (int)count, top);
            out[2 * j] = top, out[2 * j + 1] = sum_f(e, (int)count);
        }
    }
    free(z);
}

void softmax_stats(float* stats, const half* x, int N, int cols, int V, int width) {
    stats_job job = {stats, x, cols, V, width};
    parallel_for(N, 4, stats_range, &job);
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
    loss_job job = {NULL, NULL, predictions, logits, NULL, NULL, V, Vp, 0, 0.0f};
    parallel_for(N, 16, argmax_range, &job);
}
