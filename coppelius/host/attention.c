// attention.c: attention_forward and attention_backward (kernels.h), causal, multi-head.
//
// qkv (B,T,3C) packs q, k, v; head h of each is the channel slice [h*hs, (h+1)*hs). For a query
// t: s[u] = (q_t . k_u) * scale for u <= t (scale = 1/sqrt(hs)), lse_t = max + log sum exp(s - max),
// p[u] = exp(s[u] - lse_t), out_t = sum_u p[u] v_u. The backward recomputes p from lse:
// dv_u += p[u] do_t, dp[u] = do_t . v_u, ds = p (dp - do_t . o_t), dq_t = scale sum_u ds[u] k_u,
// dk_u += ds[u] q_t (times scale at the end). Items are (b, h) pairs; each thread owns whole
// heads, so every sum has one owner and a fixed order.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels.h"
#include "mathf.h"
#include "threads.h"

typedef struct {
    half* out; float* lse; half* dqkv; const half* dout; const half* qkv; const half* o; const float* lse_in;
    int T, C, NH;
} attention_job;

static float* head_buffers(int floats) {
    float* buffer = malloc((size_t)floats * sizeof(float));
    if (!buffer) { fprintf(stderr, "cpu device: attention: out of memory\n"); exit(71); }
    return buffer;
}

// rows (T, hs) of one head of a (B, T, width) fp16 tensor -> float32 (T, hs)
static void load_head(float* out, const half* base, long b, int h, int T, int width, int hs) {
    for (int t = 0; t < T; t++) halves_to_floats(out + t * hs, base + ((long)b * T + t) * width + h * hs, hs);
}

// the same, transposed: (hs, T)
static void load_head_transposed(float* out, const half* base, long b, int h, int T, int width, int hs) {
    for (int t = 0; t < T; t++)
        for (int d = 0; d < hs; d++) out[d * T + t] = half_to_float(base[((long)b * T + t) * width + h * hs + d]);
}

// s[u] = (q . k_u) * scale for u in [0, count): k transposed (hs, T), the loop over u vectorizes.
// It runs to count rounded up to 8 (within T), so that no loop has a scalar tail; the keys past
// count are computed and never used.
static void scores(float* s, const float* q, const float* kt, int count, int T, int hs, float scale) {
    count = (count + 7) / 8 * 8 < T ? (count + 7) / 8 * 8 : T;
    for (int u = 0; u < count; u++) s[u] = 0.0f;
    for (int d = 0; d < hs; d++)
        for (int u = 0; u < count; u++) s[u] = fmaf(q[d], kt[d * T + u], s[u]);
    for (int u = 0; u < count; u++) s[u] *= scale;
}

// rows[u] += w[u] x for u < count (rows of n floats; x never overlaps them), fixed n for the usual sizes
static inline void add_scaled_rows_n(float* restrict rows, const float* restrict w, const float* restrict x,
                                     int count, int n) {
    for (int u = 0; u < count; u++)
        for (int i = 0; i < n; i++) rows[u * n + i] = fmaf(w[u], x[i], rows[u * n + i]);
}

static void add_scaled_rows(float* rows, const float* w, const float* x, int count, int n) {
    switch (n) {
    case 16: add_scaled_rows_n(rows, w, x, count, 16); break;
    case 32: add_scaled_rows_n(rows, w, x, count, 32); break;
    case 64: add_scaled_rows_n(rows, w, x, count, 64); break;
    default: add_scaled_rows_n(rows, w, x, count, n);
    }
}

// y (n) = sum over u < count of w[u] rows[u] (count rows of n floats), in order of u. The usual
// head sizes get a copy with n fixed, whose y stays in registers; the order of the sums is the same.
static inline void accumulate_rows_n(float* restrict y, const float* restrict w, const float* restrict rows,
                                     int count, int n) {
    float sum[n];
    for (int i = 0; i < n; i++) sum[i] = 0.0f;
    for (int u = 0; u < count; u++)
        for (int i = 0; i < n; i++) sum[i] = fmaf(w[u], rows[u * n + i], sum[i]);
    for (int i = 0; i < n; i++) y[i] = sum[i];
}

static void accumulate_rows(float* y, const float* w, const float* rows, int count, int n) {
    switch (n) {
    case 16: accumulate_rows_n(y, w, rows, count, 16); break;
    case 32: accumulate_rows_n(y, w, rows, count, 32); break;
    case 64: accumulate_rows_n(y, w, rows, count, 64); break;
    default: accumulate_rows_n(y, w, rows, count, n);
    }
}

static void forward_range(void* context, long start, long end) {
    const attention_job* job = context;
    const int T = job->T, C = job->C, NH = job->NH, hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    float* buffers = head_buffers(3 * T * hs + 2 * T + hs);
    float *q = buffers, *kt = q + T * hs, *v = kt + T * hs, *s = v + T * hs, *e = s + T, *y = e + T;
    for (long item = start; item < end; item++) {
        long b = item / NH;
        int h = (int)(item % NH);
        load_head(q, job->qkv, b, h, T, 3 * C, hs);
        load_head_transposed(kt, job->qkv + C, b, h, T, 3 * C, hs);
        load_head(v, job->qkv + 2 * C, b, h, T, 3 * C, hs);
        for (int t = 0; t < T; t++) {
            int count = t + 1;  // causal: keys 0..t
            scores(s, q + t * hs, kt, count, T, hs, scale);
            float top = max_f(s, count);
            for (int u = 0; u < count; u++) e[u] = exp_f(s[u] - top);
            float lse = top + logf(sum_f(e, count));
            for (int u = 0; u < count; u++) e[u] = exp_f(s[u] - lse);  // the probabilities
            accumulate_rows(y, e, v, count, hs);
            half* o = job->out + (b * T + t) * C + h * hs;
            for (int d = 0; d < hs; d++) o[d] = float_to_half(y[d]);
            job->lse[(b * NH + h) * T + t] = lse;
        }
    }
    free(buffers);
}

void attention_forward(half* out, float* lse, const half* qkv, int B, int T, int C, int NH) {
    attention_job job = {out, lse, NULL, NULL, qkv, NULL, NULL, T, C, NH};
    parallel_for((long)B * NH, 1, forward_range, &job);
}

static void backward_range(void* context, long start, long end) {
    const attention_job* job = context;
    const int T = job->T, C = job->C, NH = job->NH, hs = C / NH;
    const float scale = 1.0f / sqrtf((float)hs);
    float* buffers = head_buffers(8 * T * hs + 3 * T + hs);
    float *q = buffers, *k = q + T * hs, *kt = k + T * hs, *vt = kt + T * hs, *dy = vt + T * hs;
    float *o = dy + T * hs, *dk = o + T * hs, *dv = dk + T * hs, *p = dv + T * hs, *dp = p + T, *ds = dp + T;
    float* dq = ds + T;
    for (long item = start; item < end; item++) {
        long b = item / NH;
        int h = (int)(item % NH);
        load_head(q, job->qkv, b, h, T, 3 * C, hs);
        load_head(k, job->qkv + C, b, h, T, 3 * C, hs);
        load_head_transposed(kt, job->qkv + C, b, h, T, 3 * C, hs);
        load_head_transposed(vt, job->qkv + 2 * C, b, h, T, 3 * C, hs);
        load_head(dy, job->dout, b, h, T, C, hs);
        load_head(o, job->o, b, h, T, C, hs);
        for (int i = 0; i < T * hs; i++) dk[i] = dv[i] = 0.0f;
        for (int t = 0; t < T; t++) {
            int count = t + 1;
            const float* qt = q + t * hs;
            const float* dyt = dy + t * hs;
            float lse = job->lse_in[(b * NH + h) * T + t];
            scores(p, qt, kt, count, T, hs, scale);
            for (int u = 0; u < count; u++) p[u] = exp_f(p[u] - lse);
            scores(dp, dyt, vt, count, T, hs, 1.0f);        // dp[u] = do_t . v_u
            float delta = dot_f(dyt, o + t * hs, hs);       // do_t . o_t
            for (int u = 0; u < count; u++) ds[u] = p[u] * (dp[u] - delta);
            accumulate_rows(dq, ds, k, count, hs);           // dq = sum_u ds[u] k_u (scaled below)
            add_scaled_rows(dk, ds, qt, count, hs);          // dk_u += ds[u] q_t
            add_scaled_rows(dv, p, dyt, count, hs);          // dv_u += p[u] do_t
            half* dqt = job->dqkv + (b * T + t) * 3 * C + h * hs;
            for (int d = 0; d < hs; d++) dqt[d] = float_to_half(dq[d] * scale);
        }
        for (int u = 0; u < T; u++) {
            half* row = job->dqkv + (b * T + u) * 3 * C + h * hs;
            for (int d = 0; d < hs; d++) {
                row[C + d] = float_to_half(dk[u * hs + d] * scale);
                row[2 * C + d] = float_to_half(dv[u * hs + d]);
            }
        }
    }
    free(buffers);
}

void attention_backward(half* dqkv, const half* dout, const half* qkv, const half* out, const float* lse,
                        int B, int T, int C, int NH) {
    attention_job job = {NULL, NULL, dqkv, dout, qkv, out, lse, T, C, NH};
    parallel_for((long)B * NH, 1, backward_range, &job);
}
