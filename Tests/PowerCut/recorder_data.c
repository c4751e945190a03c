// The power-cut recorder's opens, writes, truncates and flushes (recorder.h).
#include "recorder.h"

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
DECLARE(int, fsync, int)
DECLARE(int, fdatasync, int)
DECLARE(int, syncfs, int)
DECLARE(void, sync, void)
DECLARE(int, sync_file_range, int, off_t, off_t, unsigned int)
DECLARE(long, syscall, long, ...)

static int do_open(int dirfd, const char *name, int flags, mode_t mode) {
    setup();
    load_openat();
    // Only an open that creates or truncates is recorded; any other may wait (a FIFO's).
    int changes = flags & (O_CREAT | O_TRUNC);
    changes ? enter() : enter_local();
    int existed = (flags & O_CREAT) && !(flags & O_EXCL) ? exists(dirfd, name) : 0;
    int fd = real_openat(dirfd, name, flags, mode);
    int saved = errno;
    if (fd >= 0) opened(fd, dirfd, name, flags, existed);
    changes ? leave() : leave_local();
    errno = saved;
    return fd;
}

#include "preload_opens.h"

/// Runs `call` under the lock; when it wrote `result` bytes at `offset` (-1: the file's offset
/// after the call, less what it wrote) to a tracked descriptor, records them.
#define WRITE_BODY(fd, call, iov, count, offset_expr)                                              \
    setup();                                                                                       \
    /* A write to anything but a tracked file (a pipe's may wait) holds this process's lock only. */ \
    int tracked = fd >= 0 && fd < MAX_FDS && fds[fd].used;                                         \
    tracked ? enter() : enter_local();                                                             \
    ssize_t result = call;                                                                         \
    int saved = errno;                                                                             \
    if (result > 0 && is_tracked(fd)) record_write(fd, iov, count, result, offset_expr);          \
    tracked ? leave() : leave_local();                                                             \
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
    int changes = flags & (O_CREAT | O_TRUNC);
    changes ? enter() : enter_local();
    int existed = (flags & O_CREAT) && !(flags & O_EXCL) ? exists((int)a[0], (const char *)a[1]) : 0;
    long fd = real_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
    int saved = errno;
    if (fd >= 0) opened((int)fd, (int)a[0], (const char *)a[1], flags, existed);
    changes ? leave() : leave_local();
    errno = saved;
    return fd;
}
