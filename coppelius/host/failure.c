// failure.c: one-line refusals (failure.h).
#include "failure.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int fail(failure* f, const char* format, ...) {
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(f->line, sizeof f->line, format, arguments);
    va_end(arguments);
    for (char* c = f->line; *c; c++)
        if (*c == '\n' || *c == '\r') *c = ' ';  // one line, whatever a value held
    return -1;
}
