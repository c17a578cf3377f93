// host_kernel_driver.c: runs one cpu-device kernel of coppelius/host on buffers read from files,
// through the same decode and dispatch the host runtime uses (catalog.c), for
// tests/unit/test_host_kernels.py.
//
//   driver --catalog               print "kernel param kind offset access" lines and "kernel - block BYTES"
//   driver DIR RUNS THREADS        DIR/kernel.txt names the kernel, DIR/scalars.bin holds its scalar
//                                  words in order, DIR/NAME.bin each pointer's bytes (absent: null);
//                                  DIR/NAME.alias names another pointer whose buffer NAME shares (in place).
//                                  Each run reloads every buffer, launches, and writes DIR/NAME.RUN.out.
//   driver DIR RUNS THREADS --time  loads once, launches RUNS times, prints "microseconds per launch X"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "catalog.h"
#include "threads.h"

static void fail(const char* message, const char* detail) {
    fprintf(stderr, "driver: %s %s\n", message, detail);
    exit(2);
}

static unsigned char* read_file(const char* path, long* size) {
    FILE* f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char* data = malloc(*size > 0 ? (size_t)*size : 1);
    if (!data || fread(data, 1, (size_t)*size, f) != (size_t)*size) fail("cannot read", path);
    fclose(f);
    return data;
}

static void print_catalog(void) {
    for (int k = 0; k < KERNEL_COUNT; k++) {
        for (int i = 0; i < CATALOG[k].count; i++) {
            static const char* const ACCESS_NAMES[4] = {"-", "r", "w", "rw"};
            printf("%s %s %s %u %s\n", CATALOG[k].name, CATALOG[k].params[i].name,
                   PARAM_KIND_NAMES[CATALOG[k].params[i].kind], param_offset(k, i),
                   ACCESS_NAMES[CATALOG[k].params[i].access]);
        }
        printf("%s - block %u\n", CATALOG[k].name, param_block_bytes(k));
    }
}

int main(int argc, char** argv) {
    if (argc == 2 && strcmp(argv[1], "--catalog") == 0) {
        print_catalog();
        return 0;
    }
    int timing = argc == 5 && strcmp(argv[4], "--time") == 0;
    if (argc != 4 && !timing) fail("usage:", "driver DIR RUNS THREADS [--time] | driver --catalog");
    const char* dir = argv[1];
    int runs = atoi(argv[2]);
    threads_start(atoi(argv[3]));
    char path[4096], name[64] = {0};
    long size;
    snprintf(path, sizeof path, "%s/kernel.txt", dir);
    unsigned char* text = read_file(path, &size);
    if (!text || size <= 0 || size >= (long)sizeof name) fail("cannot read", path);
    memcpy(name, text, (size_t)size);
    name[strcspn(name, "\n")] = 0;
    int kernel = kernel_id(name);
    if (kernel < 0) fail("unknown kernel", name);
    const kernel_abi* abi = &CATALOG[kernel];
    snprintf(path, sizeof path, "%s/scalars.bin", dir);
    long scalar_bytes;
    unsigned char* scalars = read_file(path, &scalar_bytes);
    if (!scalars) fail("cannot read", path);

    // the arena: every pointer's buffer at a 256-aligned offset; an aliased pointer takes its target's
    unsigned char* input[MAX_PARAMS] = {0};
    long bytes[MAX_PARAMS] = {0}, offset[MAX_PARAMS] = {0}, arena_bytes = 0;
    int shares[MAX_PARAMS];
    for (int i = 0; i < abi->count; i++) {
        shares[i] = i;
        if (!param_is_pointer(abi->params[i].kind)) continue;
        snprintf(path, sizeof path, "%s/%s.alias", dir, abi->params[i].name);
        long alias_bytes;
        unsigned char* alias = read_file(path, &alias_bytes);
        if (alias) {
            char target[64] = {0};
            memcpy(target, alias, (size_t)(alias_bytes < 63 ? alias_bytes : 63));
            target[strcspn(target, "\n")] = 0;
            for (int j = 0; j < abi->count; j++)
                if (j != i && strcmp(abi->params[j].name, target) == 0) shares[i] = j;
            if (shares[i] == i) fail("no pointer to alias in", path);
            free(alias);
            continue;
        }
        snprintf(path, sizeof path, "%s/%s.bin", dir, abi->params[i].name);
        input[i] = read_file(path, &bytes[i]);
        offset[i] = arena_bytes;
        arena_bytes += (bytes[i] + 255) / 256 * 256;
    }
    for (int i = 0; i < abi->count; i++) {
        if (shares[i] == i) continue;
        if (!input[shares[i]]) fail("aliases a null pointer:", abi->params[i].name);
        bytes[i] = bytes[shares[i]], offset[i] = offset[shares[i]];
    }
    unsigned char* arena = aligned_alloc(256, (size_t)(arena_bytes > 0 ? arena_bytes : 256));
    uint8_t block[256] = {0};
    for (int i = 0, s = 0; i < abi->count; i++) {
        uint32_t at = param_offset(kernel, i);
        if (param_is_pointer(abi->params[i].kind)) {
            uint64_t address = input[shares[i]] ? (uint64_t)(uintptr_t)(arena + offset[i]) : 0;
            memcpy(block + at, &address, 8);
        } else {
            if ((s + 1) * 4 > scalar_bytes) fail("too few scalars in", path);
            memcpy(block + at, scalars + 4 * s++, 4);
        }
    }
    struct timespec started, finished;
    clock_gettime(CLOCK_MONOTONIC, &started);
    for (int run = 0; run < runs; run++) {
        for (int i = 0; i < abi->count && (!timing || run == 0); i++)
            if (input[i]) memcpy(arena + offset[i], input[i], (size_t)bytes[i]);
        launch_args args;
        char error[512];
        if (decode_launch(kernel, block, param_block_bytes(kernel), &args, error, sizeof error) != 0 ||
            run_launch(&args, (uint64_t)(uintptr_t)arena, (uint64_t)(uintptr_t)arena + arena_bytes, error,
                       sizeof error) != 0)
            fail("launch refused:", error);
        for (int i = 0; i < abi->count && !timing; i++) {
            if (!input[shares[i]]) continue;
            snprintf(path, sizeof path, "%s/%s.%d.out", dir, abi->params[i].name, run);
            FILE* f = fopen(path, "wb");
            if (!f || fwrite(arena + offset[i], 1, (size_t)bytes[i], f) != (size_t)bytes[i]) fail("cannot write", path);
            fclose(f);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &finished);
    if (timing)
        printf("microseconds per launch %.2f\n", ((finished.tv_sec - started.tv_sec) * 1e9 +
                                                  (finished.tv_nsec - started.tv_nsec)) / 1e3 / runs);
    threads_stop();
    return 0;
}
