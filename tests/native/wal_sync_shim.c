#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Preloaded (LD_PRELOAD) into a test's subprocess (tests/wal_sync.py): each fsync or
 * fdatasync of a file whose name ends in "-wal" (SQLite's write-ahead log) is written as
 * a line "sync" to the file $WAL_SYNC_LOG and, while the file $WAL_SYNC_FAIL exists,
 * fails with EIO (as a failing disk does) instead of syncing. Other files sync as usual. */
static int wal_fd(int fd) {
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n < 4) return 0;
    path[n] = 0;
    return strcmp(path + n - 4, "-wal") == 0;
}

static int hook(int fd) {
    if (!wal_fd(fd)) return 0;
    const char *log = getenv("WAL_SYNC_LOG");
    if (log) { FILE *f = fopen(log, "a"); if (f) { fputs("sync\n", f); fclose(f); } }
    const char *flag = getenv("WAL_SYNC_FAIL");
    if (flag && access(flag, F_OK) == 0) { errno = EIO; return -1; }
    return 0;
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    if (hook(fd)) return -1;
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    if (hook(fd)) return -1;
    return real(fd);
}
