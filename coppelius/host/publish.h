// publish.h: atomic publication (coppelius/formats/publish.py): a file appears whole under its
// name or not at all, even across a crash. Written to a temporary in the destination's
// directory; on commit fsynced, made 0644, renamed over the destination, and the directory
// fsynced; on abort the temporary is removed and the destination is untouched.
#ifndef COPPELIUS_PUBLISH_H
#define COPPELIUS_PUBLISH_H
#include <stddef.h>

#include "failure.h"

typedef struct {
    char path[4096];       // the destination
    char temporary[4096];  // DIR/.NAME.<six random characters>.tmp
    int fd;
    int error;             // errno of the failure, when a call returned -1
} publication;

// Create DIR/.NAME.<six random characters>.tmp (mkstemps) and open it: the fd, or -1 with errno.
int make_temporary(char* out, size_t room, const char* directory, const char* name);
// Create the temporary (the directory must exist). 0, or -1 with the refusal.
int publication_begin(publication* p, const char* path, failure* f);
// publication_begin after creating the destination's directory and its parents (mkdir -p).
int publication_begin_in_new_folder(publication* p, const char* path, failure* f);
int publication_write(publication* p, const void* data, size_t n, failure* f);
// pwrite at an offset of the temporary (the checkpoint's header, written last)
int publication_write_at(publication* p, const void* data, size_t n, long long offset, failure* f);
int publication_commit(publication* p, failure* f);
void publication_abort(publication* p);
// The whole of `data` published at `path`.
int publish_bytes(const char* path, const void* data, size_t n, failure* f);
// `path` names the same bytes as `source`: a hard link (else a copy) renamed into place, the
// directory fsynced; nothing is done when it already is that file. -1 with errno-bearing refusal.
int publish_link(const char* source, const char* path, int* error, failure* f);
// mkdir -p. 0, or the errno.
int make_folders(const char* path);
#endif
