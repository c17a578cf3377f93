// host_readers_driver.c: the host runtime's readers (coppelius/host: sha256.c, tokens.c,
// publish.c, self.c) run on files named on the command line, for tests/unit/test_host_readers.py.
//
//   driver sha256 FILE                       the file's sha256, fed in chunks of 1, 2, 3, ... bytes
//   driver tokens FILE VOCAB START COUNT     "count N", or the refusal
//   driver publish PATH TEXT                 publish TEXT at PATH atomically
//   driver abandon PATH TEXT                 write TEXT to a publication of PATH, then abort it
//   driver self PATH                         verify PATH as a host ELF; one line per section
//   driver checkpoint PATH MODEL LEARNER     read, check (description against the JSON given) and
//                                            verify a checkpoint; "step S cursor C payload_bytes P"
//   driver checkpoint-write OUT STEP CURSOR PAYLOAD MODEL LEARNER
//                                            publish a checkpoint of PAYLOAD's bytes at OUT
// A refusal is one line on stderr and exit status 1; a usage error exit status 2.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "publish.h"
#include "self.h"
#include "sha256.h"
#include "tokens.h"

static int refuse(const failure* f) {
    fprintf(stderr, "%s\n", f->line);
    return 1;
}

static int hash_file(const char* path) {
    FILE* file = fopen(path, "rb");
    if (!file) return 2;
    sha256_context c;
    sha256_init(&c);
    unsigned char buffer[4096];
    size_t chunk = 1, got;
    while ((got = fread(buffer, 1, chunk, file)) > 0) {
        sha256_update(&c, buffer, got);
        chunk = chunk % 200 + 1;  // chunk sizes across block boundaries
    }
    fclose(file);
    uint8_t digest[32];
    char hex[65];
    sha256_final(&c, digest);
    sha256_hex(digest, hex);
    printf("%s\n", hex);
    return 0;
}

int main(int argc, char** argv) {
    failure f;
    if (argc == 3 && strcmp(argv[1], "sha256") == 0) return hash_file(argv[2]);
    if (argc == 6 && strcmp(argv[1], "tokens") == 0) {
        token_stream stream;
        if (tokens_open(argv[2], &stream, &f) != 0) return refuse(&f);
        int status = tokens_check_vocab(&stream, atoll(argv[4]), atoll(argv[5]), atoi(argv[3]), &f);
        if (status == 0) printf("count %lld\n", (long long)stream.count);
        tokens_close(&stream);
        return status == 0 ? 0 : refuse(&f);
    }
    if (argc == 4 && strcmp(argv[1], "publish") == 0)
        return publish_bytes(argv[2], argv[3], strlen(argv[3]), &f) == 0 ? 0 : refuse(&f);
    if (argc == 4 && strcmp(argv[1], "abandon") == 0) {
        publication p;
        if (publication_begin(&p, argv[2], &f) != 0 || publication_write(&p, argv[3], strlen(argv[3]), &f) != 0)
            return refuse(&f);
        publication_abort(&p);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "self") == 0) {
        self_image image;
        if (self_open(argv[2], &image, &f) != 0) return refuse(&f);
        for (int i = 0; i < image.count; i++) {
            uint8_t digest[32];
            char hex[65];
            sha256(image.sections[i].data, image.sections[i].bytes, digest);
            sha256_hex(digest, hex);
            printf("%s %llu %s\n", image.sections[i].name, (unsigned long long)image.sections[i].bytes, hex);
        }
        self_close(&image);
        return 0;
    }
    if (argc == 5 && strcmp(argv[1], "checkpoint") == 0) {
        checkpoint_header h;
        if (checkpoint_read_header(argv[2], &h, &f) != 0 ||
            checkpoint_check_description(argv[2], &h, argv[3], strlen(argv[3]), argv[4], strlen(argv[4]), &f) != 0 ||
            checkpoint_verify_payload(argv[2], &h, &f) != 0)
            return refuse(&f);
        printf("step %llu cursor %llu epoch %llu payload_bytes %llu\n", (unsigned long long)h.step,
               (unsigned long long)h.cursor, (unsigned long long)h.epoch, (unsigned long long)h.payload_bytes);
        return 0;
    }
    if (argc == 9 && strcmp(argv[1], "checkpoint-write") == 0) {  // PATH STEP CURSOR EPOCH PAYLOAD MODEL LEARNER
        FILE* file = fopen(argv[6], "rb");
        static uint8_t payload[1 << 22];
        size_t n = file ? fread(payload, 1, sizeof payload, file) : 0;
        if (file) fclose(file);
        uint8_t digest[32], header[CHECKPOINT_HEADER_BYTES];
        sha256(payload, n, digest);
        if (checkpoint_encode_header(header, strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10),
                                     strtoull(argv[5], NULL, 10), n, digest, argv[7], strlen(argv[7]), argv[8],
                                     strlen(argv[8])) != 0)
            return 2;
        publication p;
        if (publication_begin(&p, argv[2], &f) != 0 || publication_write(&p, header, sizeof header, &f) != 0 ||
            publication_write(&p, payload, n, &f) != 0 || publication_commit(&p, &f) != 0)
            return refuse(&f);
        return 0;
    }
    fprintf(stderr, "usage: driver sha256|tokens|publish|abandon|self|checkpoint|checkpoint-write ...\n");
    return 2;
}
