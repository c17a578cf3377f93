// mathf.h: the few float32 functions the kernels need, written so that loops over them
// vectorize and give the same bits on x86-64 and AArch64 (only +, *, fmaf, rintf and bit
// moves: no libm call whose last bit could differ between two C libraries).
#ifndef COPPELIUS_MATHF_H
#define COPPELIUS_MATHF_H
#include <math.h>

#include "half.h"

// exp(x), within about 1 ulp: x = n ln2 + r with |r| <= ln2/2 (ln2 in two parts, so r is exact),
// exp(r) by Cephes' degree-7 form 1 + r + r^2 P(r), times 2^n built in the exponent bits.
// Results below about 2^-125 flush to 0 (they vanish beside any softmax denominator).
static inline float exp_f(float x) {
    float clamped = fminf(fmaxf(x, -86.6f), 88.72283f);
    float n = rintf(clamped * 1.44269504088896341f);
    float r = fmaf(n, -0.693145751953125f, clamped);
    r = fmaf(n, -1.428606765330187045e-06f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    p = fmaf(p, r * r, r) + 1.0f;
    float half_scale = bits_float((uint32_t)((int)n + 126) << 23);  // 2^(n-1), n in [-125, 128]
    float y = p * half_scale * 2.0f;
    y = x < -86.6f ? 0.0f : y;
    y = x > 88.72283f ? INFINITY : y;
    return x != x ? x : y;
}

// tanh(x) = 1 - 2 / (exp(2x) + 1): exact limits +-1, absolute error about 1e-7 near 0.
static inline float tanh_f(float x) { return 1.0f - 2.0f / (exp_f(2.0f * x) + 1.0f); }

// Sums and dot products in eight interleaved partial sums, combined in a fixed tree: the
// order is fixed by the code (not by the compiler), and the loop vectorizes.
static inline float sum_f(const float* x, int n) {
    float lane[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) lane[j] += x[i + j];
    for (int j = 0; i < n; i++, j++) lane[j] += x[i];
    return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

static inline float dot_f(const float* x, const float* y, int n) {
    float lane[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) lane[j] = fmaf(x[i + j], y[i + j], lane[j]);
    for (int j = 0; i < n; i++, j++) lane[j] = fmaf(x[i], y[i], lane[j]);
    return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

static inline float max_f(const float* x, int n) {
    float m = -INFINITY;
    for (int i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

#endif
