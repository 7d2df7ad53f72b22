#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* Preloaded (LD_PRELOAD) into a test's subprocess (tests/wal_sync.py): each fsync or
 * fdatasync of a file whose name ends in "-wal" (SQLite's write-ahead log) is written as
 * a line "sync" to the file $WAL_SYNC_LOG and, while the file $WAL_SYNC_FAIL exists,
 * fails with EIO (as a failing disk does) instead of syncing (if it holds the word "once",
 * it is removed at that failure: one sync fails). A sync of the database file
 * itself (a name ending in ".db": what a checkpoint syncs) is a line "dbsync", failed with
 * EIO while the file $WAL_SYNC_FAIL_DB exists. While the file $WAL_SYNC_FULL exists, a
 * write (pwrite64) to either file that would end past the byte offset written in it (a
 * decimal number; empty: 0) fails with ENOSPC, as on a full disk, and is a line "full".
 * While the file $WAL_SYNC_KILL exists, holding a number k, the process kills itself
 * (SIGKILL) at its k-th write to the WAL since the file appeared (k = 0: at the WAL's
 * next sync instead). Other files sync and write as usual. */
static int path_of(int fd, char *path) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, PATH_MAX - 1);
    if (n < 0) return 0;
    path[n] = 0;
    return (int)n;
}

static int ends(const char *path, int n, const char *suffix) {
    int k = (int)strlen(suffix);
    return n >= k && strcmp(path + n - k, suffix) == 0;
}

/* 1: the WAL, 2: the database file, 0: anything else. */
static int kind(int fd) {
    char path[PATH_MAX];
    int n = path_of(fd, path);
    if (ends(path, n, "-wal")) return 1;
    if (ends(path, n, ".db")) return 2;
    return 0;
}

static void note(const char *line) {
    const char *log = getenv("WAL_SYNC_LOG");
    if (log) { FILE *f = fopen(log, "a"); if (f) { fputs(line, f); fclose(f); } }
}

static int exists(const char *name) {
    const char *flag = getenv(name);
    return flag && access(flag, F_OK) == 0;
}

static int fail_wal(void) {
    const char *flag = getenv("WAL_SYNC_FAIL");
    if (!flag || access(flag, F_OK) != 0) return 0;
    char word[8] = {0};
    FILE *f = fopen(flag, "r");
    if (f) {
        if (!fgets(word, sizeof word, f)) word[0] = 0;
        fclose(f);
    }
    if (strncmp(word, "once", 4) == 0) unlink(flag);
    return 1;
}

static long long kill_at(void) {
    long long k = -1;
    const char *flag = getenv("WAL_SYNC_KILL");
    FILE *f = flag ? fopen(flag, "r") : NULL;
    if (f) { if (fscanf(f, "%lld", &k) != 1) k = 0; fclose(f); }
    return k;
}

static int hook(int fd) {
    int k = kind(fd);
    if (k == 1) {
        note("sync\n");
        if (kill_at() == 0) raise(SIGKILL);
        if (fail_wal()) { errno = EIO; return -1; }
    } else if (k == 2) {
        note("dbsync\n");
        if (exists("WAL_SYNC_FAIL_DB")) { errno = EIO; return -1; }
    }
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

/* Whether a write of n bytes at offset to fd is refused as on a full disk (or the
 * process is killed before it: $WAL_SYNC_KILL). */
static int full(int fd, size_t n, off_t offset) {
    static long long writes = 0;
    long long k = kill_at();
    if (k < 0) writes = 0;
    else if (kind(fd) == 1 && ++writes == k) raise(SIGKILL);
    if (!exists("WAL_SYNC_FULL") || kind(fd) == 0) return 0;
    long long limit = 0;
    FILE *f = fopen(getenv("WAL_SYNC_FULL"), "r");
    if (f) { if (fscanf(f, "%lld", &limit) != 1) limit = 0; fclose(f); }
    if ((long long)offset + (long long)n <= limit) return 0;
    note("full\n");
    return 1;
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t offset) {
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (!real) real = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite64");
    if (full(fd, n, offset)) { errno = ENOSPC; return -1; }
    return real(fd, buf, n, offset);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t offset) {
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (!real) real = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    if (full(fd, n, offset)) { errno = ENOSPC; return -1; }
    return real(fd, buf, n, offset);
}
