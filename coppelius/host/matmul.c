// matmul.c: matmul_forward, matmul_backward_input, matmul_backward_weight, matmul_forward_gelu,
// matmul_backward_input_gelu and matmul_forward_stats (kernels.h).
//
// All three are one product, out[r][m] = bias[m] + sum_k a[r][k] * b[k][m], over float32 copies
// of the fp16 operands:
//   forward          a = inp (N,C)      b = weight^T (C,OC)   out (N,OC)
//   backward_input   a = dout (N,OC)    b = weight (OC,C)     out (N,C)
//   backward_weight  a = dout^T (OC,N)  b = inp (N,C)         out (OC,C)   (a read from dout in place)
// Each output element is summed in order of k, one fused multiply-add (fmaf) per term, by the
// one thread that owns its row: the sum is the same for any thread count, on x86-64 and on
// AArch64. The loop over m is innermost, so the compiler vectorizes it across outputs (no
// reassociation needed); ROWS rows share each load of b, TILE outputs stay in registers.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels.h"
#include "scratch.h"
#include "threads.h"

enum { ROWS = 6, TILE = 16 };

typedef struct {
    half* out;           // (rows, M) fp16
    const float* a;      // element (r, k) at a[r * a_row + k * a_k]
    long a_row, a_k;
    const float* b;      // (K, M)
    const float* bias;   // (M) or NULL
    int K, M;
    int accumulate;      // out = round(out + product) instead of round(product)
} product_job;

// out rows [r0, r0 + rows) of one product, rows <= ROWS; `rows_f` holds ROWS * M floats
static void product_rows(const product_job* job, long r0, int rows, float* rows_f) {
    const int K = job->K, M = job->M;
    float acc[ROWS][TILE];
    for (int m0 = 0; m0 < M; m0 += TILE) {
        int width = M - m0 < TILE ? M - m0 : TILE;
        for (int r = 0; r < ROWS; r++)
            for (int j = 0; j < TILE; j++) acc[r][j] = job->bias && j < width ? job->bias[m0 + j] : 0.0f;
        if (width == TILE && rows == ROWS) {  // the common case: fixed trip counts the compiler unrolls
            for (int k = 0; k < K; k++) {
                const float* bk = job->b + (long)k * M + m0;
                for (int r = 0; r < ROWS; r++) {
                    float x = job->a[(r0 + r) * job->a_row + k * job->a_k];
                    for (int j = 0; j < TILE; j++) acc[r][j] = fmaf(x, bk[j], acc[r][j]);
                }
            }
        } else {
            for (int k = 0; k < K; k++) {
                const float* bk = job->b + (long)k * M + m0;
                for (int r = 0; r < rows; r++) {
                    float x = job->a[(r0 + r) * job->a_row + k * job->a_k];
                    for (int j = 0; j < width; j++) acc[r][j] = fmaf(x, bk[j], acc[r][j]);
                }
            }
        }
        for (int r = 0; r < rows; r++)
            for (int j = 0; j < width; j++) rows_f[r * M + m0 + j] = acc[r][j];
    }
    // the stores in long contiguous loops, which vectorize (the tile loops above are too short)
    half* out = job->out + r0 * M;
    long count = (long)rows * M;
    if (job->accumulate) {
        float* old = rows_f + (long)ROWS * M;
        halves_to_floats(old, out, count);
        for (long i = 0; i < count; i++) rows_f[i] += old[i];
    }
    floats_to_halves(out, rows_f, count);
}

static float* rows_buffer(const product_job* job) {
    float* buffer = malloc((size_t)ROWS * 2 * (size_t)job->M * sizeof(float));
    if (!buffer) { fprintf(stderr, "cpu device: matmul: out of memory\n"); exit(71); }
    return buffer;
}

static void product_range(void* context, long start, long end) {
    // items are blocks of ROWS rows (product() does the short last block)
    const product_job* job = context;
    float* rows_f = rows_buffer(job);
    for (long block = start; block < end; block++) product_rows(job, block * ROWS, ROWS, rows_f);
    free(rows_f);
}

static void product(product_job* job, long rows) {
    long full = rows / ROWS;
    parallel_for(full, 4, product_range, job);
    if (rows % ROWS) {
        float* rows_f = rows_buffer(job);
        product_rows(job, full * ROWS, (int)(rows % ROWS), rows_f);
        free(rows_f);
    }
}

typedef struct { float* out; const half* in; int rows, cols; } transpose_job;

enum { TRANSPOSE_BLOCK = 16 };

// out (cols, rows) float32 = in (rows, cols) fp16, transposed; items are blocks of 16 columns of
// `in`, read a row segment at a time (a column at a time would touch a new cache line per element)
static void transpose_range(void* context, long start, long end) {
    const transpose_job* job = context;
    for (long block = start; block < end; block++) {
        long c0 = block * TRANSPOSE_BLOCK, c1 = c0 + TRANSPOSE_BLOCK < job->cols ? c0 + TRANSPOSE_BLOCK : job->cols;
        for (int r = 0; r < job->rows; r++) {
            const half* row = job->in + (long)r * job->cols;
            for (long c = c0; c < c1; c++) job->out[c * job->rows + r] = half_to_float(row[c]);
        }
    }
}

static void transpose_to_floats(float* out, const half* in, int rows, int cols) {
    transpose_job job = {out, in, rows, cols};
    parallel_for((cols + TRANSPOSE_BLOCK - 1) / TRANSPOSE_BLOCK, 1, transpose_range, &job);
}

void matmul_forward(half* out, const half* inp, const half* weight, const half* bias, int N, int C, int OC) {
    float* a = scratch(0, (long)N * C);
    float* b = scratch(1, (long)C * OC);
    float* bias_f = bias ? scratch(2, OC) : NULL;
    halves_to_floats_parallel(a, inp, (long)N * C);
    transpose_to_floats(b, weight, OC, C);
    if (bias) halves_to_floats(bias_f, bias, OC);
    product_job job = {out, a, C, 1, b, bias_f, C, OC, 0};
    product(&job, N);
}

void matmul_backward_input(half* dinp, const half* dout, const half* weight, int N, int C, int OC) {
    float* a = scratch(0, (long)N * OC);
    float* b = scratch(1, (long)OC * C);
    halves_to_floats_parallel(a, dout, (long)N * OC);
    halves_to_floats_parallel(b, weight, (long)OC * C);
    product_job job = {dinp, a, OC, 1, b, NULL, OC, C, 0};
    product(&job, N);
}

void matmul_forward_gelu(half* slope, half* out_gelu, const half* inp, const half* weight, const half* bias, int N,
                         int C, int OC) {
    matmul_forward(slope, inp, weight, bias, N, C, OC);  // the products, replaced by their slopes in place
    gelu_value_slope(slope, out_gelu, N * OC);
}

void matmul_forward_stats(half* out, float* stats, const half* inp, const half* weight, int N, int C, int OC, int V,
                          int width) {
    matmul_forward(out, inp, weight, NULL, N, C, OC);
    softmax_stats(stats, out, N, OC, V, width);  // from out's fp16 values, as stored
}

void matmul_backward_input_gelu(half* dinp, const half* dout, const half* weight, const half* slope, int N, int C,
                                int OC) {
    matmul_backward_input(dinp, dout, weight, N, C, OC);
    gelu_backward(dinp, slope, dinp, N * C);  // element i read, then written: in place is safe
}

typedef struct { half* dbias; const float* dout; int N, OC; } bias_job;

// dbias[oc] = sum over n of dout[n][oc], in order of n; items are output channels
static void bias_range(void* context, long start, long end) {
    const bias_job* job = context;
    float* sum = malloc((size_t)(end - start) * sizeof(float));
    if (!sum) { fprintf(stderr, "cpu device: matmul: out of memory\n"); exit(71); }
    for (long oc = start; oc < end; oc++) sum[oc - start] = 0.0f;
    for (int n = 0; n < job->N; n++) {
        const float* row = job->dout + (long)n * job->OC;
        for (long oc = start; oc < end; oc++) sum[oc - start] += row[oc];
    }
    for (long oc = start; oc < end; oc++) job->dbias[oc] = float_to_half(sum[oc - start]);
    free(sum);
}

void matmul_backward_weight(half* dweight, half* dbias, const half* dout, const half* inp, int N, int C, int OC,
                            uint32_t accumulate) {
    // a = dout^T read in place: element (oc, n) of dout (N, OC) is at dout[n * OC + oc]
    float* a = scratch(0, (long)N * OC);
    float* b = scratch(1, (long)N * C);
    halves_to_floats_parallel(a, dout, (long)N * OC);
    halves_to_floats_parallel(b, inp, (long)N * C);
    product_job job = {dweight, a, 1, OC, b, NULL, N, C, accumulate != 0};
    product(&job, OC);
    if (dbias) {
        bias_job bj = {dbias, a, N, OC};
        parallel_for(OC, 16, bias_range, &bj);
    }
}
