// generate.c: the generate operation's inputs and steps (generate.h).
#include "generate.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "publish.h"
#include "tokens.h"

enum { BYTE_LEVEL_VOCAB = 256, NEW_TOKENS_LIMIT = 1 << 20 };
static const uint64_t SEED_LIMIT = UINT64_MAX;

// [0-9]{1,20} whose value is in [low, high], as Python's int() reads it.
static int whole(const char* text, uint64_t low, uint64_t high, uint64_t* value) {
    size_t n = strlen(text);
    if (n < 1 || n > 20 || strspn(text, "0123456789") != n) return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t digit = (uint64_t)(text[i] - '0');
        if (v > (UINT64_MAX - digit) / 10) return 0;  // past 2^64 - 1
        v = 10 * v + digit;
    }
    *value = v;
    return low <= v && v <= high;
}

// ([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)? and nothing else
static int decimal(const char* s) {
    size_t digits = strspn(s, "0123456789");
    s += digits;
    if (*s == '.') {
        size_t fraction = strspn(s + 1, "0123456789");
        if (!digits && !fraction) return 0;
        s += 1 + fraction;
    } else if (!digits) {
        return 0;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-') s++;
        size_t exponent = strspn(s, "0123456789");
        if (!exponent) return 0;
        s += exponent;
    }
    return *s == 0;
}

int generate_parse_options(generation* g, failure* f) {
    if (!g->new_tokens_text)
        return fail(f, "command line: --new-tokens is missing; give the number of tokens to generate");
    if (!whole(g->new_tokens_text, 1, NEW_TOKENS_LIMIT, &g->new_tokens))
        return fail(f, "command line: --new-tokens is '%s'; give a whole number of tokens from 1 to %d",
                    g->new_tokens_text, NEW_TOKENS_LIMIT);
    const char* temperature = g->temperature_text ? g->temperature_text : "1";
    g->temperature = decimal(temperature) ? strtod(temperature, NULL) : -1.0;  // correctly rounded, as float()
    if (!(g->temperature >= 0.0 && g->temperature < INFINITY))
        return fail(f, "command line: --temperature is '%s'; give a finite number >= 0 (0 samples greedily)",
                    temperature);
    g->top_k_given = g->top_k_text != NULL;
    if (g->top_k_given && !whole(g->top_k_text, 0, SEED_LIMIT, &g->top_k))
        return fail(f, "command line: --top-k is '%s'; give a whole number", g->top_k_text);
    const char* seed = g->seed_text ? g->seed_text : "1337";
    if (!whole(seed, 0, SEED_LIMIT, &g->seed))
        return fail(f, "command line: --seed is '%s'; give a whole number from 0 to %llu", seed,
                    (unsigned long long)SEED_LIMIT);
    if ((g->prompt == NULL) == (g->prompt_tokens == NULL))
        return fail(f, "command line: give --prompt TEXT or --prompt-tokens FILE, one of them, to generate");
    g->generator.state = g->seed;
    return 0;
}

int generate_check_prompt(generation* g, uint32_t vocab, uint32_t context, failure* f) {
    g->vocab = vocab, g->context = context, g->byte_level = vocab == BYTE_LEVEL_VOCAB;
    if (g->top_k_given && !(1 <= g->top_k && g->top_k <= vocab))
        return fail(f, "command line: --top-k is %llu; give a whole number from 1 to the vocab, %u",
                    (unsigned long long)g->top_k, vocab);
    if (!g->top_k_given) g->top_k = vocab;
    uint64_t prompt = g->prompt ? strlen(g->prompt) : 0;
    token_stream stream = {0};
    if (g->prompt && !g->byte_level)
        return fail(f, "command line: --prompt gives bytes, the ids of a byte-level model (vocab %d); this model's "
                    "vocab is %u: give the prompt's ids with --prompt-tokens FILE", BYTE_LEVEL_VOCAB, vocab);
    if (!g->prompt) {
        if (tokens_open(g->prompt_tokens, &stream, f) != 0) return -1;
        if (stream.count == 0) {
            tokens_close(&stream);
            return fail(f, "%s: the prompt holds no tokens; give at least one", g->prompt_tokens);
        }
        if (tokens_check_vocab(&stream, 0, stream.count, (int)vocab, f) != 0) return tokens_close(&stream), -1;
        prompt = (uint64_t)stream.count;
    }
    if (prompt > context) {
        tokens_close(&stream);
        if (g->prompt)
            return fail(f, "command line: --prompt is %llu tokens, longer than the model's context of %u; shorten it",
                        (unsigned long long)prompt, context);
        return fail(f, "%s: the prompt is %llu tokens, longer than the model's context of %u; shorten it",
                    g->prompt_tokens, (unsigned long long)prompt, context);
    }
    g->ids = malloc((prompt + g->new_tokens) * sizeof *g->ids);
    g->row = malloc(vocab * sizeof *g->row);
    g->order = malloc(vocab * sizeof *g->order);
    if (!g->ids || !g->row || !g->order)
        return tokens_close(&stream), fail(f, "command line: --new-tokens %llu: no memory for the sample; give fewer",
                                           (unsigned long long)g->new_tokens);
    for (uint64_t i = 0; i < prompt; i++) g->ids[i] = g->prompt ? (uint8_t)g->prompt[i] : stream.ids[i];
    g->count = prompt;
    tokens_close(&stream);
    return 0;
}

uint64_t generate_window(const generation* g, uint8_t* into, uint64_t positions) {
    uint64_t n = g->count < positions ? g->count : positions;
    for (uint64_t i = 0; i < n; i++) {
        int32_t id = (int32_t)g->ids[g->count - n + i];
        memcpy(into + 4 * i, &id, 4);
    }
    return n;
}

int generate_take(generation* g, const uint8_t* rows, uint64_t positions, uint64_t bytes, const char* elf,
                  failure* f) {
    uint64_t stride = positions ? bytes / positions : 0;
    if (stride < 2ull * g->vocab)  // admission proves the rows (schedule-generate); a guard, not a check
        return fail(f, "%s: the host program samples from rows of %llu bytes, fewer than the vocab's %u logits; "
                    "rebuild the host ELF with `snakemake`", elf, (unsigned long long)stride, g->vocab);
    uint64_t last = (g->count < positions ? g->count : positions) - 1;
    for (uint32_t i = 0; i < g->vocab; i++) {
        half h;
        memcpy(&h, rows + last * stride + 2 * i, 2);
        g->row[i] = (double)half_to_float(h);
        if (!isfinite(g->row[i])) return fail(f, "sampling: the logits row holds a value that is not finite");
    }
    g->ids[g->count++] = sample_next(g->row, g->vocab, g->temperature, (uint32_t)g->top_k, &g->generator, g->order);
    return 0;
}

int generate_write(const generation* g, const char* path, failure* f) {
    size_t room = g->byte_level ? g->count : 11 * g->count + 1, n = 0;
    char* text = malloc(room ? room : 1);
    if (!text) return fail(f, "%s: writing the sample failed (%s); free memory or give another --out", path,
                           strerror(ENOMEM));
    for (uint64_t i = 0; i < g->count; i++) {
        if (g->byte_level) text[n++] = (char)g->ids[i];
        else n += (size_t)snprintf(text + n, room - n, i + 1 < g->count ? "%u " : "%u\n", g->ids[i]);
    }
    failure ignored;
    publication p;
    if (publication_begin(&p, path, &ignored) != 0 || publication_write(&p, text, n, &ignored) != 0 ||
        publication_commit(&p, &ignored) != 0) {
        free(text);
        return fail(f, "%s: writing the sample failed (%s); %s or give another --out", path, strerror(p.error),
                    write_remedy(p.error));
    }
    fwrite(text, 1, n, stdout);
    fflush(stdout);
    free(text);
    return 0;
}

void generate_close(generation* g) {
    free(g->ids), free(g->row), free(g->order);
    g->ids = NULL, g->row = NULL, g->order = NULL;
}
