// Write faults for the power-cut simulator (docs/power-cut.md): an LD_PRELOAD library that
// makes the Nth call changing a file under one directory fail, as a full disk or a failing
// one would, without making it. Preloaded before the recorder (recorder*.c), so that the
// recorder sees only the calls that were made.
//
//     POWER_CUT_ROOT=/abs/store POWER_CUT_FAULT=ENOSPC:17[:sticky] POWER_CUT_FAULT_COUNTER=/abs/file
//
// The counted calls: write, pwrite, writev, pwritev, ftruncate, fallocate,
// fsync, fdatasync, syncfs, rename (renameat, renameat2), mkdir, and an open or openat2 that
// creates a file. ENOSPC, EIO or EROFS fails the Nth; `sticky` fails every one from the Nth
// on (a disk that stays full), and when the Nth is a write, half of it lands first
// (as a disk filling up mid-write does). KILL ends the process at the Nth instead (a crash at
// a chosen call, for workloads that need a store left to recover). The counter is a file of
// eight bytes, mapped shared and incremented atomically, so the Nth call is counted across a
// command's processes and threads; POWER_CUT_FAULT=COUNT only counts. A fault that fired
// appends the call and its path to POWER_CUT_FAULT_COUNTER.fired.
//
// Unlinks are not counted: removing frees space, and the store's undo of a failed write
// removes what it made.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include <linux/openat2.h>

#pragma GCC visibility push(hidden)

static char root[PATH_MAX];
static size_t root_length;
static long fault_at;     // 0: count only
static int fault_errno;   // 0: kill
static int sticky;
static int blocks_only;
static int inodes_only;
static volatile uint64_t *counter;
static char fired_path[PATH_MAX + 8];
static int ready;

#define REAL(ret, name, ...)                                                                       \
    static ret (*real_##name)(__VA_ARGS__);                                                        \
    static void load_##name(void) {                                                               \
        if (!real_##name) real_##name = dlsym(RTLD_NEXT, #name);                                   \
    }

REAL(int, openat, int, const char *, int, ...)
REAL(ssize_t, write, int, const void *, size_t)
REAL(ssize_t, pwrite, int, const void *, size_t, off_t)
REAL(ssize_t, pwrite64, int, const void *, size_t, off_t)
REAL(ssize_t, writev, int, const struct iovec *, int)
REAL(ssize_t, pwritev, int, const struct iovec *, int, off_t)
REAL(ssize_t, pwritev64, int, const struct iovec *, int, off_t)
REAL(ssize_t, pwritev2, int, const struct iovec *, int, off_t, int)
REAL(int, ftruncate, int, off_t)
REAL(int, ftruncate64, int, off_t)
REAL(int, fallocate, int, int, off_t, off_t)
REAL(int, fallocate64, int, int, off_t, off_t)
REAL(int, posix_fallocate, int, off_t, off_t)
REAL(int, fsync, int)
REAL(int, fdatasync, int)
REAL(int, syncfs, int)
REAL(int, rename, const char *, const char *)
REAL(int, renameat, int, const char *, int, const char *)
REAL(int, renameat2, int, const char *, int, const char *, unsigned int)
REAL(int, mkdir, const char *, mode_t)
REAL(int, mkdirat, int, const char *, mode_t)
REAL(long, syscall, long, ...)

static void setup(void) {
    if (ready) return;
    ready = 1;
    const char *r = getenv("POWER_CUT_ROOT");
    const char *f = getenv("POWER_CUT_FAULT");
    const char *c = getenv("POWER_CUT_FAULT_COUNTER");
    if (!r || !f || !c || strlen(r) >= PATH_MAX || strlen(c) >= PATH_MAX) return;
    strcpy(root, r);
    root_length = strlen(root);
    while (root_length > 1 && root[root_length - 1] == '/') root[--root_length] = 0;
    char kind[16] = {0};
    long at = 0;
    char mode[16] = {0};
    if (sscanf(f, "%15[A-Z]:%ld:%15s", kind, &at, mode) < 1) return;
    if (!strcmp(kind, "ENOSPC")) fault_errno = ENOSPC;
    else if (!strcmp(kind, "EIO")) fault_errno = EIO;
    else if (!strcmp(kind, "EROFS")) fault_errno = EROFS;
    else if (strcmp(kind, "KILL") && strcmp(kind, "COUNT")) return;
    fault_at = strcmp(kind, "COUNT") ? at : 0;
    blocks_only = !strcmp(mode, "full");
    inodes_only = !strcmp(mode, "no-inodes");
    sticky = !strcmp(mode, "sticky") || blocks_only || inodes_only;
    load_openat();
    int fd = real_openat(AT_FDCWD, c, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    load_ftruncate();
    struct stat info;
    if (fstat(fd, &info) != 0 || (info.st_size < 8 && real_ftruncate(fd, 8) != 0)) return;
    void *map = mmap(NULL, 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return;
    counter = map;
    snprintf(fired_path, sizeof fired_path, "%s.fired", c);
}

/// Whether `path` (absolute, or relative to `dirfd`) lies under the root. Not normalized:
/// the store names its files by absolute paths under the root, or relative to a directory
/// descriptor opened under it.
static int under_root(int dirfd, const char *name) {
    char path[PATH_MAX * 2];
    if (!name) return 0;
    if (name[0] == '/') {
        snprintf(path, sizeof path, "%s", name);
    } else {
        char link[64], base[PATH_MAX];
        if (dirfd == AT_FDCWD) {
            if (!getcwd(base, sizeof base)) return 0;
        } else {
            snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
            ssize_t n = readlink(link, base, sizeof base - 1);
            if (n < 0) return 0;
            base[n] = 0;
        }
        snprintf(path, sizeof path, "%s/%s", base, name);
    }
    return !strncmp(path, root, root_length) && (path[root_length] == '/' || path[root_length] == 0);
}

static int fd_under_root(int fd) {
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n < 0) return 0;
    path[n] = 0;
    return !strncmp(path, root, root_length) && (path[root_length] == '/' || path[root_length] == 0);
}

/// Counts a call under the root; returns the errno it must fail with (0: make it), or ends
/// the process for KILL. A write's `count` (NULL for other calls) is halved instead at a
/// sticky fault's first call: half of it lands, then the disk is full.
static int fault_write(const char *call, int dirfd, const char *name, int fd, size_t *count) {
    setup();
    if (!counter) return 0;
    if (fd >= 0 ? !fd_under_root(fd) : !under_root(dirfd, name)) return 0;
    uint64_t n = __atomic_add_fetch(counter, 1, __ATOMIC_SEQ_CST);
    if (fault_at == 0 || (long)n < fault_at || ((long)n > fault_at && !sticky)) return 0;
    // A disk out of blocks (not of inodes): empty files are made, renamed and flushed.
    if (blocks_only && !count && strcmp(call, "fallocate") && strcmp(call, "mkdir") && strcmp(call, "pwritev") && strcmp(call, "writev")) return 0;
    // A disk out of inodes: nothing new can be named, what exists can be written.
    if (inodes_only && strcmp(call, "create") && strcmp(call, "mkdir")) return 0;
    int short_write = sticky && fault_errno && (long)n == fault_at && count && *count >= 2;
    char path[PATH_MAX];
    if (fd >= 0) {
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t length = readlink(link, path, sizeof path - 1);
        path[length < 0 ? 0 : length] = 0;
    } else {
        snprintf(path, sizeof path, "%s", name);
    }
    char line[PATH_MAX + 128];
    int length = snprintf(line, sizeof line, "%lu %s%s %s\n", (unsigned long)n, call, short_write ? " (short)" : "", path);
    load_openat();
    load_write();
    int out = real_openat(AT_FDCWD, fired_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (out >= 0) {
        if (real_write(out, line, (size_t)length) < 0) {
        }
        close(out);
    }
    if (fault_errno == 0) _exit(137);
    if (short_write) {
        *count /= 2;
        return 0;
    }
    return fault_errno;
}

static int fault(const char *call, int dirfd, const char *name, int fd) {
    return fault_write(call, dirfd, name, fd, NULL);
}

#define FAIL_WITH(value, call, dirfd, name, fd)                                                    \
    do {                                                                                           \
        int failure = fault(call, dirfd, name, fd);                                                \
        if (failure) {                                                                             \
            errno = failure;                                                                       \
            return value;                                                                          \
        }                                                                                          \
    } while (0)

#define FAIL_WRITE(fd, count)                                                                      \
    do {                                                                                           \
        int failure = fault_write(__func__, -1, NULL, fd, &count);                                 \
        if (failure) {                                                                             \
            errno = failure;                                                                       \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

static int creates(int dirfd, const char *name, int flags) {
    struct stat info;
    return (flags & O_CREAT) && fstatat(dirfd, name, &info, AT_SYMLINK_NOFOLLOW) != 0;
}

static int do_open(int dirfd, const char *name, int flags, mode_t mode) {
    load_openat();
    if (creates(dirfd, name, flags)) FAIL_WITH(-1, "create", dirfd, name, -1);
    return real_openat(dirfd, name, flags, mode);
}

#pragma GCC visibility pop

#include "preload_opens.h"

ssize_t write(int fd, const void *buffer, size_t count) {
    load_write();
    if (fd > 2) FAIL_WRITE(fd, count);
    return real_write(fd, buffer, count);
}
ssize_t pwrite(int fd, const void *buffer, size_t count, off_t offset) {
    load_pwrite();
    FAIL_WRITE(fd, count);
    return real_pwrite(fd, buffer, count, offset);
}
ssize_t pwrite64(int fd, const void *buffer, size_t count, off_t offset) {
    load_pwrite64();
    FAIL_WRITE(fd, count);
    return real_pwrite64(fd, buffer, count, offset);
}
ssize_t writev(int fd, const struct iovec *iov, int count) {
    load_writev();
    FAIL_WITH(-1, "writev", -1, NULL, fd);
    return real_writev(fd, iov, count);
}
ssize_t pwritev(int fd, const struct iovec *iov, int count, off_t offset) {
    load_pwritev();
    FAIL_WITH(-1, "pwritev", -1, NULL, fd);
    return real_pwritev(fd, iov, count, offset);
}
ssize_t pwritev64(int fd, const struct iovec *iov, int count, off_t offset) {
    load_pwritev64();
    FAIL_WITH(-1, "pwritev", -1, NULL, fd);
    return real_pwritev64(fd, iov, count, offset);
}
ssize_t pwritev2(int fd, const struct iovec *iov, int count, off_t offset, int flags) {
    load_pwritev2();
    FAIL_WITH(-1, "pwritev", -1, NULL, fd);
    return real_pwritev2(fd, iov, count, offset, flags);
}
int ftruncate(int fd, off_t length) {
    load_ftruncate();
    FAIL_WITH(-1, "ftruncate", -1, NULL, fd);
    return real_ftruncate(fd, length);
}
int ftruncate64(int fd, off_t length) {
    load_ftruncate64();
    FAIL_WITH(-1, "ftruncate", -1, NULL, fd);
    return real_ftruncate64(fd, length);
}
int fallocate(int fd, int mode, off_t offset, off_t length) {
    load_fallocate();
    FAIL_WITH(-1, "fallocate", -1, NULL, fd);
    return real_fallocate(fd, mode, offset, length);
}
int fallocate64(int fd, int mode, off_t offset, off_t length) {
    load_fallocate64();
    FAIL_WITH(-1, "fallocate", -1, NULL, fd);
    return real_fallocate64(fd, mode, offset, length);
}
int posix_fallocate(int fd, off_t offset, off_t length) {
    load_posix_fallocate();
    int failure = fault("fallocate", -1, NULL, fd);
    if (failure) return failure;  // posix_fallocate returns the error, not -1
    return real_posix_fallocate(fd, offset, length);
}
int fsync(int fd) {
    load_fsync();
    FAIL_WITH(-1, "fsync", -1, NULL, fd);
    return real_fsync(fd);
}
int fdatasync(int fd) {
    load_fdatasync();
    FAIL_WITH(-1, "fdatasync", -1, NULL, fd);
    return real_fdatasync(fd);
}
int syncfs(int fd) {
    load_syncfs();
    FAIL_WITH(-1, "syncfs", -1, NULL, fd);
    return real_syncfs(fd);
}
int rename(const char *from, const char *to) {
    load_rename();
    FAIL_WITH(-1, "rename", AT_FDCWD, to, -1);
    return real_rename(from, to);
}
int renameat(int fromfd, const char *from, int tofd, const char *to) {
    load_renameat();
    FAIL_WITH(-1, "rename", tofd, to, -1);
    return real_renameat(fromfd, from, tofd, to);
}
int renameat2(int fromfd, const char *from, int tofd, const char *to, unsigned int flags) {
    load_renameat2();
    FAIL_WITH(-1, "rename", tofd, to, -1);
    return real_renameat2(fromfd, from, tofd, to, flags);
}
int mkdir(const char *name, mode_t mode) {
    load_mkdir();
    FAIL_WITH(-1, "mkdir", AT_FDCWD, name, -1);
    return real_mkdir(name, mode);
}
int mkdirat(int dirfd, const char *name, mode_t mode) {
    load_mkdirat();
    FAIL_WITH(-1, "mkdir", dirfd, name, -1);
    return real_mkdirat(dirfd, name, mode);
}

// The store opens files with openat2(2), which glibc has no wrapper for: through syscall(2).
long syscall(long number, ...) {
    va_list args;
    va_start(args, number);
    long a[6];
    for (int i = 0; i < 6; i++) a[i] = va_arg(args, long);
    va_end(args);
    load_syscall();
    if (number == SYS_openat2) {
        const struct open_how *how = (const struct open_how *)a[2];
        if (creates((int)a[0], (const char *)a[1], (int)how->flags)) FAIL_WITH(-1, "create", (int)a[0], (const char *)a[1], -1);
    }
    return real_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
