// The power-cut recorder: an LD_PRELOAD library that logs every call a process makes that
// changes files under one directory, with the bytes it writes, for the state builder
// (powercut.py; docs/power-cut.md says why and what the log holds).
//
//     POWER_CUT_ROOT=/abs/store POWER_CUT_LOG=/abs/log LD_PRELOAD=recorder.so archive-sync ...
//
// Each record is one line, `OP FIELD...\n`, paths hex-encoded and relative to the root, and a
// write's bytes follow its line. One append(2)-mode write(2) per record, under a lock held
// across the real call and its record, so that the log's order is the order in which the
// calls returned, for every thread and process (child processes inherit the environment).
// SQLite calls libc through its table of system calls, which the dynamic linker resolves to
// these functions as it does every other caller's.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include <linux/openat2.h>

#define MAX_FDS 65536

struct tracked {
    int used;
    dev_t dev;
    ino_t ino;
};

static struct tracked fds[MAX_FDS];
static pthread_mutex_t lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static char root[PATH_MAX];
static size_t root_length;
static int log_fd = -1;
static int ready;

// SIGUSR2 ends the process at its next recorded call's end, never between a call and its
// record (as SIGKILL could): the simulator stops a workload that runs until stopped with it,
// and then the log holds every change the disk does.
static __thread int depth;
static volatile sig_atomic_t stop_requested;

static void enter(void) {
    pthread_mutex_lock(&lock);
    depth++;
}

static void leave(void) {
    depth--;
    pthread_mutex_unlock(&lock);
    if (stop_requested && depth == 0) {
        pthread_mutex_lock(&lock);
        _exit(0);
    }
}

// Only sets the flag: taking the lock here could wait for a thread that waits for a lock the
// interrupted code holds (malloc's). The process makes recorded calls until stopped.
static void on_stop(int signal) {
    (void)signal;
    stop_requested = 1;
}

// A process inherits its signal mask from the thread that started it, and a test runner's
// threads may block SIGUSR2: unblocked, or the stop would wait forever.
__attribute__((constructor)) static void install_stop_handler(void) {
    if (!getenv("POWER_CUT_ROOT")) return;
    signal(SIGUSR2, on_stop);
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGUSR2);
    sigprocmask(SIG_UNBLOCK, &stop, NULL);
}

#define REAL(name) real_##name
#define DECLARE(ret, name, ...)                                                                    \
    static ret (*real_##name)(__VA_ARGS__);                                                        \
    static void load_##name(void) {                                                                \
        if (!real_##name) real_##name = dlsym(RTLD_NEXT, #name);                                   \
    }

DECLARE(int, openat, int, const char *, int, ...)
DECLARE(ssize_t, write, int, const void *, size_t)
DECLARE(ssize_t, pwrite, int, const void *, size_t, off_t)
DECLARE(ssize_t, pwrite64, int, const void *, size_t, off_t)
DECLARE(ssize_t, writev, int, const struct iovec *, int)
DECLARE(ssize_t, pwritev, int, const struct iovec *, int, off_t)
DECLARE(ssize_t, pwritev64, int, const struct iovec *, int, off_t)
DECLARE(ssize_t, pwritev2, int, const struct iovec *, int, off_t, int)
DECLARE(int, ftruncate, int, off_t)
DECLARE(int, ftruncate64, int, off_t)
DECLARE(int, truncate, const char *, off_t)
DECLARE(int, fallocate, int, int, off_t, off_t)
DECLARE(int, fallocate64, int, int, off_t, off_t)
DECLARE(int, posix_fallocate, int, off_t, off_t)
DECLARE(int, rename, const char *, const char *)
DECLARE(int, renameat, int, const char *, int, const char *)
DECLARE(int, renameat2, int, const char *, int, const char *, unsigned int)
DECLARE(int, unlink, const char *)
DECLARE(int, unlinkat, int, const char *, int)
DECLARE(int, rmdir, const char *)
DECLARE(int, mkdir, const char *, mode_t)
DECLARE(int, mkdirat, int, const char *, mode_t)
DECLARE(int, link, const char *, const char *)
DECLARE(int, linkat, int, const char *, int, const char *, int)
DECLARE(int, symlink, const char *, const char *)
DECLARE(int, symlinkat, const char *, int, const char *)
DECLARE(int, fsync, int)
DECLARE(int, fdatasync, int)
DECLARE(int, syncfs, int)
DECLARE(void, sync, void)
DECLARE(int, sync_file_range, int, off_t, off_t, unsigned int)
DECLARE(int, close, int)
DECLARE(int, dup, int)
DECLARE(int, dup2, int, int)
DECLARE(int, dup3, int, int, int)
DECLARE(long, syscall, long, ...)

static void setup(void) {
    if (ready) return;
    const char *r = getenv("POWER_CUT_ROOT");
    const char *l = getenv("POWER_CUT_LOG");
    load_openat();
    load_write();
    if (r && l && strlen(r) < PATH_MAX) {
        strcpy(root, r);
        root_length = strlen(root);
        while (root_length > 1 && root[root_length - 1] == '/') root[--root_length] = 0;
        log_fd = real_openat(AT_FDCWD, l, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    }
    ready = 1;
}

/// Appends one record: its line, then `data` (a write's bytes). Aborts on a short write: a log
/// that misses a call would build states the disk could never be in.
static void emit(const char *line, const struct iovec *data, int count) {
    size_t total = strlen(line);
    for (int i = 0; i < count; i++) total += data[i].iov_len;
    char *buffer = malloc(total ? total : 1);
    size_t at = strlen(line);
    memcpy(buffer, line, at);
    for (int i = 0; i < count; i++) {
        memcpy(buffer + at, data[i].iov_base, data[i].iov_len);
        at += data[i].iov_len;
    }
    size_t done = 0;
    while (done < total) {
        ssize_t n = real_write(log_fd, buffer + done, total - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) abort();
        done += (size_t)n;
    }
    free(buffer);
}

/// Normalizes an absolute path in place: no `.`, `..`, `//` or trailing `/`.
static void normalize(char *path) {
    char out[PATH_MAX * 2];
    size_t n = 0;
    const char *p = path;
    while (*p) {
        while (*p == '/') p++;
        if (!*p) break;
        const char *end = strchr(p, '/');
        size_t length = end ? (size_t)(end - p) : strlen(p);
        if (length == 1 && p[0] == '.') {
        } else if (length == 2 && p[0] == '.' && p[1] == '.') {
            while (n > 0 && out[n - 1] != '/') n--;
            if (n > 0) n--;
        } else {
            out[n++] = '/';
            memcpy(out + n, p, length);
            n += length;
        }
        p += length;
    }
    if (n == 0) out[n++] = '/';
    out[n] = 0;
    strcpy(path, out);
}

/// The absolute path `name` names relative to `dirfd` (not following a final symlink).
static int resolve(int dirfd, const char *name, char *out) {
    if (!name) return -1;
    if (name[0] == '/') {
        if (strlen(name) >= PATH_MAX) return -1;
        strcpy(out, name);
    } else {
        char base[PATH_MAX];
        if (dirfd == AT_FDCWD) {
            if (!getcwd(base, sizeof base)) return -1;
        } else {
            char link[64];
            snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
            ssize_t n = readlink(link, base, sizeof base - 1);
            if (n < 0) return -1;
            base[n] = 0;
        }
        if (strlen(base) + strlen(name) + 2 >= PATH_MAX) return -1;
        sprintf(out, "%s/%s", base, name);
    }
    normalize(out);
    return 0;
}

/// Writes `path` relative to the root, hex-encoded ("2e" for the root itself), into `out`;
/// 0 when it lies under the root.
static int relative_hex(const char *path, char *out) {
    if (log_fd < 0 || strncmp(path, root, root_length) != 0) return -1;
    const char *rest = path + root_length;
    if (*rest != 0 && *rest != '/') return -1;
    if (*rest == '/') rest++;
    if (*rest == 0) rest = ".";
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    for (const unsigned char *c = (const unsigned char *)rest; *c; c++) {
        out[n++] = hex[*c >> 4];
        out[n++] = hex[*c & 15];
    }
    out[n] = 0;
    return 0;
}

/// True when `fd` is a descriptor opened under the root and still the same file.
static int is_tracked(int fd) {
    if (fd < 0 || fd >= MAX_FDS || !fds[fd].used) return 0;
    struct stat info;
    if (fstat(fd, &info) != 0 || info.st_dev != fds[fd].dev || info.st_ino != fds[fd].ino) {
        fds[fd].used = 0;
        return 0;
    }
    return 1;
}

/// Records a descriptor just opened: tracked when under the root, forgotten otherwise.
static void opened(int fd, int dirfd, const char *name, int flags, int existed) {
    if (fd < 0 || fd >= MAX_FDS) return;
    fds[fd].used = 0;
    char path[PATH_MAX * 2], hex[PATH_MAX * 4];
    if (resolve(dirfd, name, path) != 0 || relative_hex(path, hex) != 0) return;
    struct stat info;
    if (fstat(fd, &info) != 0) return;
    fds[fd] = (struct tracked){1, info.st_dev, info.st_ino};
    char line[PATH_MAX * 4 + 128];
    if ((flags & O_CREAT) && !existed) {
        snprintf(line, sizeof line, "C %lu %s\n", (unsigned long)info.st_ino, hex);
        emit(line, NULL, 0);
    } else if ((flags & O_TRUNC) && S_ISREG(info.st_mode)) {
        snprintf(line, sizeof line, "T %lu 0\n", (unsigned long)info.st_ino);
        emit(line, NULL, 0);
    }
}

static int exists(int dirfd, const char *name) {
    struct stat info;
    return fstatat(dirfd, name, &info, AT_SYMLINK_NOFOLLOW) == 0;
}

static int do_open(int dirfd, const char *name, int flags, mode_t mode) {
    setup();
    load_openat();
    enter();
    int existed = (flags & O_CREAT) && !(flags & O_EXCL) ? exists(dirfd, name) : 0;
    int fd = real_openat(dirfd, name, flags, mode);
    int saved = errno;
    if (fd >= 0) opened(fd, dirfd, name, flags, existed);
    leave();
    errno = saved;
    return fd;
}

#define MODE_ARG(flags)                                                                            \
    mode_t mode = 0;                                                                               \
    if ((flags) & (O_CREAT | __O_TMPFILE)) {                                                       \
        va_list args;                                                                              \
        va_start(args, flags);                                                                     \
        mode = va_arg(args, mode_t);                                                               \
        va_end(args);                                                                              \
    }

int open(const char *name, int flags, ...) {
    MODE_ARG(flags);
    return do_open(AT_FDCWD, name, flags, mode);
}
int open64(const char *name, int flags, ...) {
    MODE_ARG(flags);
    return do_open(AT_FDCWD, name, flags, mode);
}
int openat(int dirfd, const char *name, int flags, ...) {
    MODE_ARG(flags);
    return do_open(dirfd, name, flags, mode);
}
int openat64(int dirfd, const char *name, int flags, ...) {
    MODE_ARG(flags);
    return do_open(dirfd, name, flags, mode);
}
int __open_2(const char *name, int flags) { return do_open(AT_FDCWD, name, flags, 0); }
int __open64_2(const char *name, int flags) { return do_open(AT_FDCWD, name, flags, 0); }
int __openat_2(int dirfd, const char *name, int flags) { return do_open(dirfd, name, flags, 0); }
int __openat64_2(int dirfd, const char *name, int flags) { return do_open(dirfd, name, flags, 0); }
int creat(const char *name, mode_t mode) { return do_open(AT_FDCWD, name, O_CREAT | O_WRONLY | O_TRUNC, mode); }
int creat64(const char *name, mode_t mode) { return do_open(AT_FDCWD, name, O_CREAT | O_WRONLY | O_TRUNC, mode); }

/// Runs `call` under the lock; when it wrote `result` bytes at `offset` (-1: the file's offset
/// after the call, less what it wrote) to a tracked descriptor, records them.
#define WRITE_BODY(fd, call, iov, count, offset_expr)                                              \
    setup();                                                                                       \
    enter();                                                                     \
    ssize_t result = call;                                                                         \
    int saved = errno;                                                                             \
    if (result > 0 && is_tracked(fd)) record_write(fd, iov, count, result, offset_expr);          \
    leave();                                                                   \
    errno = saved;                                                                                 \
    return result;

static void record_write(int fd, const struct iovec *iov, int count, ssize_t written, off_t offset) {
    if (offset < 0) offset = lseek(fd, 0, SEEK_CUR) - written;
    struct iovec parts[1024];
    int used = 0;
    size_t left = (size_t)written;
    for (int i = 0; i < count && left > 0 && used < 1024; i++) {
        size_t length = iov[i].iov_len < left ? iov[i].iov_len : left;
        parts[used++] = (struct iovec){iov[i].iov_base, length};
        left -= length;
    }
    char line[128];
    snprintf(line, sizeof line, "W %lu %lld %zd\n", (unsigned long)fds[fd].ino, (long long)offset, written);
    emit(line, parts, used);
}

ssize_t write(int fd, const void *buffer, size_t count) {
    load_write();
    if (fd < 0 || fd >= MAX_FDS || !fds[fd].used) return real_write(fd, buffer, count);
    struct iovec one = {(void *)buffer, count};
    WRITE_BODY(fd, real_write(fd, buffer, count), &one, 1, (off_t)-1)
}
ssize_t pwrite(int fd, const void *buffer, size_t count, off_t offset) {
    load_pwrite();
    struct iovec one = {(void *)buffer, count};
    WRITE_BODY(fd, real_pwrite(fd, buffer, count, offset), &one, 1, offset)
}
ssize_t pwrite64(int fd, const void *buffer, size_t count, off_t offset) {
    load_pwrite64();
    struct iovec one = {(void *)buffer, count};
    WRITE_BODY(fd, real_pwrite64(fd, buffer, count, offset), &one, 1, offset)
}
ssize_t writev(int fd, const struct iovec *iov, int count) {
    load_writev();
    WRITE_BODY(fd, real_writev(fd, iov, count), iov, count, (off_t)-1)
}
ssize_t pwritev(int fd, const struct iovec *iov, int count, off_t offset) {
    load_pwritev();
    WRITE_BODY(fd, real_pwritev(fd, iov, count, offset), iov, count, offset)
}
ssize_t pwritev64(int fd, const struct iovec *iov, int count, off_t offset) {
    load_pwritev64();
    WRITE_BODY(fd, real_pwritev64(fd, iov, count, offset), iov, count, offset)
}
ssize_t pwritev2(int fd, const struct iovec *iov, int count, off_t offset, int flags) {
    load_pwritev2();
    WRITE_BODY(fd, real_pwritev2(fd, iov, count, offset, flags), iov, count, offset)
}

/// Runs `call` under the lock and, when it succeeded on a tracked descriptor, records `line`
/// made by `format` from the descriptor's inode and `args`.
#define FD_BODY(fd, call, format, ...)                                                             \
    setup();                                                                                       \
    enter();                                                                     \
    int result = call;                                                                             \
    int saved = errno;                                                                             \
    if (result == 0 && is_tracked(fd)) {                                                           \
        char line[128];                                                                            \
        snprintf(line, sizeof line, format, (unsigned long)fds[fd].ino, __VA_ARGS__);              \
        emit(line, NULL, 0);                                                                       \
    }                                                                                              \
    leave();                                                                   \
    errno = saved;                                                                                 \
    return result;

int ftruncate(int fd, off_t length) {
    load_ftruncate();
    FD_BODY(fd, real_ftruncate(fd, length), "T %lu %lld\n", (long long)length)
}
int ftruncate64(int fd, off_t length) {
    load_ftruncate64();
    FD_BODY(fd, real_ftruncate64(fd, length), "T %lu %lld\n", (long long)length)
}
int fallocate(int fd, int mode, off_t offset, off_t length) {
    load_fallocate();
    FD_BODY(fd, real_fallocate(fd, mode, offset, length), "A %lu %d %lld %lld\n", mode, (long long)offset, (long long)length)
}
int fallocate64(int fd, int mode, off_t offset, off_t length) {
    load_fallocate64();
    FD_BODY(fd, real_fallocate64(fd, mode, offset, length), "A %lu %d %lld %lld\n", mode, (long long)offset, (long long)length)
}
int posix_fallocate(int fd, off_t offset, off_t length) {
    load_posix_fallocate();
    FD_BODY(fd, real_posix_fallocate(fd, offset, length), "A %lu %d %lld %lld\n", 0, (long long)offset, (long long)length)
}
int fsync(int fd) {
    load_fsync();
    FD_BODY(fd, real_fsync(fd), "S %lu%s\n", "")
}
int fdatasync(int fd) {
    load_fdatasync();
    FD_BODY(fd, real_fdatasync(fd), "S %lu%s\n", "")
}
// sync_file_range(2) promises nothing after a power cut (no metadata, no disk cache flush):
// recorded so the log shows it, and the state builder gives it no effect.
int sync_file_range(int fd, off_t offset, off_t length, unsigned int flags) {
    load_sync_file_range();
    FD_BODY(fd, real_sync_file_range(fd, offset, length, flags), "Q %lu %lld\n", (long long)offset)
}

int syncfs(int fd) {
    setup();
    load_syncfs();
    enter();
    int result = real_syncfs(fd);
    int saved = errno;
    if (result == 0 && log_fd >= 0) emit("F\n", NULL, 0);
    leave();
    errno = saved;
    return result;
}
void sync(void) {
    setup();
    load_sync();
    enter();
    real_sync();
    if (log_fd >= 0) emit("F\n", NULL, 0);
    leave();
}

int truncate(const char *name, off_t length) {
    setup();
    load_truncate();
    enter();
    int result = real_truncate(name, length);
    int saved = errno;
    char path[PATH_MAX * 2], hex[PATH_MAX * 4];
    struct stat info;
    if (result == 0 && resolve(AT_FDCWD, name, path) == 0 && relative_hex(path, hex) == 0 && stat(path, &info) == 0) {
        char line[128];
        snprintf(line, sizeof line, "T %lu %lld\n", (unsigned long)info.st_ino, (long long)length);
        emit(line, NULL, 0);
    }
    leave();
    errno = saved;
    return result;
}

/// Records a change of the namespace under the root: `OP PATH [PATH2] [INODE]`. A change
/// that crosses the root's edge (a rename in from outside, a link) is recorded as `X`, which
/// the state builder refuses: it cannot model it.
static void namespace_op(const char *op, int dirfd, const char *name, int dirfd2, const char *name2) {
    char path[PATH_MAX * 2], hex[PATH_MAX * 4], path2[PATH_MAX * 2], hex2[PATH_MAX * 4];
    if (resolve(dirfd, name, path) != 0) return;
    int inside = relative_hex(path, hex) == 0;
    char line[PATH_MAX * 8 + 64];
    if (name2) {
        if (resolve(dirfd2, name2, path2) != 0) return;
        int inside2 = relative_hex(path2, hex2) == 0;
        if (!inside && !inside2) return;
        if (inside != inside2) {
            snprintf(line, sizeof line, "X %s %s %s\n", op, inside ? hex : "-", inside2 ? hex2 : "-");
        } else {
            snprintf(line, sizeof line, "%s %s %s\n", op, hex, hex2);
        }
    } else {
        if (!inside) return;
        if (op[0] == 'D') {
            struct stat info;
            if (stat(path, &info) != 0) return;
            snprintf(line, sizeof line, "D %lu %s\n", (unsigned long)info.st_ino, hex);
        } else {
            snprintf(line, sizeof line, "%s %s\n", op, hex);
        }
    }
    emit(line, NULL, 0);
}

#define NAMESPACE_BODY(call, op, dirfd, name, dirfd2, name2)                                       \
    setup();                                                                                       \
    enter();                                                                     \
    int result = call;                                                                             \
    int saved = errno;                                                                             \
    if (result == 0 && log_fd >= 0) namespace_op(op, dirfd, name, dirfd2, name2);                  \
    leave();                                                                   \
    errno = saved;                                                                                 \
    return result;

int rename(const char *from, const char *to) {
    load_rename();
    NAMESPACE_BODY(real_rename(from, to), "R", AT_FDCWD, from, AT_FDCWD, to)
}
int renameat(int fromfd, const char *from, int tofd, const char *to) {
    load_renameat();
    NAMESPACE_BODY(real_renameat(fromfd, from, tofd, to), "R", fromfd, from, tofd, to)
}
int renameat2(int fromfd, const char *from, int tofd, const char *to, unsigned int flags) {
    load_renameat2();
    // RENAME_EXCHANGE swaps two names: recorded as X, since no workload here uses it.
    NAMESPACE_BODY(real_renameat2(fromfd, from, tofd, to, flags), (flags & 2) ? "E" : "R", fromfd, from, tofd, to)
}
int unlink(const char *name) {
    load_unlink();
    NAMESPACE_BODY(real_unlink(name), "U", AT_FDCWD, name, 0, NULL)
}
int unlinkat(int dirfd, const char *name, int flags) {
    load_unlinkat();
    NAMESPACE_BODY(real_unlinkat(dirfd, name, flags), (flags & AT_REMOVEDIR) ? "U" : "U", dirfd, name, 0, NULL)
}
int rmdir(const char *name) {
    load_rmdir();
    NAMESPACE_BODY(real_rmdir(name), "U", AT_FDCWD, name, 0, NULL)
}
int mkdir(const char *name, mode_t mode) {
    load_mkdir();
    NAMESPACE_BODY(real_mkdir(name, mode), "D", AT_FDCWD, name, 0, NULL)
}
int mkdirat(int dirfd, const char *name, mode_t mode) {
    load_mkdirat();
    NAMESPACE_BODY(real_mkdirat(dirfd, name, mode), "D", dirfd, name, 0, NULL)
}
int link(const char *from, const char *to) {
    load_link();
    NAMESPACE_BODY(real_link(from, to), "L", AT_FDCWD, from, AT_FDCWD, to)
}
int linkat(int fromfd, const char *from, int tofd, const char *to, int flags) {
    load_linkat();
    NAMESPACE_BODY(real_linkat(fromfd, from, tofd, to, flags), "L", fromfd, from, tofd, to)
}
int symlink(const char *target, const char *name) {
    load_symlink();
    NAMESPACE_BODY(real_symlink(target, name), "Y", AT_FDCWD, name, 0, NULL)
}
int symlinkat(const char *target, int dirfd, const char *name) {
    load_symlinkat();
    NAMESPACE_BODY(real_symlinkat(target, dirfd, name), "Y", dirfd, name, 0, NULL)
}

int close(int fd) {
    load_close();
    if (fd >= 0 && fd < MAX_FDS && fds[fd].used) {
        enter();
        fds[fd].used = 0;
        int result = real_close(fd);
        int saved = errno;
        leave();
        errno = saved;
        return result;
    }
    return real_close(fd);
}

static int duplicated(int old, int fd) {
    if (fd >= 0 && fd < MAX_FDS) {
        fds[fd].used = 0;
        if (old >= 0 && old < MAX_FDS && fds[old].used) fds[fd] = fds[old];
    }
    return fd;
}
int dup(int old) {
    load_dup();
    enter();
    int fd = duplicated(old, real_dup(old));
    leave();
    return fd;
}
int dup2(int old, int fd) {
    load_dup2();
    enter();
    int result = duplicated(old, real_dup2(old, fd));
    leave();
    return result;
}
int dup3(int old, int fd, int flags) {
    load_dup3();
    enter();
    int result = duplicated(old, real_dup3(old, fd, flags));
    leave();
    return result;
}

// The store opens files with openat2(2), which glibc has no wrapper for: through syscall(2).
long syscall(long number, ...) {
    va_list args;
    va_start(args, number);
    long a[6];
    for (int i = 0; i < 6; i++) a[i] = va_arg(args, long);
    va_end(args);
    load_syscall();
    if (number != SYS_openat2) return real_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
    setup();
    const struct open_how *how = (const struct open_how *)a[2];
    int flags = (int)how->flags;
    enter();
    int existed = (flags & O_CREAT) && !(flags & O_EXCL) ? exists((int)a[0], (const char *)a[1]) : 0;
    long fd = real_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
    int saved = errno;
    if (fd >= 0) opened((int)fd, (int)a[0], (const char *)a[1], flags, existed);
    leave();
    errno = saved;
    return fd;
}
