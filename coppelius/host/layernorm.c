// layernorm.c: layernorm_forward and layernorm_backward (kernels.h), rows of C channels.
//
// Forward: mean and biased variance per row, rstd = 1/sqrt(var + 1e-5), out = (x - mean) * rstd
// * w + b. Backward: dx = rstd * (dnorm - mean(dnorm) - norm * mean(dnorm * norm)) with
// dnorm = dout * w and norm = (x - mean) * rstd, added to dinp; dw = sum over rows of
// dout * norm, db = sum of dout (written). Rows go to threads for dx, channels for dw and db,
// so each sum has one owner and a fixed order.
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

typedef struct {
    half* dinp; half* dweight; half* dbias; const half* dout; const half* inp; const half* weight;
    const float* mean; const float* rstd; int N, C;
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

// items: channels c; dweight[c] = sum_n dout * norm, dbias[c] = sum_n dout, in order of n
static void dweight_range(void* context, long start, long end) {
    const backward_job* job = context;
    const int C = job->C, width = (int)(end - start);
    float* buffers = row_buffers("layernorm_backward", 2, width);
    float *dw = buffers, *db = buffers + width;
    for (int j = 0; j < width; j++) dw[j] = db[j] = 0.0f;
    for (long n = 0; n < job->N; n++) {
        const half* x = job->inp + n * C + start;
        const half* dy = job->dout + n * C + start;
        float mean = job->mean[n], rstd = job->rstd[n];
        for (int j = 0; j < width; j++) {
            float g = half_to_float(dy[j]);
            dw[j] += g * ((half_to_float(x[j]) - mean) * rstd);
            db[j] += g;
        }
    }
    for (int j = 0; j < width; j++) {
        job->dweight[start + j] = float_to_half(dw[j]);
        job->dbias[start + j] = float_to_half(db[j]);
    }
    free(buffers);
}

void layernorm_backward(half* dinp, half* dweight, half* dbias, const half* dout, const half* inp,
                        const half* weight, const float* mean, const float* rstd, int N, int C) {
    backward_job job = {dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C};
    parallel_for(N, 8, dinp_range, &job);
    parallel_for(C, 8, dweight_range, &job);
}
