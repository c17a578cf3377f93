// sample.h: drawing the next token from one row of logits, exactly as coppelius/formats/sampling.py
// does (docs/formats.md, "Sampling"): splitmix64, a uniform from its top 24 bits, greedy argmax at
// temperature 0, top-k candidates, weights by exp64 in binary64, summed left to right. Built with
// -ffp-contract=off, so every operation below rounds once, as Python's floats do.
#ifndef COPPELIUS_SAMPLE_H
#define COPPELIUS_SAMPLE_H
#include <stdint.h>

typedef struct { uint64_t state; } splitmix64;

uint64_t splitmix64_next(splitmix64* g);
double splitmix64_uniform(splitmix64* g);  // (next >> 40) * 2^-24, in [0, 1)
double exp64(double x);                     // e^x for x <= 0 (0 below -700)
// The next id from logits[0..vocab) (binary64 values of f16 logits, all finite). `order` is
// scratch room for vocab ids. temperature 0: greedy.
uint32_t sample_next(const double* logits, uint32_t vocab, double temperature, uint32_t top_k, splitmix64* g,
                     uint32_t* order);
#endif
