// host_sample_driver.c: the C sampler (coppelius/host/sample.c) on cases read from stdin, for
// tests/unit/test_sampling.py. Each case: "vocab temperature top_k seed draws" then vocab logits;
// temperature and logits as C99 hex floats (exact). Prints the ids drawn from the row, `draws` times
// from one generator, on one line. "exp X" prints exp64(X)'s bits instead.
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample.h"

int main(void) {
    char word[64];
    while (scanf("%63s", word) == 1) {
        if (strcmp(word, "exp") == 0) {
            char x[64];
            if (scanf("%63s", x) != 1) return 1;
            double y = exp64(strtod(x, NULL));
            uint64_t bits;
            memcpy(&bits, &y, 8);
            printf("%016" PRIx64 "\n", bits);
            continue;
        }
        uint32_t vocab = (uint32_t)strtoul(word, NULL, 10), top_k, draws;
        char temperature[64], value[64];
        uint64_t seed;
        if (scanf("%63s %u %" SCNu64 " %u", temperature, &top_k, &seed, &draws) != 4) return 1;
        double* logits = malloc(vocab * sizeof *logits);
        uint32_t* order = malloc(vocab * sizeof *order);
        for (uint32_t i = 0; i < vocab; i++) {
            if (scanf("%63s", value) != 1) return 1;
            logits[i] = strtod(value, NULL);
        }
        splitmix64 g = {seed};
        for (uint32_t d = 0; d < draws; d++)
            printf("%u%c", sample_next(logits, vocab, strtod(temperature, NULL), top_k, &g, order),
                   d + 1 < draws ? ' ' : '\n');
        free(logits), free(order);
    }
    return 0;
}
