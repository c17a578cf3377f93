// main.c: the host ELF's entry. It checks the CPU, then does what its arguments ask:
//
//   host.elf --checkpoint C --tokens T --out DIR [--operation train|predict] [--validation V]
//            [--predict-from start|checkpoint]
//                        run the embedded plan (run.h): check --out, itself and every input,
//                        then train (scoring the validation stream V at every publication) or
//                        predict only (from the stream's start, or the checkpoint's cursor) on the
//                        target's device, publishing checkpoints, predictions and the result record under DIR
//   host.elf --operation generate --checkpoint C (--prompt TEXT | --prompt-tokens FILE) --new-tokens N
//            [--temperature X] [--top-k K] [--seed S] --out FILE
//                        sample N tokens after the prompt (generate.h): the sample at FILE and on stdout
//   host.elf --help      print the usage and exit 0
//   host.elf --verify    verify itself (/proc/self/exe: every section against the identity note's
//                        digests), then print the machine, the identity and one line per section
//                        (the lines `coppelius inspect` prints) and exit 0
//
// COPPELIUS_THREADS=N sets the cpu device's worker threads (1..4096; default: one per CPU it may use);
// COPPELIUS_PROGRESS_TTY=1 redraws the progress line in place as on a terminal (`coppelius run` sets it).
// Any refusal is one line on stderr and exit status 1.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run.h"
#include "self.h"
#include "threads.h"
#include "sha256.h"

#if defined(__x86_64__)
#include <cpuid.h>
// The x86-64 build uses AVX2 and FMA (x86-64-v3); say so plainly on an older CPU instead of
// dying of an illegal instruction in the first kernel.
static int cpu_has_x86_64_v3(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int fma = c >> 12 & 1, osxsave = c >> 27 & 1, avx = c >> 28 & 1, f16c = c >> 29 & 1;
    if (!(fma && osxsave && avx && f16c)) return 0;
    unsigned low, high;
    __asm__("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
    if ((low & 6) != 6) return 0;  // the OS saves the AVX registers
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return b >> 5 & 1;  // AVX2
}
#else
static int cpu_has_x86_64_v3(void) { return 1; }
#endif

static const char* machine_name(unsigned machine) {
    return machine == 62 ? "x86_64" : machine == 183 ? "aarch64" : "unknown";
}

static int verify(const self_image* image) {
    printf("machine: %s (e_machine %u)\n", machine_name(image->machine), image->machine);
    printf("identity: %.*s\n", (int)image->identity_bytes, image->identity);
    for (int i = 0; i < image->count; i++) {
        uint8_t digest[32];
        char hex[65];
        sha256(image->sections[i].data, image->sections[i].bytes, digest);
        sha256_hex(digest, hex);
        printf("section .coppelius.%s: %llu bytes, sha256 %.16s\n", image->sections[i].name,
               (unsigned long long)image->sections[i].bytes, hex);
    }
    return 0;
}

static const char USAGE[] = "--checkpoint C --tokens T --out DIR [--operation train|predict] [--validation V] "
                            "[--predict-from start|checkpoint], or --operation generate --checkpoint C "
                            "--prompt TEXT|--prompt-tokens FILE --new-tokens N [--temperature X] [--top-k K] "
                            "[--seed S] --out FILE, or --verify";

enum { TRAIN = 1, PREDICT = 2, GENERATE = 4 };

typedef struct {
    const char* name;
    const char** value;
    unsigned operations;  // the operations that take it
    const char* give;     // what an empty value should have been
} option;

static unsigned operation_bit(const char* operation) {
    return strcmp(operation, "train") == 0     ? TRAIN
           : strcmp(operation, "predict") == 0 ? PREDICT
           : strcmp(operation, "generate") == 0 ? GENERATE
                                                : 0;  // run_check_inputs names it
}

// The run: 0 when it completed, 1 with its one line on stderr otherwise.
static int run(const char* self, int argc, char** argv) {
    static run_state state;  // zeroed
    generation* g = &state.g;
    const char *checkpoint = NULL, *tokens = NULL, *out = NULL, *operation = NULL, *validation = NULL;
    const char* predict_from = NULL;
    const option options[] = {
        {"--checkpoint", &checkpoint, TRAIN | PREDICT | GENERATE, "a checkpoint file"},
        {"--tokens", &tokens, TRAIN | PREDICT, "a token file"},
        {"--out", &out, TRAIN | PREDICT | GENERATE, "a folder for the outputs (a file path for generate's sample)"},
        {"--operation", &operation, TRAIN | PREDICT | GENERATE, "train, predict or generate"},
        {"--validation", &validation, TRAIN, "a token file"},
        {"--predict-from", &predict_from, PREDICT, "start or checkpoint"},
        {"--prompt", &g->prompt, GENERATE, "at least one character of text"},
        {"--prompt-tokens", &g->prompt_tokens, GENERATE, "a file of token ids"},
        {"--new-tokens", &g->new_tokens_text, GENERATE, "a whole number of tokens"},
        {"--temperature", &g->temperature_text, GENERATE, "a finite number >= 0"},
        {"--top-k", &g->top_k_text, GENERATE, "a whole number"},
        {"--seed", &g->seed_text, GENERATE, "a whole number"},
    };
    enum { OPTIONS = sizeof options / sizeof options[0] };
    for (int i = 1; i < argc; i++) {
        const option* o = NULL;
        for (int k = 0; k < OPTIONS && !o; k++)
            if (strcmp(argv[i], options[k].name) == 0) o = &options[k];
        if (!o || i + 1 == argc) {
            fprintf(stderr, "command line: argument %s is not one of %s; give those\n", argv[i], USAGE);
            return 1;
        }
        const char* value = argv[++i];
        if (*o->value) {  // the last one winning would silently run on another file than the user meant
            fprintf(stderr, "command line: %s is given twice ('%s' and '%s'); give it once\n", o->name, *o->value,
                    value);
            return 1;
        }
        if (!value[0]) {  // an unset shell variable: "" would mean the working folder
            fprintf(stderr, "command line: %s is empty; give %s\n", o->name, o->give);
            return 1;
        }
        *o->value = value;
    }
    if (!operation) operation = "train";
    unsigned bit = operation_bit(operation);
    for (int k = 0; k < OPTIONS && bit; k++) {
        int said_later = bit == PREDICT && options[k].value == &validation;  // run_check_inputs: what predict scores
        if (*options[k].value && !(options[k].operations & bit) && !said_later) {
            fprintf(stderr, "command line: %s is not for --operation %s; leave it out\n", options[k].name, operation);
            return 1;
        }
    }
    if (!predict_from) predict_from = "start";
    int generate = bit == GENERATE;  // it reads a prompt, not a token stream
    if (!checkpoint || (!tokens && !generate) || !out) {
        fprintf(stderr, "command line: %s is missing; give %s\n", !checkpoint ? "--checkpoint"
                : !tokens && !generate ? "--tokens" : "--out", USAGE);
        return 1;
    }
    const char* threads = getenv("COPPELIUS_THREADS");
    char* end = NULL;
    long thread_count = threads && threads[0] ? strtol(threads, &end, 10) : 0;
    if (threads && threads[0] && (*end != 0 || thread_count < 1 || thread_count > 4096)) {
        fprintf(stderr, "environment: COPPELIUS_THREADS is '%s'; give a whole number of threads from 1 to 4096, or "
                "leave it unset (one a CPU)\n", threads);
        return 1;
    }
    int status = run_check_inputs(&state, self, checkpoint, tokens, out, operation, validation, predict_from);
    if (status == 0) {
        threads_start((int)thread_count);  // the device is touched only once every input has passed
        status = run_execute(&state);
        threads_stop();
    }
    if (status != 0 && state.progress_count && (isatty(2) || getenv("COPPELIUS_PROGRESS_TTY")))
        fputc('\n', stderr);  // below the progress line drawn in place
    if (status != 0) fprintf(stderr, "%s\n", state.f.line);
    run_close(&state);
    return status != 0;
}

int main(int argc, char** argv) {
    if (!cpu_has_x86_64_v3()) {
        fprintf(stderr, "%s: this CPU lacks AVX2/FMA (x86-64-v3), which the x86-64 host ELF is built for; run it on "
                "a newer x86-64 host\n", argv[0]);
        return 1;
    }
    char path[4096];
    ssize_t length = readlink("/proc/self/exe", path, sizeof path - 1);  // the real name, for the messages
    snprintf(path + (length > 0 ? length : 0), sizeof path - (length > 0 ? (size_t)length : 0), "%s",
             length > 0 ? "" : "/proc/self/exe");
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("usage: %s %s\n", argv[0], USAGE);
        return 0;
    }
    if (!(argc == 2 && strcmp(argv[1], "--verify") == 0)) return run(path, argc, argv);
    failure f;
    self_image image;
    if (self_open(path, &image, &f) != 0) {
        fprintf(stderr, "%s\n", f.line);
        return 1;
    }
    int status = verify(&image);
    self_close(&image);
    return status;
}
