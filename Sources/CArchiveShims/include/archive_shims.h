#ifndef ARCHIVE_SYNC_SHIMS_H
#define ARCHIVE_SYNC_SHIMS_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/// syncfs(2) needs _GNU_SOURCE, which Swift's Glibc module is not built with.
static inline int archive_syncfs(int fd) { return syncfs(fd); }

/// renameat2(2) with RENAME_NOREPLACE: fails with EEXIST, atomically, when `to` exists.
/// Fails with EINVAL on file systems that cannot do it.
static inline int archive_rename_noreplace(int fromfd, const char *from, int tofd, const char *to) {
    return renameat2(fromfd, from, tofd, to, RENAME_NOREPLACE);
}

/// renameat2(2) with RENAME_EXCHANGE: swaps `from` and `to`, atomically; both must exist.
/// Fails with EINVAL on file systems that cannot do it.
static inline int archive_rename_exchange(int fromfd, const char *from, int tofd, const char *to) {
    return renameat2(fromfd, from, tofd, to, RENAME_EXCHANGE);
}

/// openat2(2) with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS: opens `path` below `dirfd` in one
/// call, failing with ELOOP on any symlink along the way and EXDEV on any way out. Glibc has
/// no wrapper. Fails with ENOSYS on kernels before 5.6.
static inline int archive_open_beneath(int dirfd, const char *path, int flags, unsigned int mode) {
    struct open_how how = {0};
    how.flags = (unsigned long long)flags;
    how.mode = (flags & O_CREAT) ? mode : 0;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS;
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

/// The device, inode and type of `name` in `dirfd` (`AT_EMPTY_PATH` and "" for `dirfd`
/// itself), from statx(2) asking for no time. Where timestamps are multigrain (ext4, XFS,
/// btrfs and tmpfs since Linux 6.13), reading a file's ctime makes its next change take a
/// fine-grained time, which moves the clock every file's next write reads: the WAL's mtime
/// then changes at every commit, and on ext4 without a journal its `fdatasync` also writes
/// its inode's table block (docs/choices.md).
static inline int archive_identity(int dirfd, const char *name, int flags, unsigned long long *device, unsigned long long *inode, unsigned int *mode) {
    struct statx info;
    if (statx(dirfd, name, flags, STATX_TYPE | STATX_INO, &info) != 0) return -1;
    *device = (unsigned long long)makedev(info.stx_dev_major, info.stx_dev_minor);
    *inode = (unsigned long long)info.stx_ino;
    *mode = info.stx_mode;
    return 0;
}

/// Hands the heap's free pages back to the system: a long-running watcher calls it after a
/// full scan, whose tables glibc would otherwise keep (malloc_trim(3)).
static inline void archive_trim_heap(void) { malloc_trim(0); }

/// Caps glibc's malloc arenas: each thread that allocates (Dispatch's workers, in a scan's
/// parallel lanes) otherwise gets an arena of its own, which keeps its free pages (mallopt(3)).
static inline void archive_limit_heap_arenas(int count) { mallopt(M_ARENA_MAX, count); }

/// write(2) that cannot end the process: a write to a pipe whose reader is gone fails with
/// EPIPE instead of raising SIGPIPE, whose default action kills. A library may not ignore
/// SIGPIPE for the whole process (the host app owns signal dispositions), so the signal is
/// blocked for this thread during the call, and the one this write raised is taken back
/// (sigtimedwait) before the old mask returns. A SIGPIPE that was pending before is left alone.
static inline ssize_t archive_write_nosigpipe(int fd, const void *buffer, size_t count) {
    sigset_t pipe_only, old_mask, pending;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    sigemptyset(&pending);
    sigpending(&pending);
    int was_pending = sigismember(&pending, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, &old_mask);
    ssize_t written = write(fd, buffer, count);
    int saved = errno;
    // Not only a write that failed with EPIPE raises it: one the reader left midway raises it
    // too and returns the bytes it wrote (seen with a frame of megabytes into ssh, cut off).
    sigemptyset(&pending);
    sigpending(&pending);
    if (!was_pending && sigismember(&pending, SIGPIPE)) {
        const struct timespec now = {0, 0};
        while (sigtimedwait(&pipe_only, NULL, &now) < 0 && errno == EINTR) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    errno = saved;
    return written;
}

/// pipe2(2) with O_CLOEXEC: both ends close-on-exec from the start, so that a program that
/// another thread starts meanwhile cannot inherit them.
static inline int archive_pipe_cloexec(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

/// posix_spawn's file action that starts the child in `path` (glibc 2.29, _GNU_SOURCE).
/// `actions` is a posix_spawn_file_actions_t: spawn.h, included here, would define fd_set
/// apart from Swift's Glibc module (shims.c includes it).
int archive_spawn_addchdir(void *actions, const char *path);

/// posix_spawn's file action that closes every descriptor from `lowest` up in the child
/// (glibc 2.34, _GNU_SOURCE): one the parent opened without close-on-exec reaches no child.
int archive_spawn_addclosefrom(void *actions, int lowest);

/// The CPU the calling thread runs on (sched_getcpu(3): glibc reads it from the kernel's
/// restartable-sequences area, without a system call); -1 when unknown.
static inline int archive_current_cpu(void) { return sched_getcpu(); }

/// The thread sanitizer's annotations (compiler-rt's sanitizer/tsan_interface.h): `addr` is
/// released by one thread and acquired by the next, as a lock is. Weak: they exist only in a
/// binary built with --sanitize=thread; in any other they are null, and skipped.
extern void __tsan_acquire(void *addr) __attribute__((weak));
extern void __tsan_release(void *addr) __attribute__((weak));
static inline void archive_tsan_acquire(void *addr) {
    if (__tsan_acquire) __tsan_acquire(addr);
}
static inline void archive_tsan_release(void *addr) {
    if (__tsan_release) __tsan_release(addr);
}
#endif
