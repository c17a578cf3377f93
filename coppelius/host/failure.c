// failure.c: one-line refusals (failure.h).
#include "failure.h"

#include <errno.h>
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

const char* write_remedy(int error) {
    if (error == ENOSPC || error == EDQUOT || error == EFBIG) return "free space";
    if (error == EACCES || error == EPERM || error == EROFS) return "make the folder writable";
    return "check the disk";
}
