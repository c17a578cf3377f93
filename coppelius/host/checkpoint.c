// checkpoint.c: reading, checking and writing the checkpoint header (checkpoint.h); the refusals
// say what coppelius/formats/checkpoint.py says.
#include "checkpoint.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "sha256.h"

#define CORRUPT "the checkpoint is corrupt: use an earlier published checkpoint"

static uint64_t u64_at(const uint8_t* p) { uint64_t v; memcpy(&v, p, 8); return v; }  // little-endian hosts
static uint32_t u32_at(const uint8_t* p) { uint32_t v; memcpy(&v, p, 4); return v; }

// The description a checkpoint of this model and learner carries; its length, or 0 if it does not fit.
static size_t description(char* out, size_t room, const char* model, size_t model_bytes, const char* learner,
                          size_t learner_bytes) {
    int n = snprintf(out, room, "{\"format\":\"coppelius-checkpoint\",\"learner\":%.*s,\"model\":%.*s,"
                     "\"parts\":[\"params\",\"m\",\"v\"]}", (int)learner_bytes, learner, (int)model_bytes, model);
    return n > 0 && (size_t)n < room ? (size_t)n : 0;
}

int checkpoint_read_header(const char* path, checkpoint_header* h, failure* f) {
    memset(h, 0, sizeof *h);
    FILE* file = fopen(path, "rb");
    struct stat st;
    if (!file || fstat(fileno(file), &st) != 0) {
        int error = errno;
        if (file) fclose(file);
        return fail(f, "%s: cannot read the checkpoint (%s); give an existing checkpoint file", path, strerror(error));
    }
    size_t got = fread(h->bytes, 1, CHECKPOINT_HEADER_BYTES, file);
    fclose(file);
    const uint8_t* b = h->bytes;
    if (got < 16)
        return fail(f, "%s: %zu bytes is too short for a checkpoint header; the file is truncated: use an earlier "
                    "published checkpoint", path, got);
    if (memcmp(b, "COPPCKPT", 8) != 0) {
        char magic[40];  // as Python's repr() of the bytes prints them
        int n = 0;
        for (int i = 0; i < 8; i++)
            n += snprintf(magic + n, sizeof magic - (size_t)n, b[i] >= 32 && b[i] < 127 && b[i] != '\'' &&
                          b[i] != '\\' ? "%c" : "\\x%02x", b[i]);
        return fail(f, "%s: magic is b'%s', not b'COPPCKPT'; this is not a Coppelius checkpoint", path, magic);
    }
    if (u32_at(b + 8) != CHECKPOINT_VERSION)
        return fail(f, "%s: checkpoint version is %u, not %d; start from a checkpoint of this Coppelius (`snakemake` "
                    "writes init.ckpt)", path, u32_at(b + 8), CHECKPOINT_VERSION);
    if (got < CHECKPOINT_HEADER_BYTES)
        return fail(f, "%s: the header is %zu bytes, not %d; the file is truncated: use an earlier published "
                    "checkpoint", path, got, CHECKPOINT_HEADER_BYTES);
    uint8_t zeroed[CHECKPOINT_HEADER_BYTES], digest[32];
    memcpy(zeroed, b, sizeof zeroed);
    memset(zeroed + 72, 0, 32);
    sha256(zeroed, sizeof zeroed, digest);
    if (memcmp(digest, b + 72, 32) != 0) {
        char actual[65], stored[65];
        sha256_hex(digest, actual), sha256_hex(b + 72, stored);
        return fail(f, "%s: header sha256 is %.16s..., the header says %.16s...; the header was changed: use an "
                    "earlier published checkpoint", path, actual, stored);
    }
    h->description_bytes = u32_at(b + 12);
    h->step = u64_at(b + 16), h->cursor = u64_at(b + 24), h->payload_bytes = u64_at(b + 32);
    h->epoch = u64_at(b + 104);
    memcpy(h->payload_sha256, b + 40, 32);
    if (h->description_bytes > CHECKPOINT_HEADER_BYTES - CHECKPOINT_DESCRIPTION_AT)
        return fail(f, "%s: the header's description is unreadable; " CORRUPT, path);
    // a payload_bytes near 2^64 would wrap the size it needs round to a small one
    const uint64_t size = (uint64_t)st.st_size, most = UINT64_MAX - CHECKPOINT_HEADER_BYTES;
    const uint64_t need = h->payload_bytes > most ? UINT64_MAX : CHECKPOINT_HEADER_BYTES + h->payload_bytes;
    if (size != need || h->payload_bytes > most)
        return fail(f, "%s: size is %llu bytes but the header's payload_bytes %llu needs %llu; the file is %s: "
                    "use an earlier published checkpoint", path, (unsigned long long)size,
                    (unsigned long long)h->payload_bytes, (unsigned long long)need,
                    size < need ? "truncated" : "longer than written");
    return 0;
}

int checkpoint_check_description(const char* path, const checkpoint_header* h, const char* model, size_t model_bytes,
                                 const char* learner, size_t learner_bytes, failure* f) {
    char expected[CHECKPOINT_HEADER_BYTES];
    size_t n = description(expected, sizeof expected, model, model_bytes, learner, learner_bytes);
    const char* found = (const char*)h->bytes + CHECKPOINT_DESCRIPTION_AT;
    if (n == h->description_bytes && memcmp(found, expected, n) == 0) return 0;
    // name the part that differs, as its JSON in the header and in the plan
    const char *end = found + h->description_bytes, *learner_at = NULL, *model_at = NULL, *parts_at = NULL;
    for (const char* c = found; c + 10 < end; c++) {
        if (!learner_at && memcmp(c, "\"learner\":", 10) == 0) learner_at = c + 10;
        if (!model_at && memcmp(c, ",\"model\":", 9) == 0) model_at = c;
        if (!parts_at && memcmp(c, ",\"parts\":", 9) == 0) parts_at = c;
    }
    int located = learner_at && model_at && parts_at && learner_at < model_at && model_at < parts_at;
    int learner_same = located && (size_t)(model_at - learner_at) == learner_bytes &&
                       memcmp(learner_at, learner, learner_bytes) == 0;
    int model_same = located && (size_t)(parts_at - (model_at + 9)) == model_bytes &&
                     memcmp(model_at + 9, model, model_bytes) == 0;
    if (!located || (learner_same && model_same))  // not the planned bytes, yet no model or learner that differs
        return fail(f, "%s: the header's description is not %.*s byte for byte (canonical JSON: its format, parts, "
                    "keys or spacing differ); " CORRUPT, path, (int)n, expected);
    const char* what = learner_same ? "model" : "learner";
    const char* in_header = learner_same ? model_at + 9 : learner_at;
    int header_bytes = (int)(learner_same ? parts_at - (model_at + 9) : model_at - learner_at);
    return fail(f, "%s: header %s is %.*s but the plan's is %.*s; use a checkpoint of this %s or rebuild with a "
                "matching config", path, what, header_bytes, in_header,
                (int)(learner_same ? model_bytes : learner_bytes),
                learner_same ? model : learner, what);
}

int checkpoint_verify_payload(const char* path, const checkpoint_header* h, failure* f) {
    FILE* file = fopen(path, "rb");
    if (!file || fseek(file, CHECKPOINT_HEADER_BYTES, SEEK_SET) != 0) {
        if (file) fclose(file);
        return fail(f, "%s: cannot read the checkpoint's payload; give an existing checkpoint file", path);
    }
    static uint8_t block[1 << 20];
    sha256_context c;
    sha256_init(&c);
    size_t got;
    while ((got = fread(block, 1, sizeof block, file)) > 0) sha256_update(&c, block, got);
    fclose(file);
    uint8_t digest[32];
    sha256_final(&c, digest);
    if (memcmp(digest, h->payload_sha256, 32) != 0) {
        char actual[65], stored[65];
        sha256_hex(digest, actual), sha256_hex(h->payload_sha256, stored);
        return fail(f, "%s: payload sha256 is %.16s..., the header says %.16s...; " CORRUPT, path, actual, stored);
    }
    return 0;
}

int checkpoint_encode_header(uint8_t out[CHECKPOINT_HEADER_BYTES], uint64_t step, uint64_t cursor, uint64_t epoch,
                             uint64_t payload_bytes, const uint8_t payload_sha256[32], const char* model,
                             size_t model_bytes, const char* learner, size_t learner_bytes) {
    memset(out, 0, CHECKPOINT_HEADER_BYTES);
    size_t n = description((char*)out + CHECKPOINT_DESCRIPTION_AT, CHECKPOINT_HEADER_BYTES - CHECKPOINT_DESCRIPTION_AT,
                           model, model_bytes, learner, learner_bytes);
    if (n == 0) return -1;
    uint32_t version = CHECKPOINT_VERSION, length = (uint32_t)n;
    memcpy(out, "COPPCKPT", 8);
    memcpy(out + 8, &version, 4), memcpy(out + 12, &length, 4);
    memcpy(out + 16, &step, 8), memcpy(out + 24, &cursor, 8), memcpy(out + 32, &payload_bytes, 8);
    memcpy(out + 40, payload_sha256, 32);
    memcpy(out + 104, &epoch, 8);
    memset(out + CHECKPOINT_DESCRIPTION_AT + n, 0,
           CHECKPOINT_HEADER_BYTES - CHECKPOINT_DESCRIPTION_AT - n);  // snprintf's NUL
    uint8_t digest[32];
    sha256(out, CHECKPOINT_HEADER_BYTES, digest);  // with the digest field still zero
    memcpy(out + 72, digest, 32);
    return 0;
}
