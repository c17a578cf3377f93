// pointwise.c: the element-wise kernels (kernels.h): gelu_forward, gelu_backward,
// residual_forward, nonfinite_check, adamw, cast_half. Items are elements; each is
// independent, so any split gives the same bits. Expressions keep the reference's order of
// operations (coppelius/kernels/reference.py), one rounding per operation.
#include <math.h>

#include "kernels.h"
#include "mathf.h"
#include "threads.h"

enum { GRAIN = 1 << 14 };  // elements below which a second thread costs more than it saves

#define GELU_SCALE 0.7978845608028654f  // sqrt(2/pi)
#define GELU_A 0.044715f
#define GELU_3A ((float)(3.0 * 0.044715))  // the reference's 3.0 * _GELU_A, a double product

typedef struct { half* out; const half* a; const half* b; } binary_job;

static void gelu_forward_range(void* context, long start, long end) {
    const binary_job* job = context;
    for (long i = start; i < end; i++) {
        float x = half_to_float(job->a[i]);
        float th = tanh_f(GELU_SCALE * (x + GELU_A * x * x * x));
        job->out[i] = float_to_half(0.5f * x * (1.0f + th));
    }
}

void gelu_forward(half* out, const half* inp, int N) {
    binary_job job = {out, inp, NULL};
    parallel_for(N, GRAIN, gelu_forward_range, &job);
}

// out_gelu = gelu(x), then x = 0.5 (1 + th) + 0.5 x sech^2 s (1 + 3 a x^2) (the slope), th = tanh(s (x + a x^3))
typedef struct { half* x_to_slope; half* out_gelu; } gelu_job;

static void gelu_value_slope_range(void* context, long start, long end) {
    const gelu_job* job = context;
    for (long i = start; i < end; i++) {
        float x = half_to_float(job->x_to_slope[i]);
        float th = tanh_f(GELU_SCALE * (x + GELU_A * x * x * x));
        float sech2 = 1.0f - th * th;
        job->out_gelu[i] = float_to_half(0.5f * x * (1.0f + th));
        float slope = 0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SCALE * (1.0f + GELU_3A * x * x);
        job->x_to_slope[i] = float_to_half(slope);
    }
}

void gelu_value_slope(half* x_to_slope, half* out_gelu, int N) {
    gelu_job job = {x_to_slope, out_gelu};
    parallel_for(N, GRAIN, gelu_value_slope_range, &job);
}

// out = a * b (gelu_backward: the product of two halves is exact in float, one rounding) or a + b (residual_forward),
// element by element, in blocks of BLOCK whose loads come before their stores: so a call in place (out the array of
// an input, as matmul_backward_input_gelu's gelu_backward) still vectorizes. Element by element, the compiler tests
// the arrays for overlap and, finding it, takes its scalar loop (gelu_backward: 7% of the tiny step).
enum { BLOCK = 8 };

static inline float combined(const binary_job* job, long i, int product) {
    float a = half_to_float(job->a[i]), b = half_to_float(job->b[i]);
    return product ? a * b : a + b;
}

static inline void binary_range(const binary_job* job, long start, long end, int product) {
    long i = start;
    for (; i + BLOCK <= end; i += BLOCK) {
        float value[BLOCK];
        for (int j = 0; j < BLOCK; j++) value[j] = combined(job, i + j, product);
        for (int j = 0; j < BLOCK; j++) job->out[i + j] = float_to_half(value[j]);
    }
    for (; i < end; i++) job->out[i] = float_to_half(combined(job, i, product));
}

static void gelu_backward_range(void* context, long start, long end) { binary_range(context, start, end, 1); }

void gelu_backward(half* dinp, const half* slope, const half* dout, int N) {
    binary_job job = {dinp, slope, dout};
    parallel_for(N, GRAIN, gelu_backward_range, &job);
}

static void residual_range(void* context, long start, long end) { binary_range(context, start, end, 0); }

void residual_forward(half* out, const half* inp1, const half* inp2, int N) {
    binary_job job = {out, inp1, inp2};
    parallel_for(N, GRAIN, residual_range, &job);
}

// A half is not finite when its exponent bits are all ones. Serial: it is one pass of reads
// and only ever writes 1, so nothing is gained by splitting it.
void nonfinite_check(int32_t* flag, const half* grads, int N) {
    int bad = 0;
    for (int i = 0; i < N; i++) bad |= (grads[i] & 0x7c00) == 0x7c00;
    if (bad) *flag = 1;
}

typedef struct {
    float* params; float* m; float* v; const half* grads; half* half_params;
    float beta1, beta2, decay, step_size, eps;
} adamw_job;

// m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g g;  p = p - decay p - step_size m / (sqrt(v) + eps)
static void adamw_range(void* context, long start, long end) {
    const adamw_job* job = context;
    const float b1 = job->beta1, b2 = job->beta2;
    for (long i = start; i < end; i++) {
        float g = half_to_float(job->grads[i]);
        float m = b1 * job->m[i] + (1.0f - b1) * g;
        float v = b2 * job->v[i] + (1.0f - b2) * g * g;
        float p = job->params[i];
        p = p - job->decay * p - job->step_size * m / (sqrtf(v) + job->eps);
        job->m[i] = m, job->v[i] = v, job->params[i] = p;
        job->half_params[i] = float_to_half(p);
    }
}

void adamw(float* params, float* m, float* v, const half* grads, half* half_params, const int32_t* flag, int N,
           float beta1, float beta2, float decay, float step_size, float eps) {
    if (*flag) return;  // a step with non-finite gradients is skipped whole
    adamw_job job = {params, m, v, grads, half_params, beta1, beta2, decay, step_size, eps};
    parallel_for(N, GRAIN, adamw_range, &job);
}

typedef struct { half* out; const float* in; } cast_job;

static void cast_range(void* context, long start, long end) {
    const cast_job* job = context;
    for (long i = start; i < end; i++) job->out[i] = float_to_half(job->in[i]);
}

void cast_half(half* out, const float* inp, int N) {
    cast_job job = {out, inp};
    parallel_for(N, GRAIN, cast_range, &job);
}
