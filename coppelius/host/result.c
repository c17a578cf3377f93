// result.c: the result record (result.h).
#include "result.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "faults.h"
#include "publish.h"

static void* grow(void* items, uint32_t count, uint32_t* capacity, size_t size) {
    if (count < *capacity) return items;
    *capacity = *capacity ? 2 * *capacity : 64;
    void* bigger = realloc(items, *capacity * size);
    if (!bigger) {
        fprintf(stderr, "result record: out of memory\n");
        exit(1);
    }
    return bigger;
}

void result_add_step(result_record* r, step_entry entry) {
    r->steps = grow(r->steps, r->step_count, &r->step_capacity, sizeof entry);
    r->steps[r->step_count++] = entry;
}

void result_add_predict(result_record* r, double loss) {
    r->predict = grow(r->predict, r->predict_count, &r->predict_capacity, sizeof loss);
    r->predict[r->predict_count++] = loss;
}

void result_add_point(result_record* r, validation_point point) {
    r->points = grow(r->points, r->point_count, &r->point_capacity, sizeof point);
    r->points[r->point_count++] = point;
}

void result_add_published(result_record* r, const char* path) {
    r->published = grow(r->published, r->published_count, &r->published_capacity, sizeof(char*));
    r->published[r->published_count] = strdup(path);
    if (!r->published[r->published_count++]) exit(1);
}

void result_free(result_record* r) {
    for (uint32_t i = 0; i < r->published_count; i++) free(r->published[i]);
    free(r->steps), free(r->predict), free(r->points), free(r->published);
}

// A growing text.
typedef struct { char* text; size_t length, capacity; } buffer;

static void put(buffer* b, const char* format, ...) __attribute__((format(printf, 2, 3)));
static void put(buffer* b, const char* format, ...) {
    for (;;) {
        va_list arguments;
        va_start(arguments, format);
        int n = vsnprintf(b->text + b->length, b->capacity - b->length, format, arguments);
        va_end(arguments);
        if (n >= 0 && (size_t)n < b->capacity - b->length) {
            b->length += (size_t)n;
            return;
        }
        b->capacity = 2 * b->capacity + (size_t)(n > 0 ? n : 0) + 4096;
        b->text = realloc(b->text, b->capacity);
        if (!b->text) exit(1);
    }
}

// A float as Python's repr() writes it: the shortest digits that read back the same double, in
// positional notation when the decimal exponent is in [-4, 16) (100.0, not %g's 1e+02), else as 1e+16.
static void put_float(buffer* b, double x) {
    if (isnan(x)) { put(b, "NaN"); return; }
    if (isinf(x)) { put(b, x > 0 ? "Infinity" : "-Infinity"); return; }
    char text[400];
    int digits = 1;
    for (;; digits++) {  // 17 digits always read back
        snprintf(text, sizeof text, "%.*e", digits - 1, x);
        if (digits == 17 || strtod(text, NULL) == x) break;
    }
    int exponent = atoi(strchr(text, 'e') + 1);
    if (exponent >= -4 && exponent < 16) {
        snprintf(text, sizeof text, "%.*f", digits - 1 - exponent > 0 ? digits - 1 - exponent : 0, x);
        put(b, "%s%s", text, strchr(text, '.') ? "" : ".0");
    } else {
        put(b, "%s", text);  // 1e+16, 1.5e-05: at least two exponent digits, in Python as in C
    }
}

// The length of the well-formed UTF-8 sequence at s (no overlong form, no surrogate, at most U+10FFFF)
// and its code point; 0 if none starts there.
static int utf8_at(const unsigned char* s, unsigned* code) {
    int n = s[0] >= 0xC2 && s[0] <= 0xDF ? 2 : s[0] >= 0xE0 && s[0] <= 0xEF ? 3 : s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : 0;
    if (n == 0) return 0;
    unsigned c = s[0] & (0x7F >> n);
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = c << 6 | (s[i] & 0x3F);
    }
    if ((n == 3 && (c < 0x800 || (c >= 0xD800 && c <= 0xDFFF))) || (n == 4 && (c < 0x10000 || c > 0x10FFFF)))
        return 0;
    *code = c;
    return n;
}

// A string as Python's json.dumps writes it (ensure_ascii): the text is ASCII; a byte that is not
// well-formed UTF-8 is the lone surrogate U+DC00 + byte, as Python's surrogateescape decodes it.
static void put_string(buffer* b, const char* text) {
    put(b, "\"");
    for (const unsigned char* s = (const unsigned char*)text; *s; s++) {
        unsigned c = *s;
        const char* short_escape = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                                   : c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        int n;
        if (short_escape) put(b, "%s", short_escape);
        else if (c >= 0x20 && c < 0x7F) put(b, "%c", c);
        else if (c < 0x80) put(b, "\\u%04x", c);
        else if ((n = utf8_at(s, &c)) == 0) put(b, "\\u%04x", 0xDC00 + c);
        else {
            if (c < 0x10000) put(b, "\\u%04x", c);
            else put(b, "\\u%04x\\u%04x", 0xD800 + ((c - 0x10000) >> 10), 0xDC00 + ((c - 0x10000) & 0x3FF));
            s += n - 1;
        }
    }
    put(b, "\"");
}

// What a train run's tokens_per_second counts (coppelius/formats/result.py RATE_COUNTS, the same words).
static const char RATE_COUNTS[] =
    "train tokens over the run's wall time, its validation passes and checkpoint publications included";

// The mean of doubles summed one after the other (formats/result.py in_order_mean).
static double in_order_mean(const double* x, uint32_t n) {
    double sum = 0.0;
    for (uint32_t i = 0; i < n; i++) sum += x[i];
    return sum / n;
}

static void put_steps(buffer* b, const result_record* r) {
    put(b, " \"steps\": [");
    for (uint32_t i = 0; i < r->step_count; i++) {
        const step_entry* e = &r->steps[i];
        put(b, "%s\n  {\n   \"epoch\": %llu,\n   \"loss\": ", i ? "," : "", (unsigned long long)e->epoch);
        put_float(b, e->loss);
        put(b, ",\n   \"skipped\": %s,\n   \"step_word\": \"0x%08x\",\n   \"t\": %llu,\n   \"time\": ",
            e->skipped ? "true" : "false", e->step_word, (unsigned long long)e->t);
        put_float(b, e->time);
        put(b, ",\n   \"tokens_per_second\": ");
        put_float(b, e->tokens_per_second);
        put(b, "\n  }");
    }
    put(b, r->step_count ? "\n ],\n" : "],\n");
}

static void put_validation(buffer* b, const result_record* r) {
    put(b, " \"validation\": {\n  \"contexts\": %llu,\n  \"path\": ", (unsigned long long)r->validation_contexts);
    if (r->validation[0]) put_string(b, r->validation);
    else put(b, "null");
    put(b, ",\n  \"points\": [");
    for (uint32_t i = 0; i < r->point_count; i++) {
        put(b, "%s\n   {\n    \"loss\": ", i ? "," : "");
        put_float(b, r->points[i].loss);
        put(b, ",\n    \"t\": %llu\n   }", (unsigned long long)r->points[i].t);
    }
    put(b, r->point_count ? "\n  ],\n  \"seconds\": " : "],\n  \"seconds\": ");
    put_float(b, r->validation_seconds);
    put(b, "\n },\n");
}

static void put_record(buffer* b, const result_record* r) {
    int train = strcmp(r->operation, "train") == 0;
    put(b, "{\n \"checkpoint_in\": {\n  \"cursor\": %llu,\n  \"epoch\": %llu,\n  \"path\": ",
        (unsigned long long)r->cursor_in, (unsigned long long)r->epoch_in);
    put_string(b, r->checkpoint_in);
    put(b, ",\n  \"step\": %llu\n },\n \"epoch\": %llu,\n", (unsigned long long)r->step_in,
        (unsigned long long)r->epoch);
    if (r->has_final) put(b, " \"final_loss\": "), put_float(b, r->final_loss), put(b, ",\n");
    put(b, " \"format\": \"coppelius-result\",\n \"host_elf_sha256\": \"%s\",\n", r->host_elf_sha256);
    if (r->has_initial) put(b, " \"initial_loss\": "), put_float(b, r->initial_loss), put(b, ",\n");
    if (r->predict_count)
        put(b, " \"mean_loss\": "), put_float(b, in_order_mean(r->predict, r->predict_count)), put(b, ",\n");
    put(b, " \"operation\": \"%s\",\n \"plan_sha256\": \"%s\",\n \"predict\": [", r->operation, r->plan_sha256);
    for (uint32_t i = 0; i < r->predict_count; i++) {
        put(b, "%s\n  {\n   \"context\": %u,\n   \"loss\": ", i ? "," : "", i);
        put_float(b, r->predict[i]);
        put(b, "\n  }");
    }
    put(b, r->predict_count ? "\n ],\n" : "],\n");
    if (!train)
        put(b, " \"predict_from\": {\n  \"cursor\": %llu,\n  \"from\": \"%s\"\n },\n",
            (unsigned long long)r->predict_cursor, r->predict_from);
    put(b, " \"published\": [");
    for (uint32_t i = 0; i < r->published_count; i++) {
        put(b, "%s\n  ", i ? "," : "");
        put_string(b, r->published[i]);
    }
    put(b, r->published_count ? "\n ],\n" : "],\n");
    put(b, " \"skipped\": %llu,\n \"status\": ", (unsigned long long)r->skipped);
    put_string(b, r->status);
    put(b, ",\n");
    put_steps(b, r);
    put(b, " \"target\": \"%s\",\n", r->target);
    if (r->has_timestamps) {
        put(b, " \"timestamps\": {\n  \"finished\": "), put_float(b, r->finished);
        put(b, ",\n  \"seconds\": "), put_float(b, r->seconds);
        put(b, ",\n  \"started\": "), put_float(b, r->started);
        put(b, "\n },\n");
    }
    put(b, " \"tokens\": {\n  \"count\": %llu,\n  \"path\": ", (unsigned long long)r->tokens_count);
    put_string(b, r->tokens);
    put(b, "\n },\n");
    if (r->has_timestamps) {
        put(b, " \"tokens_per_second\": "), put_float(b, r->tokens_per_second), put(b, ",\n");
        if (train) put(b, " \"tokens_per_second_counts\": \"%s\",\n", RATE_COUNTS);
    }
    put(b, " \"tokens_per_step\": %llu,\n", (unsigned long long)r->tokens_per_step);
    if (train) put_validation(b, r);
    put(b, " \"version\": 2\n}\n");
}

int result_write(const result_record* r, const char* path, int* error, failure* f) {
    buffer b = {0};
    put_record(&b, r);
    publication p;
    int status = publication_begin(&p, path, f);
    if (status == 0) status = publication_write(&p, b.text, b.length, f);
    if (status == 0) {
        fault_point("result-written");
        status = publication_commit(&p, f);
    }
    free(b.text);
    if (status != 0) *error = p.error;
    return status;
}
