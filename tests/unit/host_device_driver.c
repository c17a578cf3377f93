// host_device_driver.c: the cpu device and the host-program walker of coppelius/host run on
// tables read from files (docs/formats.md layouts), for tests/unit/test_host_device.py.
//
//   driver step-size LR BETA1 BETA2 T...          the binary32 step size of each T, as hex bits
//   driver walk DIR train|predict RINGS BUFFERS   walk DIR/program.bin; print each step yielded
//   driver issue DIR ARENA HOST STEP_SIZE RING... load DIR/{launches,relocations,commands,ring,
//                                                 step_words,planes,buffers}.bin and DIR/host.bin,
//                                                 patch the step size (a float, or -), issue the
//                                                 rings, write DIR/arena.out and DIR/host.out
//   driver waits DIR ARENA HOST                   load DIR's tables as issue does; print each ring entry's
//                                                 commands' waits (waits.h): "ENTRY COMMAND: WAIT..."
// A refusal is one line on stderr and exit status 1.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device_cpu.h"
#include "program.h"
#include "threads.h"
#include "waits.h"

static uint8_t* load(const char* dir, const char* name, uint64_t* bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE* file = fopen(path, "rb");
    if (!file) { fprintf(stderr, "driver: cannot open %s\n", path); exit(2); }
    fseek(file, 0, SEEK_END);
    long size = ftell(file);
    fseek(file, 0, SEEK_SET);
    uint8_t* data = malloc((size_t)size + 1);
    if (!data || fread(data, 1, (size_t)size, file) != (size_t)size) { fprintf(stderr, "driver: cannot read %s\n",
            path); exit(2); }
    fclose(file);
    *bytes = (uint64_t)size;
    return data;
}

static void save(const char* dir, const char* name, const uint8_t* data, uint64_t bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE* file = fopen(path, "wb");
    if (!file || fwrite(data, 1, bytes, file) != bytes) { fprintf(stderr, "driver: cannot write %s\n", path); exit(2); }
    fclose(file);
}

static int print_step(void* context, const program_step* s) {
    (void)context;
    printf("%s %u %u %u %llu %llu %llu %u %u\n", STEP_NAMES[s->op], s->ring, s->buffer, s->file,
           (unsigned long long)s->count, (unsigned long long)s->offset, (unsigned long long)s->bytes, s->value,
           s->body);
    return 0;
}

static int read_table(const char* dir, const char* name, const char magic[8], uint32_t record_bytes, table* t,
                      failure* f) {
    uint64_t bytes;
    uint8_t* data = load(dir, name, &bytes);  // kept for the run (the driver exits soon)
    return table_read(data, bytes, magic, record_bytes, name, t, f);
}

int main(int argc, char** argv) {
    failure f;
    if (argc >= 6 && strcmp(argv[1], "step-size") == 0) {
        for (int i = 5; i < argc; i++) {
            float word = step_size(strtod(argv[2], NULL), strtod(argv[3], NULL), strtod(argv[4], NULL),
                                   strtoull(argv[i], NULL, 10));
            uint32_t bits;
            memcpy(&bits, &word, 4);
            printf("%08x\n", bits);
        }
        return 0;
    }
    if (argc == 6 && strcmp(argv[1], "walk") == 0) {
        table records;
        program p;
        if (read_table(argv[2], "program.bin", "COPHPRG", sizeof(program_step), &records, &f) != 0 ||
            program_check(&records, (uint32_t)atoi(argv[4]), (uint32_t)atoi(argv[5]), "program.bin", &p, &f) != 0) {
            fprintf(stderr, "%s\n", f.line);
            return 1;
        }
        return program_walk(&p, strcmp(argv[3], "predict") == 0, 0, 1, print_step, NULL);
    }
    int waits = argc == 5 && strcmp(argv[1], "waits") == 0;
    if ((argc >= 6 && strcmp(argv[1], "issue") == 0) || waits) {
        const char* dir = argv[2];
        device_tables t;
        cpu_device d;
        if (read_table(dir, "launches.bin", "COPLNCH", sizeof(launch_record), &t.launches, &f) != 0 ||
            read_table(dir, "relocations.bin", "COPRELO", sizeof(relocation_record), &t.relocations, &f) != 0 ||
            read_table(dir, "commands.bin", "COPCMDS", sizeof(command_record), &t.commands, &f) != 0 ||
            read_table(dir, "ring.bin", "COPRING", sizeof(ring_record), &t.ring, &f) != 0 ||
            read_table(dir, "step_words.bin", "COPSTEP", sizeof(step_word_record), &t.step_words, &f) != 0 ||
            read_table(dir, "planes.bin", "COPPLAN", sizeof(plane_record), &t.planes, &f) != 0 ||
            read_table(dir, "buffers.bin", "COPBUFS", sizeof(buffer_record), &t.buffers, &f) != 0 ||
            cpu_device_open(&d, &t, strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10), dir, &f) != 0) {
            fprintf(stderr, "%s\n", f.line);
            return 1;
        }
        for (uint32_t e = 0; waits && e < t.ring.count; e++) {
            ring_record* r = table_record(&t.ring, e);
            entry_waits w;
            if (entry_waits_find(&d.l, r->offset, r->length, &w, &f) != 0) {
                fprintf(stderr, "%s\n", f.line);
                return 1;
            }
            for (uint32_t c = 0; c < r->length; c++) {
                printf("%u %u:", e, c);
                for (uint32_t k = w.start[c]; k < w.start[c + 1]; k++) printf(" %u", w.list[k]);
                printf("\n");
            }
            entry_waits_free(&w);
        }
        if (waits) return 0;
        threads_start(2);
        uint64_t host_bytes;
        uint8_t* host = load(dir, "host.bin", &host_bytes);
        memcpy(d.host, host, host_bytes < d.host_bytes ? host_bytes : d.host_bytes);
        if (strcmp(argv[5], "-") != 0) cpu_device_patch_step_size(&d, strtof(argv[5], NULL), 0);
        for (int i = 6; i < argc; i++) {
            uint32_t ring = (uint32_t)atoi(argv[i]);
            if (ring >= t.ring.count) { fprintf(stderr, "driver: ring %u out of range\n", ring); return 2; }
            if (cpu_device_issue(&d, ring, &f) != 0) {
                fprintf(stderr, "%s\n", f.line);
                return 1;
            }
        }
        save(dir, "arena.out", d.arena, d.arena_bytes);
        save(dir, "host.out", d.host, d.host_bytes);
        cpu_device_close(&d);
        threads_stop();
        return 0;
    }
    fprintf(stderr, "usage: driver step-size|walk|issue|waits ...\n");
    return 2;
}
