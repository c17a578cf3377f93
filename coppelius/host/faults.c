// faults.c: the fault points (faults.h).
#include "faults.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int loaded;
static char target[64];
static long count = 1, seen;

void fault_point(const char* name) {
    if (!loaded) {
        loaded = 1;
        const char* setting = getenv("COPPELIUS_KILL_AT");
        if (setting) {
            const char* colon = strchr(setting, ':');
            size_t n = colon ? (size_t)(colon - setting) : strlen(setting);
            if (n < sizeof target) memcpy(target, setting, n), target[n] = 0;
            if (colon && colon[1]) count = strtol(colon + 1, NULL, 10);
        }
    }
    if (!target[0] || strcmp(name, target) != 0) return;
    if (++seen == count) kill(getpid(), SIGKILL);
}
