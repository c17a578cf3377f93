// run_streams.c: the run's token streams and the cursor on them (run.h), as
// coppelius/runtime/interpreter.py has them. The cursor goes round a stream as llm.c's loader does:
// when the next context would run past the end it starts again at 0 (cursor-wrap), one epoch more,
// so a context never straddles the end and a stream needs to hold only one context.
#include <stdlib.h>
#include <string.h>

#include "run.h"

long long run_model_context(run_state* r) {
    int context = json_member(&r->model, 0, "context");
    return context >= 0 ? strtoll(r->model.nodes[context].text, NULL, 10) : 0;
}

// Where the first context is read: the cursor, or the stream's start when a context does not fit there.
static uint64_t first_cursor(const run_state* r, const token_stream* s, uint64_t cursor) {
    return cursor + r->run.context_tokens <= (uint64_t)s->count ? cursor : 0;
}

// A stream holding at least one context, its ids below vocab wherever the run reads: from `start` for
// `contexts` contexts, or the whole stream when the run goes round it.
static int check_stream(run_state* r, const char* path, stream_position* s, uint64_t start, uint64_t contexts) {
    if (tokens_open(path, &s->tokens, &r->f) != 0) return -1;
    uint64_t count = (uint64_t)s->tokens.count, context = r->run.context_tokens;
    if (count < context) {
        long long T = run_model_context(r);
        return fail(&r->f, "%s: token count is %llu, less than one context: batch %lld x context %lld + 1 = %llu "
                    "tokens; use a longer stream, or rebuild with a smaller batch or context", path,
                    (unsigned long long)count, T ? (long long)(context - 1) / T : 0, T, (unsigned long long)context);
    }
    start = first_cursor(r, &s->tokens, start);
    uint64_t need = (context - 1) * contexts + 1;
    if (start + need > count) start = 0, need = count;
    return tokens_check_vocab(&s->tokens, (int64_t)start, (int64_t)need, (int)r->run.vocab, &r->f);
}

int run_check_streams(run_state* r) {
    if (!r->predict)
        return check_stream(r, r->tokens_path, &r->train, r->header.cursor, r->run.steps) != 0 ||
               (r->validation_path[0] &&
                check_stream(r, r->validation_path, &r->validation, 0, r->run.eval_contexts) != 0) ? -1 : 0;
    uint64_t start = r->predict_from_checkpoint ? r->header.cursor : 0;
    if (check_stream(r, r->tokens_path, &r->train, start, r->run.eval_contexts) != 0) return -1;
    r->record.predict_cursor = first_cursor(r, &r->train.tokens, start);
    return 0;
}

int run_cursor_step(run_state* r, const program_step* s) {
    stream_position* at = r->at;
    switch (s->op) {
    case STEP_READ_AT_CURSOR: {
        uint8_t* into = run_host_buffer(r, s->buffer, s->offset, 4 * s->count);
        if (!into) return 1;
        if (at->cursor + s->count > (uint64_t)at->tokens.count)  // admission proves a wrap comes first; a guard
            return fail(&r->f, "%s: token count is %lld; tokens %llu..%llu are needed; use a longer stream",
                        at->tokens.path, (long long)at->tokens.count, (unsigned long long)at->cursor,
                        (unsigned long long)(at->cursor + s->count)), 1;
        for (uint64_t i = 0; i < s->count; i++) {
            int32_t id = at->tokens.ids[at->cursor + i];
            memcpy(into + 4 * i, &id, 4);
        }
        return 0;
    }
    case STEP_CURSOR_FROM_CHECKPOINT:  // predict: from the start, unless asked to score from the checkpoint's cursor
        r->t = r->header.step;
        at->cursor = !r->predict || r->predict_from_checkpoint ? r->header.cursor : 0;
        at->epoch = r->predict ? 0 : r->header.epoch;
        return 0;
    case STEP_CURSOR_ADVANCE: at->cursor += s->count; return 0;
    case STEP_CURSOR_WRAP:
        if (at->cursor + s->count > (uint64_t)at->tokens.count) at->cursor = 0, at->epoch++;
        return 0;
    case STEP_VALIDATION_BEGIN:
        r->at = &r->validation;
        r->validation.cursor = 0, r->validation.epoch = 0;
        r->validation_sum = 0.0, r->validation_count = 0, r->validation_started = run_clock();
        return 0;
    case STEP_VALIDATION_END:
        r->at = &r->train;
        result_add_point(&r->record, (validation_point){r->t, r->validation_sum / (double)r->validation_count});
        r->record.validation_seconds += run_clock() - r->validation_started;
        return 0;
    default: return 0;
    }
}
