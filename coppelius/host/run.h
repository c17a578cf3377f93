// run.h: the run (tests/reference_host/interpreter.py, the same behaviour and the same one-line
// refusals): `host.elf --checkpoint C --tokens T --out DIR [--operation train|predict]
// [--validation V] [--predict-from start|checkpoint]`, or the generate operation (generate.h), which
// reads a prompt instead of a token stream.
//
// Before the device is opened, in this order: --out is a writable folder; the host ELF's own
// sections (self.c) and its embedded certificate, which must admit exactly the embedded plan,
// realization and tables sections; the checkpoint (header digest, model and learner, the
// certified step horizon, payload digest); the token streams (header, at least one context, every
// id read below vocab; run_streams.c). Then the cpu device, and the host program is walked: its
// steps fill and read host buffers, issue ring entries, patch the AdamW step words, score the
// validation stream (skipped without --validation), publish checkpoints under
// checkpoints/<run identity>/ with the result record (status "interrupted") and record the stats;
// at the end predictions, final.ckpt and the result record are published.
#ifndef COPPELIUS_RUN_H
#define COPPELIUS_RUN_H
#include <stdio.h>

#include "checkpoint.h"
#include "device.h"
#include "generate.h"
#include "json.h"
#include "program.h"
#include "publish.h"
#include "result.h"
#include "self.h"
#include "sha256.h"
#include "tokens.h"

// The run table's one record (COPRUN, docs/formats.md); its blob is the model's and the learner's canonical JSON.
typedef struct {
    uint64_t arena_bytes, host_bytes, payload_bytes;
    double lr, beta1, beta2;
    uint32_t tokens_per_step, steps, interval, keep, max_skips, eval_contexts, vocab, context_tokens;
    uint32_t model_json_bytes, learner_json_bytes;
} run_record;
_Static_assert(sizeof(run_record) == 88, "COPRUN record");

// The host buffers, by their index in the program and the buffers table (formats/tables.py HOST_BUFFERS).
enum { BUFFER_STAGING, BUFFER_CONTEXT, BUFFER_CONTEXT_1, BUFFER_STEP_LOSSES, BUFFER_STEP_LOSSES_1,
       BUFFER_REPORT_LOSSES, BUFFER_REPORT_PREDICTIONS, BUFFER_SAMPLE_LOGITS, BUFFERS };
// Updates submitted and not yet recorded (record-stat reads a step's loss a step late): at most this many.
enum { PENDING_UPDATES = 2 * MAX_STEPS_PER_LAUNCH };  // two update pieces' steps
enum { FILE_CHECKPOINT, FILE_PREDICTIONS };
enum { STAT_INITIAL, STAT_STEP, STAT_FINAL, STAT_PREDICT, STAT_VALIDATION };

// A token stream with the run's cursor on it: the train (or predict) stream and the validation stream.
typedef struct {
    token_stream tokens;
    uint64_t cursor, epoch;               // epoch: times the cursor went round to the start
} stream_position;

typedef struct {
    const char* elf;                      // the host ELF's path (for the messages)
    char checkpoint_path[4096], tokens_path[4096], out[4096];  // as Python's Path() prints them
    char validation_path[4096];           // train: the validation stream, scored at every publication ("": none,
                                          // the passes skipped)
    int predict, predict_from_checkpoint, generate;
    generation g;                         // generate's options, prompt and sample
    self_image image;
    char elf_sha256[65];
    json_document certificate, model, learner;
    uint64_t horizon;
    run_record run;
    const char *model_json, *learner_json;
    device_tables tables;
    program steps;
    checkpoint_header header;
    stream_position train, validation;   // train: the tokens; predict: the scored tokens
    stream_position* at;                  // the stream the cursor steps act on
    double validation_sum, validation_started;  // the pass under way: its losses' in-order sum, its start
    uint64_t validation_count;            // and the contexts it scored
    char identity[65];                    // the run identity (sha256 hex)
    char folder[4096];                    // OUT/checkpoints/<first 16 hex of the identity>
    char card[256], arch[32];             // the identity note's card, for the device's card check
    int driver_version;
    device device;
    int device_open;
    uint64_t t, consecutive_skips;
    // the updates submitted and not yet recorded, oldest first: step count, epoch and AdamW step-size word
    // submission: the update submission that runs it (submits before it, plus 1): a submission's steps are
    // recorded together, and share its tokens per second
    struct { uint64_t t, epoch, submission; uint32_t step_word; } pending[PENDING_UPDATES];
    uint32_t pending_count;
    uint64_t submits, recorded_submission;  // submit steps so far; the submission of the last step recorded
    double submission_rate;                  // its steps' tokens per second
    uint8_t* issued;                      // ring entries issued so far
    FILE* checkpoint_file;
    publication predictions, open_checkpoint;
    int predictions_open, checkpoint_open;
    sha256_context checkpoint_digest;
    uint64_t written;                     // checkpoint payload bytes written so far
    result_record record;
    double started, last_step;
    uint64_t progress_count;
    failure f;
} run_state;

// Every check before the device (run_inputs.c). 0, or -1 with the refusal in r->f.
int run_check_inputs(run_state* r, const char* elf, const char* checkpoint, const char* tokens, const char* out,
                     const char* operation, const char* validation, const char* predict_from);
// The token streams (run_streams.c): at least one context each, ids below vocab wherever the run reads.
int run_check_streams(run_state* r);
// The cursor steps (run_streams.c): read-at-cursor, cursor-from-checkpoint, cursor-advance, cursor-wrap,
// validation-begin and validation-end. 0, or 1 with the refusal in r->f (a step visitor's value).
int run_cursor_step(run_state* r, const program_step* s);
// Host buffer `index`, bytes [offset, offset + bytes) (run.c): NULL (and the refusal) when it is not inside.
uint8_t* run_host_buffer(run_state* r, uint32_t index, uint64_t offset, uint64_t bytes);
double run_clock(void);  // seconds since the epoch, as Python's time.time()
long long run_model_context(run_state* r);  // the model's context (positions)
// Open the device and walk the host program (run.c). 0 when the run completed, else -1 with the line in r->f.
int run_execute(run_state* r);
void run_close(run_state* r);
#endif
