// publish.c: temporary, fsync, rename, directory fsync (publish.h).
#include "publish.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void directory_of(const char* path, char* out, size_t n) {
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", path);
    snprintf(out, n, "%s", dirname(copy));
}

int publication_begin(publication* p, const char* path, failure* f) {
    char directory[4096], copy[4096];
    p->fd = -1;
    if (strlen(path) >= sizeof p->path - 32) return fail(f, "%s: the path is too long; use a shorter --out", path);
    snprintf(p->path, sizeof p->path, "%s", path);
    directory_of(path, directory, sizeof directory);
    snprintf(copy, sizeof copy, "%s", path);
    snprintf(p->temporary, sizeof p->temporary, "%s/.%s.XXXXXX.tmp", directory, basename(copy));
    p->fd = mkstemps(p->temporary, 4);
    if (p->fd < 0)
        return fail(f, "%s: cannot create a temporary in %s (%s); check that the directory exists and is writable",
                    path, directory, strerror(errno));
    return 0;
}

int publication_write(publication* p, const void* data, size_t n, failure* f) {
    const char* at = data;
    while (n > 0) {
        ssize_t wrote = write(p->fd, at, n);
        if (wrote < 0 && errno == EINTR) continue;
        if (wrote <= 0) {
            int error = wrote < 0 ? errno : ENOSPC;
            publication_abort(p);
            return fail(f, "%s: writing failed (%s); free space and run again", p->path, strerror(error));
        }
        at += wrote, n -= (size_t)wrote;
    }
    return 0;
}

int publication_write_at(publication* p, const void* data, size_t n, long long offset, failure* f) {
    const char* at = data;
    while (n > 0) {
        ssize_t wrote = pwrite(p->fd, at, n, offset);
        if (wrote < 0 && errno == EINTR) continue;
        if (wrote <= 0) {
            int error = wrote < 0 ? errno : ENOSPC;
            publication_abort(p);
            return fail(f, "%s: writing failed (%s); free space and run again", p->path, strerror(error));
        }
        at += wrote, n -= (size_t)wrote, offset += wrote;
    }
    return 0;
}

int publication_commit(publication* p, failure* f) {
    char directory[4096];
    const char* step = NULL;
    if (fchmod(p->fd, 0644) != 0) step = "chmod";  // mkstemp's 0600 is not what a published file should have
    else if (fsync(p->fd) != 0) step = "fsync";
    if (step) {
        int error = errno;
        publication_abort(p);
        return fail(f, "%s: %s of the temporary failed (%s); free space and run again", p->path, step, strerror(error));
    }
    close(p->fd);
    p->fd = -1;
    if (rename(p->temporary, p->path) != 0) {
        int error = errno;
        unlink(p->temporary);
        p->temporary[0] = 0;
        return fail(f, "%s: renaming the temporary onto it failed (%s); check the directory", p->path, strerror(error));
    }
    p->temporary[0] = 0;
    directory_of(p->path, directory, sizeof directory);
    int fd = open(directory, O_RDONLY | O_DIRECTORY);
    if (fd < 0 || fsync(fd) != 0) {
        int error = errno;
        if (fd >= 0) close(fd);
        return fail(f, "%s: fsync of its directory failed (%s); the file is published but may not survive a crash",
                    p->path, strerror(error));
    }
    close(fd);
    return 0;
}

void publication_abort(publication* p) {
    if (p->fd >= 0) close(p->fd);
    if (p->fd >= 0 || p->temporary[0]) unlink(p->temporary);
    p->fd = -1;
    p->temporary[0] = 0;
}

int publish_bytes(const char* path, const void* data, size_t n, failure* f) {
    publication p;
    if (publication_begin(&p, path, f) != 0 || publication_write(&p, data, n, f) != 0) return -1;
    return publication_commit(&p, f);
}
