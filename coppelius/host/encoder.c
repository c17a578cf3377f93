// encoder.c: encoder_forward and encoder_backward (kernels.h).
#include <stdio.h>
#include <stdlib.h>

#include "kernels.h"
#include "threads.h"

static void check_tokens(const char* kernel, const int32_t* tokens, long count, int Vp) {
    for (long i = 0; i < count; i++)
        if (tokens[i] < 0 || tokens[i] >= Vp) {
            fprintf(stderr, "cpu device: %s: token %ld is %d, not below the padded vocab %d; the token check before "
                    "the run missed it: this is a bug\n", kernel, i, tokens[i], Vp);
            exit(70);
        }
}

typedef struct {
    half* out; const int32_t* tokens; const half* wte; const half* wpe; int T, C;
} forward_job;

// items: rows (b, t) of out
static void forward_range(void* context, long start, long end) {
    const forward_job* job = context;
    const int C = job->C;
    for (long row = start; row < end; row++) {
        const half* token_row = job->wte + (long)job->tokens[row] * C;
        const half* position_row = job->wpe + (row % job->T) * C;
        half* o = job->out + row * C;
        for (int c = 0; c < C; c++) o[c] = float_to_half(half_to_float(token_row[c]) + half_to_float(position_row[c]));
    }
}

void encoder_forward(half* out, const int32_t* tokens, const half* wte, const half* wpe, int B, int T, int C, int Vp) {
    check_tokens("encoder_forward", tokens, (long)B * T, Vp);
    forward_job job = {out, tokens, wte, wpe, T, C};
    parallel_for((long)B * T, 16, forward_range, &job);
}

// The order of dwte's sums (formats/geometry.py: encoder_segments): up to SEGMENTED_VOCAB rows, a row's positions
// fall in SEGMENTS segments of segment_length positions, each summed from +0 in position order, the segments'
// sums then added in segment order; above it, one segment.
#define SEGMENTS 8
#define SEGMENTED_VOCAB 512

static long segment_length(long N, int Vp) {
    const long segments = Vp <= SEGMENTED_VOCAB ? SEGMENTS : 1, pack = 8;
    return pack * ((N + pack * segments - 1) / (pack * segments));
}

typedef struct {
    half* dwte; half* dwpe; const half* dout; const long* order; const long* first; long length; int B, T, C;
} backward_job;

// items: rows v of dwte. Row v gets the sum of dout over the positions holding token v, in the
// order above, added to dwte once and rounded once.
static void dwte_range(void* context, long start, long end) {
    const backward_job* job = context;
    const int C = job->C;
    float* sum = malloc(2 * (size_t)C * sizeof(float));
    if (!sum) { fprintf(stderr, "cpu device: encoder_backward: out of memory\n"); exit(71); }
    float* part = sum + C;  // the current segment's sum
    for (long v = start; v < end; v++) {
        for (int c = 0; c < C; c++) sum[c] = part[c] = 0.0f;
        long segment = -1;
        for (long i = job->first[v]; i < job->first[v + 1]; i++) {
            if (job->order[i] / job->length != segment) {  // positions ascend: a new segment starts
                for (int c = 0; c < C; c++) sum[c] += part[c], part[c] = 0.0f;
                segment = job->order[i] / job->length;
            }
            const half* d = job->dout + job->order[i] * C;
            for (int c = 0; c < C; c++) part[c] += half_to_float(d[c]);
        }
        half* row = job->dwte + v * C;
        for (int c = 0; c < C; c++) row[c] = float_to_half(half_to_float(row[c]) + (sum[c] + part[c]));
    }
    free(sum);
}

// items: positions t of dwpe: dwpe[t] = dout[0, t] + dout[1, t] + ... in order of b
static void dwpe_range(void* context, long start, long end) {
    const backward_job* job = context;
    const int C = job->C;
    for (long t = start; t < end; t++)
        for (int c = 0; c < C; c++) {
            float sum = half_to_float(job->dout[t * C + c]);
            for (int b = 1; b < job->B; b++) sum += half_to_float(job->dout[((long)b * job->T + t) * C + c]);
            job->dwpe[t * C + c] = float_to_half(sum);
        }
}

void encoder_backward(half* dwte, half* dwpe, const half* dout, const int32_t* tokens, int B, int T, int C, int Vp) {
    const long N = (long)B * T;
    check_tokens("encoder_backward", tokens, N, Vp);
    // positions grouped by token, each group in position order (a stable counting sort)
    long* first = calloc((size_t)Vp + 1, sizeof(long));
    long* order = malloc((size_t)(N > 0 ? N : 1) * sizeof(long));
    if (!first || !order) { fprintf(stderr, "cpu device: encoder_backward: out of memory\n"); exit(71); }
    for (long i = 0; i < N; i++) first[tokens[i] + 1]++;
    for (int v = 0; v < Vp; v++) first[v + 1] += first[v];
    long* next = malloc((size_t)Vp * sizeof(long) + 1);
    if (!next) { fprintf(stderr, "cpu device: encoder_backward: out of memory\n"); exit(71); }
    for (int v = 0; v < Vp; v++) next[v] = first[v];
    for (long i = 0; i < N; i++) order[next[tokens[i]]++] = i;
    free(next);
    backward_job job = {dwte, dwpe, dout, order, first, segment_length(N, Vp), B, T, C};
    parallel_for(Vp, 8, dwte_range, &job);
    parallel_for(T, 4, dwpe_range, &job);
    free(first);
    free(order);
}
