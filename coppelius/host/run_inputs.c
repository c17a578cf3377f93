// run_inputs.c: every check a run makes before its device is opened (run.h), in the order and
// with the words of tests/reference_host/interpreter.py.
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"

#define REBUILD_ELF "rebuild the host ELF with `snakemake`"

// The sections the run reads; every one must be embedded.
static const char* const SECTIONS[] = {"plan", "image", "kernel_info", "launches", "relocations", "commands", "ring",
                                       "program", "planes", "buffers", "run", "step_words", "certificate"};

// `path` as Python's str(Path(path)) prints it: no repeated or trailing slash, no "./" segment.
static void python_path(const char* path, char* out, size_t room) {
    size_t n = 0;
    for (const char* c = path; *c && n + 1 < room; c++) {
        if (*c == '/' && n > 0 && out[n - 1] == '/') continue;
        if (*c == '.' && (n == 0 || out[n - 1] == '/') && (c[1] == '/' || c[1] == 0) && !(n == 0 && c[1] == 0)) {
            if (c[1] == '/') c++;
            continue;
        }
        out[n++] = *c;
    }
    while (n > 1 && out[n - 1] == '/') n--;
    if (n == 0) out[n++] = '.';
    out[n] = 0;
}

// A folder the run can write, or can create: a missing one is made only once every input has passed
// (run_execute), so that a refused run leaves nothing behind; here its nearest existing ancestor is probed.
static int check_writable_folder(const char* path, const char* flag, failure* f) {
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISDIR(st.st_mode))
        return fail(f, "%s: %s names a file, not a folder; give a folder for the outputs", path, flag);
    char probe[4200], existing[4096];
    snprintf(existing, sizeof existing, "%s", path);
    while (stat(existing, &st) != 0 && errno == ENOENT && strcmp(existing, ".") != 0 && strcmp(existing, "/") != 0) {
        char* slash = strrchr(existing, '/');
        if (!slash) snprintf(existing, sizeof existing, ".");
        else if (slash == existing) existing[1] = 0;
        else *slash = 0;
    }
    int error = stat(existing, &st) != 0 ? errno : !S_ISDIR(st.st_mode) ? ENOTDIR : 0;
    if (!error) {
        int fd = make_temporary(probe, sizeof probe, existing, "writable");
        if (fd < 0) error = errno;
        else close(fd), unlink(probe);
    }
    if (error)
        return fail(f, "%s: %s is not a writable folder (%s); give a folder you can write to", path, flag,
                    strerror(error));
    return 0;
}

// Whether path (may be NULL) names the file of st.
static int names_file(const char* path, const struct stat* st) {
    struct stat other;
    return path && stat(path, &other) == 0 && other.st_dev == st->st_dev && other.st_ino == st->st_ino;
}

// generate's --out names the sample file: not a folder, not one of the run's inputs (the sample would replace
// it), in a writable folder (tests/reference_host/generate.py).
static int check_sample_path(run_state* r, const char* checkpoint) {
    struct stat st;
    int exists = stat(r->out, &st) == 0;
    if (exists && S_ISDIR(st.st_mode))
        return fail(&r->f, "%s: --out names a folder; give a file path for the sample", r->out);
    const char* inputs[][2] = {{"the --checkpoint file", checkpoint}, {"the --prompt-tokens file", r->g.prompt_tokens},
                               {"the host ELF", r->elf}};
    for (int i = 0; i < 3 && exists; i++)
        if (names_file(inputs[i][1], &st))
            return fail(&r->f, "%s: --out is %s, which the sample would replace; give another path for the sample",
                        r->out, inputs[i][0]);
    char folder[4096];
    const char* slash = strrchr(r->out, '/');
    if (!slash) snprintf(folder, sizeof folder, ".");
    else snprintf(folder, sizeof folder, "%.*s", slash == r->out ? 1 : (int)(slash - r->out), r->out);
    return check_writable_folder(folder, "--out's folder", &r->f);
}

// A train or predict run replaces predictions.bin, result.json and final.ckpt in --out: none may be one of its
// inputs by its only name (a checkpoint copied there and resumed from would be lost once final.ckpt replaced it;
// a run's own final.ckpt is a second name of its published checkpoint, which stays).
static int check_outputs_are_not_inputs(run_state* r, const char* checkpoint, const char* tokens,
                                        const char* validation) {
    static const char* const OUTPUTS[] = {"final.ckpt", "predictions.bin", "result.json"};
    const char* inputs[][2] = {{"--checkpoint", checkpoint}, {"--tokens", tokens}, {"--validation", validation}};
    for (size_t o = 0; o < sizeof OUTPUTS / sizeof OUTPUTS[0]; o++) {
        char path[4200];
        struct stat output;
        snprintf(path, sizeof path, "%s/%s", r->out, OUTPUTS[o]);
        if (stat(path, &output) != 0 || output.st_nlink != 1) continue;
        for (int i = 0; i < 3; i++)
            if (names_file(inputs[i][1], &output))
                return fail(&r->f, "%s: %s is this run's output %s in --out, which the run would replace; copy it out "
                            "of %s or give another --out", inputs[i][1], inputs[i][0], OUTPUTS[o], r->out);
    }
    return 0;
}

static const section* need(run_state* r, const char* name) { return self_section(&r->image, name); }

// The embedded certificate admits exactly the embedded plan, realization and tables sections
// (coppelius/formats/certificate.py verify(), the same checks in the same order).
static int check_certificate(run_state* r) {
    char where[4200], value[256];
    snprintf(where, sizeof where, "%s: section .coppelius.certificate", r->elf);
    const section* s = need(r, "certificate");
    json_document* d = &r->certificate;
    if (json_parse(d, (const char*)s->data, s->bytes) != 0)
        return fail(&r->f, "%s: the certificate is not JSON; " REBUILD_ELF, where);
    int root = 0, format = json_member(d, root, "format"), version = json_member(d, root, "version");
    if (d->nodes[root].type != JSON_OBJECT || !json_string_is(d, format, "coppelius-certificate") || version < 0 ||
        d->nodes[version].type != JSON_NUMBER || d->nodes[version].length != 1 || d->nodes[version].text[0] != '1') {
        if (d->nodes[root].type == JSON_OBJECT) json_repr(d, format, value, sizeof value);
        else snprintf(value, sizeof value, "%s", d->nodes[root].type == JSON_ARRAY ? "list" : "scalar");
        return fail(&r->f, "%s: certificate format is %s, not 'coppelius-certificate' version 1; " REBUILD_ELF, where,
                    value);
    }
    int admitted = json_member(d, root, "admitted"), checks = json_member(d, root, "checks");
    int all_passed = checks >= 0 && d->nodes[checks].type == JSON_ARRAY && d->nodes[checks].count > 0;
    for (int c = all_passed ? d->nodes[checks].first : -1; c >= 0; c = d->nodes[c].next) {
        int passed = json_member(d, c, "passed");
        if (passed < 0 || d->nodes[passed].type != JSON_TRUE) all_passed = 0;
    }
    if (admitted < 0 || d->nodes[admitted].type != JSON_TRUE || !all_passed) {
        json_repr(d, admitted, value, sizeof value);
        return fail(&r->f, "%s: certificate field 'admitted' is %s and not every check passed; only an admitted plan "
                    "gets a host ELF: " REBUILD_ELF, where, value);
    }
    int horizon = json_member(d, root, "step_horizon");
    const json_node* h = horizon >= 0 ? &d->nodes[horizon] : NULL;
    if (!h || h->type != JSON_NUMBER || h->text[0] == '-' || strspn(h->text, "0123456789") != h->length ||
        h->length > 18) {
        json_repr(d, horizon, value, sizeof value);
        return fail(&r->f, "%s: certificate field 'step_horizon' is %s, not a step count; " REBUILD_ELF, where, value);
    }
    r->horizon = strtoull(h->text, NULL, 10);
    int plan = json_member(d, root, "plan_sha256"), groups[2];
    const char* group_names[2] = {"realization", "tables"};
    int certified = 1;  // the plan
    for (int g = 0; g < 2; g++) {
        groups[g] = json_member(d, root, group_names[g]);
        if (groups[g] < 0 || d->nodes[groups[g]].type != JSON_OBJECT) {
            json_repr(d, groups[g], value, sizeof value);
            return fail(&r->f, "%s: certificate field '%s' is %s, not digests; " REBUILD_ELF, where, group_names[g],
                        value);
        }
        certified += d->nodes[groups[g]].count;
    }
    // the artifacts: every embedded section but the certificate itself; each must be certified once
    int artifacts = 0;
    for (int i = 0; i < r->image.count; i++) {
        const section* a = &r->image.sections[i];
        if (strcmp(a->name, "certificate") == 0) continue;
        artifacts++;
        int digest = strcmp(a->name, "plan") == 0 ? plan : -1;
        for (int g = 0; g < 2 && digest < 0; g++) digest = json_member(d, groups[g], a->name);
        if (digest < 0)
            return fail(&r->f, "%s: the certificate and the artifacts differ in '%s': the certificate does not name "
                        "it; " REBUILD_ELF, where, a->name);
        uint8_t actual[32];
        char hex[65];
        sha256(a->data, a->bytes, actual);
        sha256_hex(actual, hex);
        if (!json_string_is(d, digest, hex)) {
            json_repr(d, digest, value, sizeof value);
            return fail(&r->f, "%s: the certificate admits %s with sha256 %.16s..., but %s has sha256 %.16s...; "
                        REBUILD_ELF, where, a->name, value + (value[0] == '\''), a->name, hex);
        }
    }
    if (certified != artifacts)
        return fail(&r->f, "%s: the certificate and the artifacts differ: the certificate names %d, the host ELF "
                    "embeds %d; " REBUILD_ELF, where, certified, artifacts);
    return 0;
}

static int read_table(run_state* r, const char* name, const char magic[8], uint32_t record_bytes, table* out) {
    char where[4200];
    snprintf(where, sizeof where, "%s: section .coppelius.%s", r->elf, name);
    const section* s = need(r, name);
    return table_read(s->data, s->bytes, magic, record_bytes, where, out, &r->f);
}

// The run tables (tests/reference_host/sections.py): ring, planes, buffers, run, the program; and the device's.
static int read_tables(run_state* r) {
    table run, program_records;
    device_tables* t = &r->tables;
    if (read_table(r, "ring", "COPRING", sizeof(ring_record), &t->ring) != 0 ||
        read_table(r, "planes", "COPPLAN", sizeof(plane_record), &t->planes) != 0 ||
        read_table(r, "buffers", "COPBUFS", sizeof(buffer_record), &t->buffers) != 0 ||
        read_table(r, "run", "COPRUN\0", sizeof(run_record), &run) != 0 ||
        read_table(r, "launches", "COPLNCH", sizeof(launch_record), &t->launches) != 0 ||
        read_table(r, "relocations", "COPRELO", sizeof(relocation_record), &t->relocations) != 0 ||
        read_table(r, "commands", "COPCMDS", sizeof(command_record), &t->commands) != 0 ||
        read_table(r, "step_words", "COPSTEP", sizeof(step_word_record), &t->step_words) != 0 ||
        read_table(r, "program", "COPHPRG", sizeof(program_step), &program_records) != 0)
        return -1;
    int buffers_wrong = t->buffers.count != BUFFERS;
    if (buffers_wrong || run.count != 1)
        return fail(&r->f, "%s: section .coppelius.%s: %u records, not %d; rebuild it with `snakemake`", r->elf,
                    buffers_wrong ? "buffers" : "run", buffers_wrong ? t->buffers.count : run.count,
                    buffers_wrong ? BUFFERS : 1);
    memcpy(&r->run, run.records, sizeof r->run);
    if ((uint64_t)r->run.model_json_bytes + r->run.learner_json_bytes != run.blob_bytes ||
        json_parse(&r->model, (const char*)run.blob, r->run.model_json_bytes) != 0 ||
        json_parse(&r->learner, (const char*)run.blob + r->run.model_json_bytes, r->run.learner_json_bytes) != 0 ||
        r->run.context_tokens < 2 || r->run.tokens_per_step == 0 || r->run.keep == 0)
        return fail(&r->f, "%s: section .coppelius.run: its record or its model and learner JSON are unreadable; "
                    "rebuild it with `snakemake`", r->elf);
    r->model_json = (const char*)run.blob, r->learner_json = (const char*)run.blob + r->run.model_json_bytes;
    char where[4200];
    snprintf(where, sizeof where, "%s: section .coppelius.program", r->elf);
    return program_check(&program_records, t->ring.count, t->buffers.count, where, &r->steps, &r->f);
}

// A checkpoint of another model or learner is refused naming the first key that differs, as
// checkpoint.check_matches() does: "header model.width is 32 but the plan's is 64".
static int check_matches(run_state* r) {
    checkpoint_header* h = &r->header;
    json_document found;
    const char* path = r->checkpoint_path;
    const char* text = (const char*)h->bytes + CHECKPOINT_DESCRIPTION_AT;
    int parsed = json_parse(&found, text, h->description_bytes) == 0;
    int fields[2] = {parsed ? json_member(&found, 0, "model") : -1, parsed ? json_member(&found, 0, "learner") : -1};
    if (fields[0] < 0 || fields[1] < 0 || found.nodes[fields[0]].type != JSON_OBJECT ||
        found.nodes[fields[1]].type != JSON_OBJECT) {
        json_free(&found);
        return fail(&r->f, "%s: the header's description is unreadable; the checkpoint is corrupt: use an earlier "
                    "published checkpoint", path);
    }
    const char* names[2] = {"model", "learner"};
    json_document* planned[2] = {&r->model, &r->learner};
    for (int i = 0; i < 2; i++) {
        // the sorted union of both key sets: the first key whose values differ
        const char* first = NULL;
        size_t first_length = 0;
        char header_value[256], plan_value[256], key[128];
        json_document* docs[2] = {&found, planned[i]};
        int objects[2] = {fields[i], 0};
        for (int side = 0; side < 2; side++)
            for (int c = docs[side]->nodes[objects[side]].first; c >= 0; c = docs[side]->nodes[c].next) {
                const json_node* n = &docs[side]->nodes[c];
                snprintf(key, sizeof key, "%.*s", (int)n->key_length, n->key);
                json_repr(&found, json_member(&found, fields[i], key), header_value, sizeof header_value);
                json_repr(planned[i], json_member(planned[i], 0, key), plan_value, sizeof plan_value);
                if (strcmp(header_value, plan_value) == 0) continue;
                size_t common = n->key_length < first_length ? n->key_length : first_length;
                int order = first ? memcmp(n->key, first, common) : -1;
                if (!first || order < 0 || (order == 0 && n->key_length < first_length))
                    first = n->key, first_length = n->key_length;
            }
        if (!first) continue;
        snprintf(key, sizeof key, "%.*s", (int)first_length, first);
        json_repr(&found, json_member(&found, fields[i], key), header_value, sizeof header_value);
        json_repr(planned[i], json_member(planned[i], 0, key), plan_value, sizeof plan_value);
        json_free(&found);
        return fail(&r->f, "%s: header %s.%s is %s but the plan's is %s; use a checkpoint of this %s or rebuild with a "
                    "matching config", path, names[i], key, header_value, plan_value, names[i]);
    }
    json_free(&found);
    // equal keys and values: the description must then be the planned one byte for byte
    return checkpoint_check_description(path, h, r->model_json, r->run.model_json_bytes, r->learner_json,
                                        r->run.learner_json_bytes, &r->f);
}

static int check_checkpoint(run_state* r) {
    const char* path = r->checkpoint_path;
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return fail(&r->f, "%s: --checkpoint names a folder; give a checkpoint file", path);
    if (checkpoint_read_header(path, &r->header, &r->f) != 0 || check_matches(r) != 0) return -1;
    uint64_t end = r->header.step + r->run.steps;  // end < step: a forged step near 2^64 wrapped
    if (!r->predict && !r->generate && (end < r->header.step || end > r->horizon))
        return fail(&r->f, "%s: checkpoint step is %llu; %u more steps reach step %llu, past step %llu, the last the "
                    "host's AdamW step sizes are certified for; resume from an earlier checkpoint or change lr or the "
                    "betas and rebuild", path, (unsigned long long)r->header.step, r->run.steps,
                    (unsigned long long)end, (unsigned long long)r->horizon);
    return checkpoint_verify_payload(path, &r->header, &r->f);
}

static int file_sha256(const char* path, char hex[65]) {
    FILE* file = fopen(path, "rb");
    if (!file) return -1;
    static uint8_t block[1 << 20];
    sha256_context c;
    sha256_init(&c);
    size_t got;
    while ((got = fread(block, 1, sizeof block, file)) > 0) sha256_update(&c, block, got);
    int failed = ferror(file);
    fclose(file);
    uint8_t digest[32];
    sha256_final(&c, digest);
    sha256_hex(digest, hex);
    return failed ? -1 : 0;
}

// The digest of what determines this run's checkpoints, as interpreter.py's _run_identity computes
// it: the sha256 of the canonical JSON (sorted keys, no spaces) of the host ELF's, the starting
// checkpoint's and the token file's digests and the operation.
static int run_identity(run_state* r) {
    char tokens[65], header[65], payload[65], text[512];
    if (file_sha256(r->tokens_path, tokens) != 0)
        return fail(&r->f, "%s: cannot read the token file (%s); check the path", r->tokens_path, strerror(errno));
    sha256_hex(r->header.bytes + 72, header);
    sha256_hex(r->header.payload_sha256, payload);
    int n = snprintf(text, sizeof text, "{\"checkpoint\":{\"header_sha256\":\"%s\",\"payload_sha256\":\"%s\"},"
                     "\"host_elf_sha256\":\"%s\",\"operation\":\"%s\",\"tokens_sha256\":\"%s\"}", header, payload,
                     r->elf_sha256, r->predict ? "predict" : "train", tokens);
    uint8_t digest[32];
    sha256(text, (size_t)n, digest);
    sha256_hex(digest, r->identity);
    snprintf(r->folder, sizeof r->folder, "%s/checkpoints/%.16s", r->out, r->identity);
    // a train run publishes there: an existing folder it cannot write is refused now, not at the first publication
    return r->predict ? 0 : check_writable_folder(r->folder, "this run's checkpoint folder", &r->f);
}

static int identity_string(run_state* r, json_document* identity, const char* key, char* out, size_t room) {
    int node = json_member(identity, 0, key);
    if (node < 0 || identity->nodes[node].type != JSON_STRING || identity->nodes[node].length >= room)
        return fail(&r->f, "%s: the identity note has no %s; rebuild the host ELF with `snakemake`", r->elf, key);
    snprintf(out, room, "%.*s", (int)identity->nodes[node].length, identity->nodes[node].text);
    return 0;
}

int run_check_inputs(run_state* r, const char* elf, const char* checkpoint, const char* tokens, const char* out,
                     const char* operation, const char* validation, const char* predict_from) {
    r->elf = elf;
    if (strcmp(operation, "train") != 0 && strcmp(operation, "predict") != 0 && strcmp(operation, "generate") != 0)
        return fail(&r->f, "command line: operation is '%s'; use train, predict or generate", operation);
    r->predict = operation[0] == 'p', r->generate = operation[0] == 'g';
    if (r->generate && generate_parse_options(&r->g, &r->f) != 0) return -1;
    if (r->predict && validation)
        return fail(&r->f, "command line: --validation is for train runs; a predict run scores --tokens");
    if (strcmp(predict_from, "start") != 0 && strcmp(predict_from, "checkpoint") != 0)
        return fail(&r->f, "command line: --predict-from is '%s'; use start or checkpoint", predict_from);
    r->predict_from_checkpoint = predict_from[0] == 'c';
    if (validation) python_path(validation, r->validation_path, sizeof r->validation_path);
    python_path(checkpoint, r->checkpoint_path, sizeof r->checkpoint_path);
    python_path(tokens ? tokens : "", r->tokens_path, sizeof r->tokens_path);
    python_path(out, r->out, sizeof r->out);
    if ((r->generate ? check_sample_path(r, checkpoint) : check_writable_folder(r->out, "--out", &r->f)) != 0 ||
        (!r->generate && check_outputs_are_not_inputs(r, r->checkpoint_path, tokens ? r->tokens_path : NULL,
                                                      validation ? r->validation_path : NULL) != 0) ||
        self_open(elf, &r->image, &r->f) != 0)
        return -1;
    uint8_t digest[32];
    sha256(r->image.file, r->image.file_bytes, digest);
    sha256_hex(digest, r->elf_sha256);
    for (size_t i = 0; i < sizeof SECTIONS / sizeof SECTIONS[0]; i++)
        if (!need(r, SECTIONS[i]))
            return fail(&r->f, "%s: section .coppelius.%s is missing; " REBUILD_ELF, elf, SECTIONS[i]);
    if (check_certificate(r) != 0 || read_tables(r) != 0) return -1;
    json_document identity;
    if (json_parse(&identity, r->image.identity, r->image.identity_bytes) != 0)
        return json_free(&identity), fail(&r->f, "%s: the identity note is not JSON; " REBUILD_ELF, elf);
    int bad = identity_string(r, &identity, "target", r->record.target, sizeof r->record.target) ||
              identity_string(r, &identity, "plan_sha256", r->record.plan_sha256, sizeof r->record.plan_sha256) ||
              identity_string(r, &identity, "card", r->card, sizeof r->card) ||
              identity_string(r, &identity, "arch", r->arch, sizeof r->arch);
    int version = json_member(&identity, 0, "driver_version");
    if (!bad && strcmp(r->record.target, "cpu") != 0) {  // the card check needs the least driver that loads the image
        if (version < 0 || identity.nodes[version].type != JSON_NUMBER)
            bad = fail(&r->f, "%s: the identity note has no driver_version; " REBUILD_ELF, elf);
        else
            r->driver_version = atoi(identity.nodes[version].text);
    }
    json_free(&identity);
    // the certificate was admitted against one card's profile: the target and card this host ELF is for
    // (formats/certificate.py verify(), its last check)
    for (int i = 0; !bad && i < 2; i++) {
        const char *field = i == 0 ? "target" : "card", *mine = i == 0 ? r->record.target : r->card;
        int node = json_member(&r->certificate, 0, field);
        if (!json_string_is(&r->certificate, node, mine)) {
            char value[256];
            json_repr(&r->certificate, node, value, sizeof value);
            bad = fail(&r->f, "%s: section .coppelius.certificate: the certificate admits these artifacts for %s %s, "
                       "not '%s', the %s this host ELF is for; " REBUILD_ELF, elf, field, value, mine, field);
        }
    }
    if (bad) return -1;
    if (check_checkpoint(r) != 0) return -1;
    if (r->generate) return generate_check_prompt(&r->g, r->run.vocab, (uint32_t)run_model_context(r), &r->f);
    if (run_check_streams(r) != 0) return -1;
    return run_identity(r);
}
