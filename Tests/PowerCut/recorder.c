// The power-cut recorder: an LD_PRELOAD library that logs every call a process makes that
// changes files under one directory, with the bytes it writes, for the state builder
// (powercut.py; docs/power-cut.md says why and what the log holds).
//
//     POWER_CUT_ROOT=/abs/store POWER_CUT_LOG=/abs/log LD_PRELOAD=recorder.so archive-sync ...
//
// Each record is one line, `OP FIELD...\n`, paths hex-encoded and relative to the root, and a
// write's bytes follow its line. One append(2)-mode write(2) per record, under a lock held
// across the real call and its record, so that the log's order is the order in which the
// calls returned, for every thread and process (child processes inherit the environment): a
// mutex for this process's threads and an flock(2) of the log for other processes. Without
// the second, a process could see another's rename and record what it did about it before
// the rename's own record, and the state builder would keep the first without the second.
// SQLite calls libc through its table of system calls, which the dynamic linker resolves to
// these functions as it does every other caller's.
#include "recorder.h"

struct tracked fds[MAX_FDS];
static pthread_mutex_t lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static char root[PATH_MAX];
static size_t root_length;
int log_fd = -1;
int record_delay_us;
static int ready;

// SIGUSR2 ends the process at its next recorded call's end, never between a call and its
// record (as SIGKILL could): the simulator stops a workload that runs until stopped with it,
// and then the log holds every change the disk does.
static __thread int depth;
static volatile sig_atomic_t stop_requested;

// How many of this process's held entries also hold the log's flock (under `lock`).
static int across;

void enter_local(void) {
    pthread_mutex_lock(&lock);
    depth++;
}

void enter(void) {
    enter_local();
    if (log_fd >= 0 && across++ == 0) {
        while (flock(log_fd, LOCK_EX) != 0 && errno == EINTR) {
        }
    }
}

void leave(void) {
    if (log_fd >= 0 && --across == 0) flock(log_fd, LOCK_UN);
    leave_local();
}

void leave_local(void) {
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

DECLARE(int, openat, int, const char *, int, ...)
DECLARE(ssize_t, write, int, const void *, size_t)

void setup(void) {
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
        const char *delay = getenv("POWER_CUT_RECORD_DELAY_MS");
        record_delay_us = delay ? atoi(delay) * 1000 : 0;
    }
    ready = 1;
}

/// Appends one record: its line, then `data` (a write's bytes). Aborts on a short write: a log
/// that misses a call would build states the disk could never be in.
void emit(const char *line, const struct iovec *data, int count) {
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
int resolve(int dirfd, const char *name, char *out) {
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
int relative_hex(const char *path, char *out) {
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
int is_tracked(int fd) {
    if (fd < 0 || fd >= MAX_FDS || !fds[fd].used) return 0;
    struct stat info;
    if (fstat(fd, &info) != 0 || info.st_dev != fds[fd].dev || info.st_ino != fds[fd].ino) {
        fds[fd].used = 0;
        return 0;
    }
    return 1;
}

/// Records a descriptor just opened: tracked when under the root, forgotten otherwise.
void opened(int fd, int dirfd, const char *name, int flags, int existed) {
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

int exists(int dirfd, const char *name) {
    struct stat info;
    return fstatat(dirfd, name, &info, AT_SYMLINK_NOFOLLOW) == 0;
}
