// program.c: checking and walking the host program, and the step-size rule (program.h).
#include "program.h"

#include <math.h>
#include <string.h>

const char* const STEP_NAMES[STEP_OPS + 1] = {
    "", "submit", "reissue", "repeat", "read", "read-at-cursor", "cursor-from-checkpoint", "cursor-advance",
    "adamw-scalars", "write", "fill", "checkpoint-begin", "checkpoint-publish", "record-stat", "write-status",
    "write-timestamps", "operation", "end", "sample-context", "sample-token", "write-sample", "cursor-wrap",
    "validation-begin", "validation-end",
};

int program_check(const table* records, uint32_t ring_count, uint32_t buffer_count, const char* where, program* out,
                  failure* f) {
    if (records->record_bytes != sizeof(program_step) || records->count == 0)
        return fail(f, "%s: host program has %u records; rebuild it with `snakemake`", where, records->count);
    const program_step* steps = (const program_step*)records->records;
    for (uint32_t i = 0; i < records->count; i++) {
        program_step s;
        memcpy(&s, steps + i, sizeof s);
        const char* bad = NULL;
        uint64_t value = 0;
        if (s.op < 1 || s.op > STEP_OPS) bad = "op", value = s.op;
        else if ((s.op == STEP_SUBMIT || s.op == STEP_REISSUE) && s.ring >= ring_count) bad = "ring", value = s.ring;
        else if ((s.op == STEP_REPEAT || s.op == STEP_OPERATION) && (uint64_t)i + s.body >= records->count)
            bad = "body", value = s.body;
        else if (s.op == STEP_OPERATION && s.count >= records->count - i - 1) bad = "count", value = s.count;
        else if ((s.op == STEP_READ || s.op == STEP_READ_AT_CURSOR || s.op == STEP_WRITE || s.op == STEP_FILL ||
                  s.op == STEP_SAMPLE_CONTEXT || s.op == STEP_SAMPLE_TOKEN || s.op == STEP_RECORD_STAT) &&
                 s.buffer >= buffer_count)
            bad = "buffer", value = s.buffer;
        else if ((s.op == STEP_READ || s.op == STEP_WRITE) && s.file > 1) bad = "file", value = s.file;
        else if (s.op == STEP_RECORD_STAT && s.value > 4) bad = "value (stat kind)", value = s.value;
        else if (s.op == STEP_ADAMW_SCALARS && s.value >= MAX_STEPS_PER_LAUNCH) bad = "value (slot)", value = s.value;
        if (bad)
            return fail(f, "%s: host program step %u (%s) %s is %llu; rebuild it with `snakemake`", where, i,
                        STEP_NAMES[s.op <= STEP_OPS ? s.op : 0], bad, (unsigned long long)value);
    }
    out->steps = steps, out->count = records->count;
    return 0;
}

typedef struct {
    const program* p;
    int operation;
    uint64_t new_tokens;
    int validate;
    step_visitor visit;
    void* context;
    int result;
} walk_state;

// 1: the walk is over (an `end` step, or the visitor stopped it: state->result says which); 0: ran to `end`.
static int walk(walk_state* w, uint64_t pc, uint64_t end) {
    while (pc < end) {
        program_step s;
        memcpy(&s, w->p->steps + pc, sizeof s);
        if (s.op == STEP_REPEAT) {
            uint64_t count = s.count == REPEAT_PER_NEW_TOKEN ? w->new_tokens : s.count;
            for (uint64_t i = 0; i < count; i++)
                if (walk(w, pc + 1, pc + 1 + s.body)) return 1;
            pc += 1 + s.body;
            continue;
        }
        if (s.op == STEP_END) return 1;
        if (s.op == STEP_VALIDATION_BEGIN && !w->validate) {  // the pass, through its validation-end, left out
            while (++pc < end) {
                memcpy(&s, w->p->steps + pc, sizeof s);
                if (s.op == STEP_VALIDATION_END) break;
            }
            pc++;
            continue;
        }
        int stop = w->visit(w->context, &s);
        if (stop) {
            w->result = stop;
            return 1;
        }
        if (s.op == STEP_OPERATION && w->operation != OPERATION_TRAIN)
            pc += w->operation == OPERATION_PREDICT ? s.body : s.count;
        pc += 1;
    }
    return 0;
}

int program_walk(const program* p, int operation, uint64_t new_tokens, int validate, step_visitor visit,
                 void* context) {
    walk_state w = {p, operation, new_tokens, validate, visit, context, 0};
    walk(&w, 0, p->count);
    return w.result;
}

static double power(double beta, uint64_t t) {
    double result = 1.0, square = beta;
    for (; t; t >>= 1) {
        if (t & 1) result *= square;
        square *= square;
    }
    return result;
}

float step_size(double lr, double beta1, double beta2, uint64_t t) {
    return (float)(lr * sqrt(1.0 - power(beta2, t)) / (1.0 - power(beta1, t)));
}
