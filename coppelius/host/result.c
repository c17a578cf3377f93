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

void result_add_published(result_record* r, const char* path) {
    r->published = grow(r->published, r->published_count, &r->published_capacity, sizeof(char*));
    r->published[r->published_count] = strdup(path);
    if (!r->published[r->published_count++]) exit(1);
}

void result_free(result_record* r) {
    for (uint32_t i = 0; i < r->published_count; i++) free(r->published[i]);
    free(r->steps), free(r->predict), free(r->published);
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

// A float as Python's repr() writes it: the shortest text that reads back the same double.
static void put_float(buffer* b, double x) {
    if (isnan(x)) { put(b, "NaN"); return; }
    if (isinf(x)) { put(b, x > 0 ? "Infinity" : "-Infinity"); return; }
    char text[64];
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(text, sizeof text, "%.*g", digits, x);
        if (strtod(text, NULL) == x) break;
    }
    put(b, "%s%s", text, strpbrk(text, ".en") ? "" : ".0");
}

static void put_string(buffer* b, const char* s) {
    put(b, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') put(b, "\\%c", c);
        else if (c < 0x20) put(b, "\\u%04x", c);
        else put(b, "%c", c);
    }
    put(b, "\"");
}

static void put_record(buffer* b, const result_record* r) {
    put(b, "{\n \"checkpoint_in\": {\n  \"cursor\": %llu,\n  \"path\": ", (unsigned long long)r->cursor_in);
    put_string(b, r->checkpoint_in);
    put(b, ",\n  \"step\": %llu\n },\n", (unsigned long long)r->step_in);
    if (r->has_final) put(b, " \"final_loss\": "), put_float(b, r->final_loss), put(b, ",\n");
    put(b, " \"format\": \"coppelius-result\",\n \"host_elf_sha256\": \"%s\",\n", r->host_elf_sha256);
    if (r->has_initial) put(b, " \"initial_loss\": "), put_float(b, r->initial_loss), put(b, ",\n");
    if (r->predict_count) {
        double sum = 0.0;  // numpy's mean of a short list of doubles: in order
        for (uint32_t i = 0; i < r->predict_count; i++) sum += r->predict[i];
        put(b, " \"mean_loss\": "), put_float(b, sum / r->predict_count), put(b, ",\n");
    }
    put(b, " \"operation\": \"%s\",\n \"plan_sha256\": \"%s\",\n \"predict\": [", r->operation, r->plan_sha256);
    for (uint32_t i = 0; i < r->predict_count; i++) {
        put(b, "%s\n  {\n   \"context\": %u,\n   \"loss\": ", i ? "," : "", i);
        put_float(b, r->predict[i]);
        put(b, "\n  }");
    }
    put(b, r->predict_count ? "\n ],\n \"published\": [" : "],\n \"published\": [");
    for (uint32_t i = 0; i < r->published_count; i++) {
        put(b, "%s\n  ", i ? "," : "");
        put_string(b, r->published[i]);
    }
    put(b, r->published_count ? "\n ],\n" : "],\n");
    put(b, " \"skipped\": %llu,\n \"status\": ", (unsigned long long)r->skipped);
    put_string(b, r->status);
    put(b, ",\n \"steps\": [");
    for (uint32_t i = 0; i < r->step_count; i++) {
        put(b, "%s\n  {\n   \"loss\": ", i ? "," : "");
        put_float(b, r->steps[i].loss);
        put(b, ",\n   \"skipped\": %s,\n   \"t\": %llu,\n   \"time\": ", r->steps[i].skipped ? "true" : "false",
            (unsigned long long)r->steps[i].t);
        put_float(b, r->steps[i].time);
        put(b, "\n  }");
    }
    put(b, r->step_count ? "\n ],\n" : "],\n");
    put(b, " \"target\": \"%s\",\n", r->target);
    if (r->has_timestamps) {
        put(b, " \"timestamps\": {\n  \"finished\": "), put_float(b, r->finished);
        put(b, ",\n  \"seconds\": "), put_float(b, r->seconds);
        put(b, ",\n  \"started\": "), put_float(b, r->started);
        put(b, "\n },\n \"tokens_per_second\": "), put_float(b, r->tokens_per_second), put(b, ",\n");
    }
    put(b, " \"tokens_per_step\": %llu,\n \"version\": 1\n}\n", (unsigned long long)r->tokens_per_step);
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
