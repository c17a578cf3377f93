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

// mkstemps's template: the six characters it replaces with random ones.
static const char RANDOM_PART[] = {'X', 'X', 'X', 'X', 'X', 'X', 0};

int make_temporary(char* out, size_t room, const char* directory, const char* name) {
    if ((size_t)snprintf(out, room, "%s/.%s.%s.tmp", directory, name, RANDOM_PART) >= room) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return mkstemps(out, 4);
}

int publication_begin(publication* p, const char* path, failure* f) {
    char directory[4096], copy[4096];
    p->fd = -1, p->error = 0, p->temporary[0] = 0;
    if (strlen(path) >= sizeof p->path - 32) return fail(f, "%s: the path is too long; use a shorter --out", path);
    snprintf(p->path, sizeof p->path, "%s", path);
    directory_of(path, directory, sizeof directory);
    snprintf(copy, sizeof copy, "%s", path);
    p->fd = make_temporary(p->temporary, sizeof p->temporary, directory, basename(copy));
    p->error = errno;
    if (p->fd < 0)
        return fail(f, "%s: cannot create a temporary in %s (%s); check that the directory exists and is writable",
                    path, directory, strerror(errno));
    return 0;
}

// Every byte of data written at offset (offset < 0: at the file position); on failure the
// temporary is removed and the refusal names the destination.
static int write_all(publication* p, const void* data, size_t n, long long offset, failure* f) {
    const char* at = data;
    while (n > 0) {
        ssize_t wrote = offset < 0 ? write(p->fd, at, n) : pwrite(p->fd, at, n, offset);
        if (wrote < 0 && errno == EINTR) continue;
        if (wrote <= 0) {
            int error = wrote < 0 ? errno : ENOSPC;
            publication_abort(p);
            p->error = error;
            return fail(f, "%s: writing failed (%s); %s and run again", p->path, strerror(error),
                        write_remedy(error));
        }
        at += wrote, n -= (size_t)wrote;
        if (offset >= 0) offset += wrote;
    }
    return 0;
}

int publication_write(publication* p, const void* data, size_t n, failure* f) { return write_all(p, data, n, -1, f); }

int publication_write_at(publication* p, const void* data, size_t n, long long offset, failure* f) {
    return write_all(p, data, n, offset, f);
}

int publication_commit(publication* p, failure* f) {
    char directory[4096];
    const char* step = NULL;
    if (fchmod(p->fd, 0644) != 0) step = "chmod";  // mkstemp's 0600 is not what a published file should have
    else if (fsync(p->fd) != 0) step = "fsync";
    if (step) {
        int error = errno;
        publication_abort(p);
        p->error = error;
        return fail(f, "%s: %s of the temporary failed (%s); %s and run again", p->path, step, strerror(error),
                    write_remedy(error));
    }
    close(p->fd);
    p->fd = -1;
    if (rename(p->temporary, p->path) != 0) {
        int error = errno;
        p->error = error;
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
        p->error = error;
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

// One folder, made durable in its parent as a published file is in its folder: else after a power cut a checkpoint's
// synced bytes could lie in a folder no directory names. 0, or the errno.
static int make_folder(const char* path) {
    char parent[4096];
    if (mkdir(path, 0777) != 0) return errno == EEXIST ? 0 : errno;
    directory_of(path, parent, sizeof parent);
    int fd = open(parent, O_RDONLY | O_DIRECTORY), error = 0;
    if (fd < 0 || fsync(fd) != 0) error = errno;
    if (fd >= 0) close(fd);
    return error;
}

int make_folders(const char* path) {
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", path);
    for (char* c = copy + 1; *c; c++) {
        if (*c != '/') continue;
        *c = 0;
        int error = make_folder(copy);
        if (error) return error;
        *c = '/';
    }
    return make_folder(copy);
}

int publication_begin_in_new_folder(publication* p, const char* path, failure* f) {
    char directory[4096];
    directory_of(path, directory, sizeof directory);
    int error = make_folders(directory);
    if (error) {
        p->fd = -1, p->error = error, p->temporary[0] = 0;
        return fail(f, "%s: cannot create the folder %s (%s); check that it is writable", path, directory,
                    strerror(error));
    }
    return publication_begin(p, path, f);
}

int publish_link(const char* source, const char* path, int* error, failure* f) {
    struct stat a, b;
    if (stat(source, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) return 0;
    publication p;
    if (publication_begin(&p, path, f) != 0) return *error = p.error, -1;
    close(p.fd);  // only its unique name is used: the link (or copy) takes its place
    p.fd = -1;
    unlink(p.temporary);
    if (link(source, p.temporary) != 0) {  // another file system: copy the bytes
        int in = open(source, O_RDONLY);
        p.fd = in < 0 ? -1 : open(p.temporary, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (p.fd < 0) {
            *error = errno;
            if (in >= 0) close(in);
            return fail(f, "%s: cannot copy %s (%s); check the folder", path, source, strerror(*error));
        }
        static char block[1 << 20];
        ssize_t got;
        while ((got = read(in, block, sizeof block)) > 0)
            if (publication_write(&p, block, (size_t)got, f) != 0) return close(in), *error = p.error, -1;
        close(in);
        if (publication_commit(&p, f) != 0) return *error = p.error, -1;
        return 0;
    }
    if (rename(p.temporary, path) != 0) {
        *error = errno;
        unlink(p.temporary);
        return fail(f, "%s: renaming onto it failed (%s); check the folder", path, strerror(*error));
    }
    char directory[4096];
    directory_of(path, directory, sizeof directory);
    int fd = open(directory, O_RDONLY | O_DIRECTORY);
    int failed = fd < 0 || fsync(fd) != 0;
    *error = errno;
    if (fd >= 0) close(fd);
    if (failed) return fail(f, "%s: fsync of its directory failed (%s)", path, strerror(*error));
    return 0;
}
