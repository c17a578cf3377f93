// failure.h: how the host runtime's readers refuse. A reader returns 0, or -1 having written one
// line into a failure: "WHERE: WHAT is VALUE; WHAT TO DO", like coppelius.errors.refuse. main()
// prints it alone on stderr and exits with status 1; nothing is ever printed half-way.
#ifndef COPPELIUS_FAILURE_H
#define COPPELIUS_FAILURE_H

typedef struct { char line[1024]; } failure;

// Write the line (printf-style) and return -1, so a reader can `return fail(f, ...)`.
int fail(failure* f, const char* format, ...) __attribute__((format(printf, 2, 3)));

// What to do when writing a file failed with errno `error`: "free space" (a full disk or quota), "make the folder
// writable" (permission denied, a read-only file system), else "check the disk" (an I/O error and the rest).
const char* write_remedy(int error);

#endif
