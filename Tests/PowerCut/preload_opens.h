// The entry points through which a program opens a file (and glibc's fortified forms, and
// creat), for an LD_PRELOAD library of the power-cut simulator (the recorder, the faults
// library). Included once, after the library defines
//     static int do_open(int dirfd, const char *name, int flags, mode_t mode);
// with <fcntl.h> and <stdarg.h> included.
#ifndef POWER_CUT_PRELOAD_OPENS_H
#define POWER_CUT_PRELOAD_OPENS_H

/// The mode argument of an open that creates (O_CREAT or O_TMPFILE); 0 otherwise.
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

#endif
