// sample.c: the sampling arithmetic (sample.h); every line mirrors coppelius/formats/sampling.py.
#include "sample.h"

#include <math.h>
#include <stdlib.h>

uint64_t splitmix64_next(splitmix64* g) {
    uint64_t z = (g->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double splitmix64_uniform(splitmix64* g) { return (double)(splitmix64_next(g) >> 40) * 0x1p-24; }

double exp64(double x) {
    static const double INV_LN2 = 0x1.71547652b82fep+0, LN2_HI = 0x1.62e42fee00000p-1,
                        LN2_LO = 0x1.a39ef35793c76p-33;
    if (x < -700.0) return 0.0;
    double k = floor(x * INV_LN2 + 0.5);
    double r = (x - k * LN2_HI) - k * LN2_LO;  // |r| <= ln2 / 2; k * LN2_HI is exact
    double q = 1.0;
    for (int n = 13; n >= 1; n--) q = 1.0 + (r / (double)n) * q;  // e^r, Taylor to r^13, Horner
    return ldexp(q, (int)k);
}

// Candidates in the order of the document: larger logit first, the lower id first among equals.
static const double* ordering;
static int by_logit(const void* a, const void* b) {
    uint32_t i = *(const uint32_t*)a, j = *(const uint32_t*)b;
    if (ordering[i] != ordering[j]) return ordering[i] > ordering[j] ? -1 : 1;
    return i < j ? -1 : i > j;
}

uint32_t sample_next(const double* logits, uint32_t vocab, double temperature, uint32_t top_k, splitmix64* g,
                     uint32_t* order) {
    if (temperature == 0.0) {
        uint32_t best = 0;
        for (uint32_t i = 1; i < vocab; i++)
            if (logits[i] > logits[best]) best = i;
        return best;
    }
    for (uint32_t i = 0; i < vocab; i++) order[i] = i;
    ordering = logits;
    qsort(order, vocab, sizeof *order, by_logit);  // a total order: any sort gives these candidates
    double top = logits[order[0]], total = 0.0, running = 0.0;
    for (uint32_t c = 0; c < top_k; c++) total += exp64((logits[order[c]] - top) / temperature);
    double target = splitmix64_uniform(g) * total;
    for (uint32_t c = 0; c < top_k; c++) {
        running += exp64((logits[order[c]] - top) / temperature);  // the same weight, computed again
        if (target < running) return order[c];
    }
    return order[top_k - 1];
}
