#ifndef ARCHIVE_SYNC_SHIMS_H
#define ARCHIVE_SYNC_SHIMS_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <unistd.h>

/// syncfs(2) needs _GNU_SOURCE, which Swift's Glibc module is not built with.
static inline int archive_syncfs(int fd) { return syncfs(fd); }
#endif
