// generate.h: the generate operation (docs/formats.md, "Generate"; tests/reference_host/generate.py is
// the interpreter's, with the same checks in the same order and the same one-line refusals):
//
//   host.elf --operation generate --checkpoint C (--prompt TEXT | --prompt-tokens FILE) --new-tokens N
//            [--temperature X] [--top-k K] [--seed S] --out FILE
//
// The options are checked as text first (plain decimals), the prompt once the checkpoint is; then
// the host program's generate part runs sample-context, the forward, the sample piece and
// sample-token once per new token, and write-sample publishes the sample at --out and prints it.
#ifndef COPPELIUS_GENERATE_H
#define COPPELIUS_GENERATE_H
#include <stdint.h>

#include "failure.h"
#include "sample.h"

typedef struct {
    // the command line, as given (NULL: absent)
    const char *prompt, *prompt_tokens, *new_tokens_text, *temperature_text, *top_k_text, *seed_text;
    uint64_t new_tokens, top_k, seed;
    int top_k_given;
    double temperature;
    uint32_t vocab, context;
    int byte_level;
    uint32_t* ids;              // the sequence: the prompt, then every sampled id
    uint64_t count;
    double* row;                // scratch: one row of logits as binary64
    uint32_t* order;            // scratch: the candidates' order
    splitmix64 generator;
} generation;

// The options' syntax (before anything is read). 0, or -1 with the refusal.
int generate_parse_options(generation* g, failure* f);
// top-k against the vocab, then the prompt (bytes, or a token file), against vocab and context. 0, or -1.
int generate_check_prompt(generation* g, uint32_t vocab, uint32_t context, failure* f);
// sample-context: the window (the newest <= positions ids) -> `into`, as i32; its length.
uint64_t generate_window(const generation* g, uint8_t* into, uint64_t positions);
// sample-token: the next id from row min(count, positions) - 1 of `rows` (f16, bytes / positions a row).
int generate_take(generation* g, const uint8_t* rows, uint64_t positions, uint64_t bytes, const char* elf, failure* f);
// write-sample: the sample published at `path` and printed on stdout. 0, or -1.
int generate_write(const generation* g, const char* path, failure* f);
void generate_close(generation* g);
#endif
