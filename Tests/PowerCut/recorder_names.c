// The power-cut recorder's changes of the namespace (renames, unlinks, mkdirs, links) and its
// descriptor bookkeeping (close, dup) (recorder.h).
#include "recorder.h"

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
DECLARE(int, close, int)
DECLARE(int, dup, int)
DECLARE(int, dup2, int, int)
DECLARE(int, dup3, int, int, int)

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
    if (record_delay_us) usleep(record_delay_us);                                                  \
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
    // RENAME_EXCHANGE swaps two names: recorded as E (a save replacing a file makes one).
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
        enter_local();
        fds[fd].used = 0;
        int result = real_close(fd);
        int saved = errno;
        leave_local();
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
    enter_local();
    int fd = duplicated(old, real_dup(old));
    leave_local();
    return fd;
}
int dup2(int old, int fd) {
    load_dup2();
    enter_local();
    int result = duplicated(old, real_dup2(old, fd));
    leave_local();
    return result;
}
int dup3(int old, int fd, int flags) {
    load_dup3();
    enter_local();
    int result = duplicated(old, real_dup3(old, fd, flags));
    leave_local();
    return result;
}
