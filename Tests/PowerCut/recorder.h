// The power-cut recorder's parts (recorder.c: the log, paths and descriptors;
// recorder_data.c: opens, writes and flushes; recorder_names.c: renames, unlinks, mkdirs and
// descriptor bookkeeping). One LD_PRELOAD library built from all three; what is shared between
// them is hidden, so that no name here interposes on the program's own.
#ifndef POWER_CUT_RECORDER_H
#define POWER_CUT_RECORDER_H
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
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include <linux/openat2.h>

#define MAX_FDS 65536

/// The real function `name`, looked up past the recorder (each file declares what it calls).
#define DECLARE(ret, name, ...)                                                                    \
    static ret (*real_##name)(__VA_ARGS__);                                                        \
    static void load_##name(void) {                                                                \
        if (!real_##name) real_##name = dlsym(RTLD_NEXT, #name);                                   \
    }

#pragma GCC visibility push(hidden)

struct tracked {
    int used;
    dev_t dev;
    ino_t ino;
};

/// Descriptors opened under the root, by number, with the file each was opened on.
extern struct tracked fds[MAX_FDS];
/// The log, or -1 when the process records nothing.
extern int log_fd;
/// How long a change of the namespace waits between its call and its record
/// (`POWER_CUT_RECORD_DELAY_MS`): only recorder_order.py sets it, to widen that window.
extern int record_delay_us;

/// Reads the environment once: the root to watch and the log to append to.
void setup(void);
/// Takes and releases the lock held across a real call and its record, for this process's
/// threads and for every other recorded process.
void enter(void);
void leave(void);
/// The same for this process's threads only: for calls that may wait for another process (an
/// open of a FIFO, a write to a pipe), which must not wait holding what that process needs.
void enter_local(void);
void leave_local(void);
/// Appends one record: its line, then `data` (a write's bytes).
void emit(const char *line, const struct iovec *data, int count);
/// The absolute, normalized path `name` names relative to `dirfd`.
int resolve(int dirfd, const char *name, char *out);
/// `path` relative to the root, hex-encoded; 0 when it lies under the root.
int relative_hex(const char *path, char *out);
/// True when `fd` is a descriptor opened under the root and still the same file.
int is_tracked(int fd);
/// Records a descriptor just opened (a create or a truncate under the root).
void opened(int fd, int dirfd, const char *name, int flags, int existed);
int exists(int dirfd, const char *name);

#pragma GCC visibility pop

#endif
