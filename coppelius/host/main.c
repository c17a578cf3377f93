// main.c: the host ELF's entry. It checks the CPU, then reads and verifies itself
// (/proc/self/exe: every section against the identity note's digests) before anything else.
//
//   host.elf --verify    verify, then print the machine, the identity and one line per section
//                        (the lines `coppelius inspect` prints) and exit 0
//
// Any refusal is one line on stderr and exit status 1.
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "self.h"
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
    failure f;
    self_image image;
    if (self_open(path, &image, &f) != 0) {
        fprintf(stderr, "%s\n", f.line);
        return 1;
    }
    int status = 0;
    if (argc == 2 && strcmp(argv[1], "--verify") == 0) {
        status = verify(&image);
    } else {
        fprintf(stderr, "%s: arguments are not --verify; this native host ELF verifies itself with --verify, and "
                "trains with `coppelius run %s --checkpoint C --tokens T --out DIR`\n", argv[0], argv[0]);
        status = 1;
    }
    self_close(&image);
    return status;
}
