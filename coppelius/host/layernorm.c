// layernorm.c: layernorm_forward and layernorm_backward (kernels.h), rows of C channels.
//
// Forward: mean and biased variance per row, rstd = 1/sqrt(var + 1e-5), out = (x - mean) * rstd
// * w + b. Backward: dx = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)) with
// dnorm = dout * w and norm = (x - mean) * rstd, added to dinp; dw = sum over rows of
// dout * norm, db = sum of dout, first per block of rows into the partials (the CUDA kernel's
// blocks: layernorm_backward_blocks), then the blocks' sums in order (layernorm_backward_weight).
// Rows go to threads for dx, blocks for the partials, channels for dw and db, so each sum has one
// owner and a fixed order.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels.h"
#include "mathf.h"
#include "threads.h"

static float* row_buffers(const char* kernel, int count, int C) {
    float* buffer = malloc((size_t)count * (size_t)C * sizeof(float));
    if (!buffer) { fprintf(stderr, "cpu device: %s: out of memory\n", kernel); exit(71); }
    return buffer;
}

typedef struct {
    half* out; float* mean; float* rstd; const half* inp; const half* weight; const half* bias; int C;
} forward_job;

static void forward_range(void* context, long start, long end) {
    const forward_job* job = context;
    const int C = job->C;
    float* buffers = row_buffers("layernorm_forward", 4, C);
    float *x = buffers, *xc = buffers + C, *w = buffers + 2 * C, *b = buffers + 3 * C;
    halves_to_floats(w, job->weight, C);
    halves_to_floats(b, job->bias, C);
    for (long n = start; n < end; n++) {
        halves_to_floats(x, job->inp + n * C, C);
        float mean = sum_f(x, C) / (float)C;
        for (int c = 0; c < C; c++) xc[c] = x[c] - mean;
        float var = dot_f(xc, xc, C) / (float)C;
        float rstd = 1.0f / sqrtf(var + 1e-5f);
        half* o = job->out + n * C;
        for (int c = 0; c < C; c++) o[c] = float_to_half(xc[c] * rstd * w[c] + b[c]);
        job->mean[n] = mean;
        job->rstd[n] = rstd;
    }
    free(buffers);
}

void layernorm_forward(half* out, float* mean, float* rstd, const half* inp, const half* weight, const half* bias,
                       int N, int C) {
    forward_job job = {out, mean, rstd, inp, weight, bias, C};
    parallel_for(N, 8, forward_range, &job);
}

// formats/geometry.py: LAYERNORM_BLOCK_ROWS, LAYERNORM_MAX_BLOCKS
#define BLOCK_ROWS 4
#define MAX_BLOCKS 1024

int layernorm_backward_blocks(int N) {
    int blocks = (N + BLOCK_ROWS - 1) / BLOCK_ROWS;
    return blocks < 1 ? 1 : blocks > MAX_BLOCKS ? MAX_BLOCKS : blocks;
}

typedef struct {
    half* dinp; float* partials; const half* dout; const half* inp; const half* weight;
    const float* mean; const float* rstd; int N, C, rows;
} backward_job;

// items: rows n; dinp[n] += rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm))
static void dinp_range(void* context, long start, long end) {
    const backward_job* job = context;
    const int C = job->C;
    float* buffers = row_buffers("layernorm_backward", 4, C);
    float *w = buffers, *norm = buffers + C, *dnorm = buffers + 2 * C, *product = buffers + 3 * C;
    halves_to_floats(w, job->weight, C);
    for (long n = start; n < end; n++) {
        const half* x = job->inp + n * C;
        const half* dy = job->dout + n * C;
        float mean = job->mean[n], rstd = job->rstd[n];
        for (int c = 0; c < C; c++) {
            norm[c] = (half_to_float(x[c]) - mean) * rstd;
            dnorm[c] = half_to_float(dy[c]) * w[c];
            product[c] = dnorm[c] * norm[c];
        }
        float dnorm_mean = sum_f(dnorm, C) / (float)C;
        float product_mean = sum_f(product, C) / (float)C;
        half* dx = job->dinp + n * C;
        for (int c = 0; c < C; c++) {
            float grad = rstd * (dnorm[c] - dnorm_mean - norm[c] * product_mean);
            dx[c] = float_to_half(half_to_float(dx[c]) + grad);
        }
    }
    free(buffers);
}

// items: blocks p; partials[p] = (sum of dout * norm, sum of dout) over the block's rows, in row order
static void partial_range(void* context, long start, long end) {
    const backward_job* job = context;
    const int C = job->C;
    for (long p = start; p < end; p++) {
        float *dw = job->partials + p * 2 * C, *db = dw + C;
        for (int c = 0; c < C; c++) dw[c] = db[c] = 0.0f;
        long first = p * job->rows, last = first + job->rows < job->N ? first + job->rows : job->N;
        for (long n = first; n < last; n++) {
            const half* x = job->inp + n * C;
            const half* dy = job->dout + n * C;
            float mean = job->mean[n], rstd = job->rstd[n];
            for (int c = 0; c < C; c++) {
                float g = half_to_float(dy[c]);
                dw[c] += g * ((half_to_float(x[c]) - mean) * rstd);
                db[c] += g;
            }
        }
    }
}

void layernorm_backward(half* dinp, float* partials, const half* dout, const half* inp, const half* weight,
                        const float* mean, const float* rstd, int N, int C) {
    int blocks = layernorm_backward_blocks(N);
    backward_job job = {dinp, partials, dout, inp, weight, mean, rstd, N, C, (N + blocks - 1) / blocks};
    parallel_for(N, 8, dinp_range, &job);
    parallel_for(blocks, 1, partial_range, &job);
}

typedef struct {
    half* dweight; half* dbias; const float* partials; int blocks, C;
} weight_job;

// items: columns j of (2, C); the partials' rows added in order
static void column_range(void* context, long start, long end) {
    const weight_job* job = context;
    for (long j = start; j < end; j++) {
        float total = 0.0f;
        for (int p = 0; p < job->blocks; p++) total += job->partials[(long)p * 2 * job->C + j];
        if (j < job->C) job->dweight[j] = float_to_half(total);
        else job->dbias[j - job->C] = float_to_half(total);
    }
}

void layernorm_backward_weight(half* dweight, half* dbias, const float* partials, int N, int C) {
    weight_job job = {dweight, dbias, partials, layernorm_backward_blocks(N), C};
    parallel_for(2L * C, 64, column_range, &job);
}
