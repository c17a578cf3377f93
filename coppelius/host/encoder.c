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

// The order of dwte's sums (formats/geometry.py: encoder_run_length): a row's n positions, ascending, fall in runs
// of ceil(n / SEGMENTS), each summed from +0 in position order, the runs' sums then added in run order.
#define SEGMENTS 8

typedef struct {
    half* dwte; half* dwpe; const half* dout; const int32_t* order; const int32_t* first; int B, T, C;
} backward_job;

// items: rows v of dwte. Row v gets the sum of dout over the positions holding token v, in the
// order above, added to dwte once and rounded once.
static void dwte_range(void* context, long start, long end) {
    const backward_job* job = context;
    const int C = job->C;
    float* sum = malloc(2 * (size_t)C * sizeof(float));
    if (!sum) { fprintf(stderr, "cpu device: encoder_backward: out of memory\n"); exit(71); }
    float* part = sum + C;  // the current run's sum
    for (long v = start; v < end; v++) {
        const long begin = job->first[v], n = job->first[v + 1] - begin, length = (n + SEGMENTS - 1) / SEGMENTS;
        for (int c = 0; c < C; c++) sum[c] = part[c] = 0.0f;
        for (long i = 0; i < n; i++) {
            if (i > 0 && i % length == 0)  // a new run starts
                for (int c = 0; c < C; c++) sum[c] += part[c], part[c] = 0.0f;
            const half* d = job->dout + (long)job->order[begin + i] * C;
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

// A stable counting sort of the positions by token.
void encoder_sort(int32_t* order, int32_t* first, const int32_t* tokens, int N, int Vp) {
    check_tokens("encoder_sort", tokens, N, Vp);
    for (int v = 0; v <= Vp; v++) first[v] = 0;
    for (int i = 0; i < N; i++) first[tokens[i] + 1]++;
    for (int v = 0; v < Vp; v++) first[v + 1] += first[v];
    int32_t* next = malloc(((size_t)Vp + 1) * sizeof(int32_t));
    if (!next) { fprintf(stderr, "cpu device: encoder_sort: out of memory\n"); exit(71); }
    for (int v = 0; v < Vp; v++) next[v] = first[v];
    for (int i = 0; i < N; i++) order[next[tokens[i]]++] = i;
    free(next);
}

void encoder_backward(half* dwte, half* dwpe, const half* dout, const int32_t* order, const int32_t* first, int B,
                      int T, int C, int Vp) {
    const long N = (long)B * T;
    if (first[0] != 0 || first[Vp] != N) {
        fprintf(stderr, "cpu device: encoder_backward: the token groups span [%d, %d), not the %ld positions; "
                "encoder_sort did not run before it: this is a bug\n", first[0], first[Vp], N);
        exit(70);
    }
    for (int v = 0; v < Vp; v++)
        if (first[v + 1] < first[v]) {
            fprintf(stderr, "cpu device: encoder_backward: token group %d ends before it starts; encoder_sort did "
                    "not run before it: this is a bug\n", v);
            exit(70);
        }
    for (long i = 0; i < N; i++)
        if (order[i] < 0 || order[i] >= N) {
            fprintf(stderr, "cpu device: encoder_backward: order[%ld] is %d, not a position below %ld; encoder_sort "
                    "did not run before it: this is a bug\n", i, order[i], N);
            exit(70);
        }
    backward_job job = {dwte, dwpe, dout, order, first, B, T, C};
    parallel_for(Vp, 8, dwte_range, &job);
    parallel_for(T, 4, dwpe_range, &job);
}
