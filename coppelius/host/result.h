// result.h: the result record (coppelius/formats/result.py): JSON with the keys Python's run
// writes, sorted, one space of indent (json.dumps(record, indent=1, sort_keys=True)), so that
// `coppelius inspect` and `coppelius report` read it. Published atomically at every checkpoint
// publication (status "interrupted": what a run killed after it did), at the end of a run, and when
// a run stops (status "stopped: ...").
#ifndef COPPELIUS_RESULT_H
#define COPPELIUS_RESULT_H
#include <stdint.h>

#include "failure.h"

// A step: its t, mean loss, seconds since the run started, its submission's tokens/s (since the one before), the epoch
// of its context, the AdamW step-size word it used, and whether it was skipped.
typedef struct { uint64_t t, epoch; double loss, time, tokens_per_second; uint32_t step_word; int skipped; } step_entry;
typedef struct { uint64_t t; double loss; } validation_point;

typedef struct {
    const char* operation;            // "train" or "predict"
    char target[64], plan_sha256[65], host_elf_sha256[65];
    uint64_t tokens_per_step;
    char tokens[4096];                // the token stream's path and token count
    uint64_t tokens_count;
    char checkpoint_in[4096];         // the starting checkpoint's path, its step, cursor and epoch
    uint64_t step_in, cursor_in, epoch_in;
    uint64_t epoch;                   // the train stream's epochs at the last publication (predict: its wraps)
    char validation[4096];            // train: the validation stream's path, contexts scored per pass,
    uint64_t validation_contexts;     // its points and the seconds spent scoring them
    validation_point* points;
    uint32_t point_count, point_capacity;
    double validation_seconds;
    const char* predict_from;         // predict: "start" or "checkpoint", and the first context's cursor
    uint64_t predict_cursor;
    step_entry* steps;
    uint32_t step_count, step_capacity;
    double* predict;                  // one loss per scored context
    uint32_t predict_count, predict_capacity;
    char** published;                 // the checkpoints this run published, in order
    uint32_t published_count, published_capacity;
    uint64_t skipped;
    char status[1024];                // "running", "completed", "stopped: ..."
    int has_initial, has_final, has_timestamps;
    double initial_loss, final_loss, started, finished, seconds, tokens_per_second;
} result_record;

// Append an entry (exits on out of memory: the record is the run's own bookkeeping).
void result_add_step(result_record* r, step_entry entry);
void result_add_predict(result_record* r, double loss);
void result_add_point(result_record* r, validation_point point);
void result_add_published(result_record* r, const char* path);
// Publish the record at `path` (the fault point "result-written" between write and rename).
// 0, or -1 with the refusal and *error set to the errno.
int result_write(const result_record* r, const char* path, int* error, failure* f);
void result_free(result_record* r);
#endif
