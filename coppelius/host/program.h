// program.h: the host program (docs/formats.md, "Host program (COPHPRG)" and "The walker"): the
// run's steps as 48-byte records flattened in pre-order, checked once, then walked for an
// operation. The walker is the document's, exactly: a repeat runs its body `count` times (count
// 2^64-1: once per new token of a generate run), `end` stops the whole walk, `operation` is yielded
// as a marker and skips `body` records for predict, `count` records for generate; without `validate` each
// validation pass (validation-begin through the next validation-end) is skipped whole.
#ifndef COPPELIUS_PROGRAM_H
#define COPPELIUS_PROGRAM_H
#include <stdint.h>

#include "failure.h"
#include "tables.h"

enum {
    STEP_SUBMIT = 1, STEP_REISSUE, STEP_REPEAT, STEP_READ, STEP_READ_AT_CURSOR, STEP_CURSOR_FROM_CHECKPOINT,
    STEP_CURSOR_ADVANCE, STEP_ADAMW_SCALARS, STEP_WRITE, STEP_FILL, STEP_CHECKPOINT_BEGIN, STEP_CHECKPOINT_PUBLISH,
    STEP_RECORD_STAT, STEP_WRITE_STATUS, STEP_WRITE_TIMESTAMPS, STEP_OPERATION, STEP_END, STEP_SAMPLE_CONTEXT,
    STEP_SAMPLE_TOKEN, STEP_WRITE_SAMPLE, STEP_CURSOR_WRAP, STEP_VALIDATION_BEGIN, STEP_VALIDATION_END,
    STEP_OPS = STEP_VALIDATION_END
};
enum { OPERATION_TRAIN, OPERATION_PREDICT, OPERATION_GENERATE };
#define REPEAT_PER_NEW_TOKEN UINT64_MAX  // a repeat's count: once per new token (generate), 0 times otherwise
extern const char* const STEP_NAMES[STEP_OPS + 1];  // "submit", ... "end" (the fault points' names); [0] ""

typedef struct {
    uint32_t op, ring, buffer, file;
    uint64_t count, offset, bytes;
    uint32_t value, body;
} program_step;
_Static_assert(sizeof(program_step) == 48, "COPHPRG record");

typedef struct {
    const program_step* steps;  // the table's records
    uint32_t count;
} program;

// Check every record (op, references, repeat and operation extents). 0, or -1 naming the step.
int program_check(const table* records, uint32_t ring_count, uint32_t buffer_count, const char* where, program* out,
                  failure* f);

// Called for each step the walk yields; a nonzero return stops the walk and is returned by it.
typedef int (*step_visitor)(void* context, const program_step* step);
// Walk for an OPERATION_* (new_tokens: a generate run's; validate: 0 for a train run given no validation stream).
// 0 when the program ran to its end, else the visitor's value.
int program_walk(const program* p, int operation, uint64_t new_tokens, int validate, step_visitor visit,
                 void* context);

// The AdamW step size of step t (docs/formats.md, "The step-size rule"): binary64, powers by
// repeated squaring, one rounding to binary32.
float step_size(double lr, double beta1, double beta2, uint64_t t);
#endif
