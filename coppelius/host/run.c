// run.c: opening the device and walking the host program (run.h); each step does what the
// op_ method of the same name in tests/reference_host/interpreter.py does.
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "faults.h"
#include "run.h"

#define REBUILD_ELF "rebuild the host ELF with `snakemake`"

double run_clock(void) {  // seconds since the epoch, as Python's time.time()
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + 1e-6 * (double)tv.tv_usec;
}

// numpy's pairwise summation (np.mean(x, dtype=float64) of float32 values), so that a loss is the
// double the Python host records for the same losses.
static double pairwise_sum(const float* x, uint64_t n) {
    if (n < 8) {
        double sum = 0.0;
        for (uint64_t i = 0; i < n; i++) sum += x[i];
        return sum;
    }
    if (n <= 128) {
        double r[8], sum;
        for (int j = 0; j < 8; j++) r[j] = x[j];
        uint64_t i;
        for (i = 8; i < n - n % 8; i += 8)
            for (int j = 0; j < 8; j++) r[j] += x[i + j];
        sum = (r[0] + r[1] + (r[2] + r[3])) + (r[4] + r[5] + (r[6] + r[7]));
        for (; i < n; i++) sum += x[i];
        return sum;
    }
    uint64_t half = n / 2;
    half -= half % 8;
    return pairwise_sum(x, half) + pairwise_sum(x + half, n - half);
}

uint8_t* run_host_buffer(run_state* r, uint32_t index, uint64_t offset, uint64_t bytes) {
    uint64_t size;
    uint8_t* base = device_host_buffer(&r->device, index, &size, &r->f);
    if (!base) return NULL;
    if (offset > size || bytes > size - offset) {
        fail(&r->f, "%s: the host program touches bytes [%llu, +%llu) of host buffer %u, which has %llu; "
             REBUILD_ELF, r->elf, (unsigned long long)offset, (unsigned long long)bytes, index,
             (unsigned long long)size);
        return NULL;
    }
    return base + offset;
}

// The mean of the losses at byte `offset` of a host buffer; -1 (and the refusal) when the device reports an error.
static int mean_loss(run_state* r, uint32_t buffer, uint64_t offset, double* mean) {
    const float* losses = (const float*)run_host_buffer(r, buffer, offset, 4 * (uint64_t)r->run.tokens_per_step);
    if (!losses) return -1;
    *mean = pairwise_sum(losses, r->run.tokens_per_step) / (double)r->run.tokens_per_step;
    return 0;
}

static const char* newest_published(run_state* r) {
    return r->record.published_count ? r->record.published[r->record.published_count - 1] : r->checkpoint_path;
}

// Publish what the run produced: predictions, the final checkpoint's link, the result record.
// 0, or -1 with *error the errno of the failure.
static int finish(run_state* r, int* error, failure* f) {
    if (r->predictions_open) {
        r->predictions_open = 0;
        if (publication_commit(&r->predictions, f) != 0) return *error = r->predictions.error, -1;
    }
    char path[4200];
    if (r->record.published_count && strcmp(r->record.status, "completed") == 0) {
        snprintf(path, sizeof path, "%s/final.ckpt", r->out);
        if (publish_link(newest_published(r), path, error, f) != 0) return -1;
    }
    snprintf(path, sizeof path, "%s/result.json", r->out);
    return result_write(&r->record, path, error, f);
}

// Stop with one line when a file cannot be written; the newest published checkpoint stays whole.
static int publication_failed(run_state* r, int error, const char* what) {
    char step[64], recorded[4300];
    if (r->checkpoint_open) publication_abort(&r->open_checkpoint), r->checkpoint_open = 0;
    if (!what) snprintf(step, sizeof step, "the checkpoint of step %llu", (unsigned long long)r->t), what = step;
    snprintf(r->record.status, sizeof r->record.status, "stopped: publishing %s failed (%s)", what, strerror(error));
    failure late;
    int late_error = 0;
    if (finish(r, &late_error, &late) == 0)
        snprintf(recorded, sizeof recorded, "the result record %s/result.json says so", r->out);
    else
        snprintf(recorded, sizeof recorded, "the result record could not be written either (%s)",
                 strerror(late_error));
    fail(&r->f, "%s: publishing %s failed (%s); the newest published checkpoint stays %s and %s: %s and resume "
         "from it", r->folder, what, strerror(error), newest_published(r), recorded, write_remedy(error));
    return 1;
}

static int op_checkpoint_begin(run_state* r) {
    char path[4200];
    static const uint8_t zeros[CHECKPOINT_HEADER_BYTES];
    snprintf(path, sizeof path, "%s/step-%06llu.ckpt", r->folder, (unsigned long long)r->t);
    failure ignored;
    if (publication_begin_in_new_folder(&r->open_checkpoint, path, &ignored) != 0)
        return publication_failed(r, r->open_checkpoint.error, NULL);
    r->checkpoint_open = 1, r->written = 0;
    sha256_init(&r->checkpoint_digest);
    if (publication_write(&r->open_checkpoint, zeros, sizeof zeros, &ignored) != 0)
        return r->checkpoint_open = 0, publication_failed(r, r->open_checkpoint.error, NULL);
    return 0;
}

static int op_write(run_state* r, const program_step* s) {
    uint8_t* data = run_host_buffer(r, s->buffer, 0, s->bytes);
    failure ignored;
    if (!data) return 1;
    if (s->file == FILE_PREDICTIONS) {
        char what[4300];
        snprintf(what, sizeof what, "the predictions %s/predictions.bin", r->out);
        if (!r->predictions_open)  // closed only by a failure, which stopped the run; a guard
            return fail(&r->f, "%s: the host program writes predictions after they were closed; " REBUILD_ELF,
                        r->elf), 1;
        if (publication_write(&r->predictions, data, s->bytes, &ignored) != 0)
            return r->predictions_open = 0, publication_failed(r, r->predictions.error, what);
        return 0;
    }
    if (!r->checkpoint_open || s->offset != r->written)  // admission proves the order; a guard, not a check
        return fail(&r->f, "%s: the host program writes checkpoint bytes at %llu, the next is at %llu; " REBUILD_ELF,
                    r->elf, (unsigned long long)s->offset, (unsigned long long)r->written), 1;
    if (publication_write(&r->open_checkpoint, data, s->bytes, &ignored) != 0)
        return r->checkpoint_open = 0, publication_failed(r, r->open_checkpoint.error, NULL);
    sha256_update(&r->checkpoint_digest, data, s->bytes);
    r->written += s->bytes;
    return 0;
}

// Keep the newest `keep` steps of this run up to the one just published (step t); never a later step.
typedef struct { uint64_t step; char name[256]; } step_file;

static int by_step(const void* a, const void* b) {
    uint64_t x = ((const step_file*)a)->step, y = ((const step_file*)b)->step;
    return x < y ? -1 : x > y;
}

static void prune(run_state* r) {
    DIR* directory = opendir(r->folder);
    if (!directory) return;
    step_file* older = NULL;
    size_t count = 0, capacity = 0;
    struct dirent* e;
    while ((e = readdir(directory)) != NULL) {  // step-DIGITS.ckpt, as Python's glob and isdigit() see them
        size_t n = strlen(e->d_name);
        if (n <= 10 || n >= sizeof older->name || strncmp(e->d_name, "step-", 5) != 0 ||
            strcmp(e->d_name + n - 5, ".ckpt") != 0 || strspn(e->d_name + 5, "0123456789") != n - 10)
            continue;
        uint64_t step = strtoull(e->d_name + 5, NULL, 10);
        if (step >= r->t) continue;
        if (count == capacity) {
            capacity = capacity ? 2 * capacity : 16;
            step_file* bigger = realloc(older, capacity * sizeof *older);
            if (!bigger) break;
            older = bigger;
        }
        older[count].step = step;
        memcpy(older[count++].name, e->d_name, n + 1);
    }
    closedir(directory);
    if (count) qsort(older, count, sizeof *older, by_step);
    size_t remove = count > r->run.keep - 1 ? count - (r->run.keep - 1) : 0;
    for (size_t i = 0; i < remove; i++) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", r->folder, older[i].name);
        unlink(path);
    }
    free(older);
}

// What the run did until this publication, should it be killed before the next: the result record
// with status "interrupted".
static int write_interrupted_record(run_state* r) {
    char status[sizeof r->record.status], path[4200];
    memcpy(status, r->record.status, sizeof status);
    snprintf(r->record.status, sizeof r->record.status, "interrupted");
    snprintf(path, sizeof path, "%s/result.json", r->out);
    int error = 0;
    failure ignored;
    int failed = result_write(&r->record, path, &error, &ignored);
    memcpy(r->record.status, status, sizeof status);
    if (!failed) return 0;
    char what[4300];
    snprintf(what, sizeof what, "the result record %s", path);
    return publication_failed(r, error, what);
}

static int op_checkpoint_publish(run_state* r) {
    if (!r->checkpoint_open)
        return fail(&r->f, "%s: the host program publishes a checkpoint it did not begin; " REBUILD_ELF, r->elf), 1;
    uint8_t header[CHECKPOINT_HEADER_BYTES], digest[32], existing[CHECKPOINT_HEADER_BYTES];
    sha256_final(&r->checkpoint_digest, digest);
    checkpoint_encode_header(header, r->t, r->train.cursor, r->train.epoch, r->written, digest, r->model_json,
                             r->run.model_json_bytes, r->learner_json, r->run.learner_json_bytes);
    publication* p = &r->open_checkpoint;
    FILE* present = fopen(p->path, "rb");
    if (present) {
        size_t got = fread(existing, 1, sizeof existing, present);
        fclose(present);
        if (got != sizeof existing || memcmp(existing, header, sizeof header) != 0) {
            publication_abort(p);
            r->checkpoint_open = 0;
            return fail(&r->f, "%s: already holds a checkpoint with other bytes than this run's step %llu; a published "
                        "checkpoint is never replaced: move it away and run again", p->path,
                        (unsigned long long)r->t), 1;
        }
    }
    failure ignored;
    r->checkpoint_open = 0;
    if (publication_write_at(p, header, sizeof header, 0, &ignored) != 0 || publication_commit(p, &ignored) != 0)
        return publication_failed(r, p->error, NULL);
    fault_point("publish-renamed");
    result_add_published(&r->record, p->path);
    char latest[4200], name[64];
    snprintf(latest, sizeof latest, "%s/latest", r->folder);
    int n = snprintf(name, sizeof name, "step-%06llu.ckpt\n", (unsigned long long)r->t);
    publication pointer;
    if (publication_begin(&pointer, latest, &ignored) != 0 ||
        publication_write(&pointer, name, (size_t)n, &ignored) != 0 || publication_commit(&pointer, &ignored) != 0) {
        char what[4300];  // `latest` still names the previous checkpoint, which pruning has not touched
        snprintf(what, sizeof what, "the pointer %s", latest);
        return publication_failed(r, pointer.error, what);
    }
    prune(r);
    r->record.epoch = r->train.epoch;
    return write_interrupted_record(r);
}

static void progress(run_state* r, const step_entry* e) {
    uint64_t count = ++r->progress_count, steps = r->run.steps;
    double rate = e->time > 0 ? (double)r->run.tokens_per_step * (double)count / e->time : 0.0;
    char line[256];
    snprintf(line, sizeof line, "step %6llu (%llu/%llu) loss %.4f%s %.0f tok/s", (unsigned long long)e->t,
             (unsigned long long)count, (unsigned long long)steps, e->loss, e->skipped ? " skipped" : "", rate);
    if (isatty(2) || getenv("COPPELIUS_PROGRESS_TTY")) fprintf(stderr, "\r%s        ", line);
    else if (count % (steps / 20 ? steps / 20 : 1) == 0 || count == steps) fprintf(stderr, "%s\n", line);
    fflush(stderr);
}

static int op_record_stat(run_state* r, uint32_t kind, uint32_t buffer, uint64_t offset) {
    if (kind != STAT_STEP) {
        double loss;
        if (mean_loss(r, buffer, offset, &loss) != 0) return 1;
        if (kind == STAT_PREDICT) result_add_predict(&r->record, loss);
        else if (kind == STAT_VALIDATION) r->validation_sum += loss, r->validation_count++;
        else if (kind == STAT_INITIAL) r->record.has_initial = 1, r->record.initial_loss = loss;
        else r->record.has_final = 1, r->record.final_loss = loss;
        return 0;
    }
    if (r->pending_count == 0)  // admission proves it cannot happen (schedule-steps-fresh); a guard
        return fail(&r->f, "%s: the host program records a step with no update submitted; " REBUILD_ELF, r->elf), 1;
    int32_t flag;
    double loss;
    uint64_t n = r->run.tokens_per_step;
    const uint8_t* flag_word = run_host_buffer(r, buffer, offset + 4 * n, 4);  // the losses, then the flag after them
    if (!flag_word || mean_loss(r, buffer, offset, &loss) != 0) return 1;
    memcpy(&flag, flag_word, 4);
    double finished = run_clock();
    if (r->pending[0].submission != r->recorded_submission) {  // its submission's first step: their time since
        uint32_t steps = 0;                                       // the submission before
        while (steps < r->pending_count && r->pending[steps].submission == r->pending[0].submission) steps++;
        double took = finished - r->last_step;
        r->last_step = finished, r->recorded_submission = r->pending[0].submission;
        r->submission_rate = took > 0 ? (double)n * steps / took : 0.0;
    }
    step_entry e = {.t = r->pending[0].t, .epoch = r->pending[0].epoch, .loss = loss,
                    .time = finished - r->started, .step_word = r->pending[0].step_word, .skipped = flag != 0,
                    .tokens_per_second = r->submission_rate};
    memmove(r->pending, r->pending + 1, --r->pending_count * sizeof r->pending[0]);
    r->record.skipped += e.skipped;
    r->consecutive_skips = e.skipped ? r->consecutive_skips + 1 : 0;
    result_add_step(&r->record, e);
    progress(r, &e);
    if (r->consecutive_skips < r->run.max_skips) return 0;
    snprintf(r->record.status, sizeof r->record.status,
             "stopped: %llu consecutive steps with non-finite gradients", (unsigned long long)r->consecutive_skips);
    failure late;
    int error;
    finish(r, &error, &late);
    int scale = json_member(&r->learner, 0, "loss_scale");
    char value[64];
    json_repr(&r->learner, scale, value, sizeof value);
    return fail(&r->f, "%s: steps %llu..%llu all had non-finite gradients (loss_scale %s); stopped, the last good "
                "checkpoint is %s: lower loss_scale and resume from it", r->tokens_path,
                (unsigned long long)(e.t - r->consecutive_skips + 1), (unsigned long long)e.t, value,
                newest_published(r)), 1;
}

static int step(void* context, const program_step* s) {
    run_state* r = context;
    if (s->op != STEP_OPERATION) fault_point(STEP_NAMES[s->op]);
    uint8_t* into;
    switch (s->op) {
    case STEP_FILL:
        if (!(into = run_host_buffer(r, s->buffer, s->offset, s->bytes))) return 1;
        memset(into, (int)s->value, s->bytes);
        return 0;
    case STEP_SUBMIT: case STEP_REISSUE:
        if (s->op == STEP_REISSUE && !r->issued[s->ring])  // admission proves it cannot happen; a guard
            return fail(&r->f, "%s: the host program reissues ring entry %u before issuing it; " REBUILD_ELF, r->elf,
                        s->ring), 1;
        r->issued[s->ring] = 1;
        r->submits += s->op == STEP_SUBMIT;
        return device_issue(&r->device, s->ring, &r->f) != 0;
    case STEP_READ:
        if (!(into = run_host_buffer(r, s->buffer, 0, s->bytes))) return 1;
        if (fseek(r->checkpoint_file, (long)(CHECKPOINT_HEADER_BYTES + s->offset), SEEK_SET) != 0 ||
            fread(into, 1, s->bytes, r->checkpoint_file) != s->bytes)
            return fail(&r->f, "%s: payload bytes [%llu, +%llu) cannot be read; use an earlier published checkpoint",
                        r->checkpoint_path, (unsigned long long)s->offset, (unsigned long long)s->bytes), 1;
        return 0;
    case STEP_READ_AT_CURSOR: case STEP_CURSOR_FROM_CHECKPOINT: case STEP_CURSOR_ADVANCE: case STEP_CURSOR_WRAP:
    case STEP_VALIDATION_BEGIN: case STEP_VALIDATION_END:
        return run_cursor_step(r, s);
    case STEP_ADAMW_SCALARS: {
        if (r->pending_count == PENDING_UPDATES)  // admission proves it cannot happen; a guard
            return fail(&r->f, "%s: the host program steps the optimizer with %d updates unrecorded; " REBUILD_ELF,
                        r->elf, PENDING_UPDATES), 1;
        float size = step_size(r->run.lr, r->run.beta1, r->run.beta2, ++r->t);
        r->pending[r->pending_count].t = r->t, r->pending[r->pending_count].epoch = r->train.epoch;
        r->pending[r->pending_count].submission = r->submits + 1;
        memcpy(&r->pending[r->pending_count++].step_word, &size, 4);
        return device_patch_step_size(&r->device, size, s->value, &r->f) != 0;
    }
    case STEP_CHECKPOINT_BEGIN: return op_checkpoint_begin(r);
    case STEP_WRITE: return op_write(r, s);
    case STEP_CHECKPOINT_PUBLISH: return op_checkpoint_publish(r);
    case STEP_RECORD_STAT: return op_record_stat(r, s->value, s->buffer, s->offset);
    case STEP_WRITE_STATUS: snprintf(r->record.status, sizeof r->record.status, "completed"); return 0;
    case STEP_SAMPLE_CONTEXT:
        if (!(into = run_host_buffer(r, s->buffer, 0, 4 * s->count))) return 1;
        generate_window(&r->g, into, s->count);
        return 0;
    case STEP_SAMPLE_TOKEN:
        if (!(into = run_host_buffer(r, s->buffer, 0, s->bytes))) return 1;
        return generate_take(&r->g, into, s->count, s->bytes, r->elf, &r->f) != 0;
    case STEP_WRITE_SAMPLE: return generate_write(&r->g, r->out, &r->f) != 0;
    case STEP_WRITE_TIMESTAMPS: {
        double finished = run_clock(), elapsed = finished - r->started;
        uint64_t count = r->record.step_count ? r->record.step_count : r->record.predict_count;
        r->record.has_timestamps = 1;
        r->record.started = r->started, r->record.finished = finished, r->record.seconds = elapsed;
        r->record.tokens_per_second = elapsed > 0 ? (double)(count * r->run.tokens_per_step) / elapsed : 0.0;
        r->record.epoch = r->at->epoch;
        return 0;
    }
    default: return 0;  // the operation marker
    }
}

int run_execute(run_state* r) {
    result_record* record = &r->record;
    record->operation = r->generate ? "generate" : r->predict ? "predict" : "train";
    snprintf(record->host_elf_sha256, sizeof record->host_elf_sha256, "%s", r->elf_sha256);
    record->tokens_per_step = r->run.tokens_per_step;
    snprintf(record->tokens, sizeof record->tokens, "%s", r->tokens_path);
    record->tokens_count = (uint64_t)r->train.tokens.count;
    snprintf(record->checkpoint_in, sizeof record->checkpoint_in, "%s", r->checkpoint_path);
    record->step_in = r->header.step, record->cursor_in = r->header.cursor, record->epoch_in = r->header.epoch;
    record->epoch = r->predict ? 0 : r->header.epoch;
    snprintf(record->validation, sizeof record->validation, "%s", r->validation_path);
    record->validation_contexts = r->run.eval_contexts;
    record->predict_from = r->predict_from_checkpoint ? "checkpoint" : "start";
    snprintf(record->status, sizeof record->status, "running");
    const section* image = self_section(&r->image, "image");
    cuda_card wanted = {r->record.target, r->card, r->arch, r->driver_version};
    r->at = &r->train;
    if (device_open(&r->device, &r->tables, r->run.arena_bytes, r->run.host_bytes, image->data, image->bytes, &wanted,
                    r->elf, &r->f) != 0)
        return -1;
    r->device_open = 1;
    int unmade = r->generate ? 0 : make_folders(r->out);  // checked writable (run_check_inputs)
    if (unmade)
        return fail(&r->f, "%s: --out cannot be made (%s); give a folder you can write to", r->out, strerror(unmade));
    r->issued = calloc(r->tables.ring.count + 1, 1);
    r->checkpoint_file = fopen(r->checkpoint_path, "rb");
    if (!r->issued || !r->checkpoint_file)
        return fail(&r->f, "%s: cannot read the checkpoint (%s); give an existing checkpoint file", r->checkpoint_path,
                    strerror(errno));
    r->started = r->last_step = run_clock();
    failure ignored;
    if (!r->generate) {  // predict: every scored context's predictions; train: its first forward's
        char path[4200];
        snprintf(path, sizeof path, "%s/predictions.bin", r->out);
        if (publication_begin(&r->predictions, path, &ignored) != 0)
            return publication_failed(r, r->predictions.error, "the predictions"), -1;
        r->predictions_open = 1;
    }
    int operation = r->generate ? OPERATION_GENERATE : r->predict ? OPERATION_PREDICT : OPERATION_TRAIN;
    if (program_walk(&r->steps, operation, r->g.new_tokens, r->validation_path[0] != 0, step, r) != 0) return -1;
    if (r->generate) return 0;  // it publishes the sample alone (write-sample)
    int error;
    if (finish(r, &error, &ignored) != 0) return publication_failed(r, error, "the run's last outputs"), -1;
    if (isatty(2) || getenv("COPPELIUS_PROGRESS_TTY")) fprintf(stderr, "\n");
    return 0;
}

void run_close(run_state* r) {
    if (r->checkpoint_open) publication_abort(&r->open_checkpoint);
    if (r->predictions_open) publication_abort(&r->predictions);
    if (r->checkpoint_file) fclose(r->checkpoint_file);
    if (r->device_open) device_close(&r->device);
    free(r->issued);
    tokens_close(&r->train.tokens), tokens_close(&r->validation.tokens);
    json_free(&r->certificate), json_free(&r->model), json_free(&r->learner);
    generate_close(&r->g);
    result_free(&r->record);
    self_close(&r->image);
}
