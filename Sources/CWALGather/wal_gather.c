// A SQLite VFS that gathers a WAL file's frames into one write per commit.
//
// SQLite writes each WAL frame as two calls, its 24-byte header and then its page, so a
// save's commit of 4-7 frames makes 8-14 write calls before its flush
// (Benchmarks/tools/wal-writes.c measures what that costs). This VFS is the `unix` VFS with
// one change on files opened as a WAL: contiguous writes are copied into a buffer and reach
// the file as one write, made
//   - right after the page of a commit frame (its header's "database size" field is
//     nonzero), so a commit is in the file before SQLite goes on to flush it or to publish it
//     in the `-shm` index, whatever the synchronous setting;
//   - before any other call on the file (read, flush, truncate, size, close, control), before
//     a write that is not contiguous, and when the buffer is full.
// So every error of a gathered write is returned by a call SQLite makes on this file before
// the transaction it belongs to can commit: to SQLite nothing changes but the calls' count.
// Other files (the database, its journal) are the `unix` VFS's own, untouched.
//
// SQLite offers no setting for this (its `unix` VFS writes what it is given), hence a VFS.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "wal_gather.h"

/// Bytes gathered at most before a write: the `unix` VFS's write masks its length to 17 bits
/// (`nBuf &= 0x1ffff` in `seekAndWriteFd`), so a longer one would be cut short. A large
/// transaction's spilled pages go out 31 frames of 4 KiB at a time.
enum { GATHER_LIMIT = 0x1ffff, FRAME_HEADER = 24 };

static sqlite3_vfs gather_vfs;
static sqlite3_vfs *unix_vfs;
static sqlite3_io_methods gather_methods;

/// A WAL file: the `unix` VFS's file first (so that its own methods find it at the same
/// address), then what this layer keeps.
typedef struct {
    const sqlite3_io_methods *real;
    unsigned char *buffer;
    int used;
    sqlite3_int64 start;
    int frames;
    /// The last write was a commit frame's header: write out once its page is gathered.
    int commit_pending;
    /// Gathered writes made, and the frames they carried (``archive_wal_gather_counts``).
    long long writes, frames_written;
} Gather;

static Gather *gather_of(sqlite3_file *file) { return (Gather *)((char *)file + ((unix_vfs->szOsFile + 15) & ~15)); }

static int gather_flush(sqlite3_file *file) {
    Gather *g = gather_of(file);
    if (g->used == 0) return SQLITE_OK;
    int rc = g->real->xWrite(file, g->buffer, g->used, g->start);
    g->writes += 1;
    g->frames_written += g->frames;
    // Dropped on failure too: SQLite treats the call that failed as failed, and writes the
    // frames of any later transaction again from its own pages.
    g->used = 0;
    g->frames = 0;
    g->commit_pending = 0;
    return rc;
}

static int gather_write(sqlite3_file *file, const void *data, int amount, sqlite3_int64 offset) {
    Gather *g = gather_of(file);
    // Made at the first write: a connection that only reads holds none. Without it, writes
    // go straight to the file.
    if (g->buffer == NULL && (g->buffer = malloc(GATHER_LIMIT)) == NULL) return g->real->xWrite(file, data, amount, offset);
    if (g->used > 0 && (offset != g->start + g->used || g->used + amount > GATHER_LIMIT)) {
        int rc = gather_flush(file);
        if (rc != SQLITE_OK) return rc;
    }
    if (amount > GATHER_LIMIT) return g->real->xWrite(file, data, amount, offset);
    if (g->used == 0) g->start = offset;
    memcpy(g->buffer + g->used, data, amount);
    g->used += amount;
    if (amount == FRAME_HEADER) {
        const unsigned char *header = data;
        g->frames += 1;
        g->commit_pending = (header[4] | header[5] | header[6] | header[7]) != 0;
        return SQLITE_OK;
    }
    return g->commit_pending ? gather_flush(file) : SQLITE_OK;
}

static int gather_close(sqlite3_file *file) {
    Gather *g = gather_of(file);
    int flushed = gather_flush(file);
    int rc = g->real->xClose(file);
    free(g->buffer);
    g->buffer = NULL;
    return flushed != SQLITE_OK ? flushed : rc;
}

#define FLUSHING(name, params, args)                  \
    static int gather_##name params {                 \
        int rc = gather_flush(file);                  \
        if (rc != SQLITE_OK) return rc;               \
        return gather_of(file)->real->x##name args;   \
    }

FLUSHING(Read, (sqlite3_file * file, void *data, int amount, sqlite3_int64 offset), (file, data, amount, offset))
FLUSHING(Truncate, (sqlite3_file * file, sqlite3_int64 size), (file, size))
FLUSHING(Sync, (sqlite3_file * file, int flags), (file, flags))
FLUSHING(FileSize, (sqlite3_file * file, sqlite3_int64 *size), (file, size))
FLUSHING(FileControl, (sqlite3_file * file, int op, void *arg), (file, op, arg))
FLUSHING(Fetch, (sqlite3_file * file, sqlite3_int64 offset, int amount, void **pointer), (file, offset, amount, pointer))

static int gather_lock(sqlite3_file *file, int level) { return gather_of(file)->real->xLock(file, level); }
static int gather_unlock(sqlite3_file *file, int level) { return gather_of(file)->real->xUnlock(file, level); }
static int gather_check_reserved(sqlite3_file *file, int *out) { return gather_of(file)->real->xCheckReservedLock(file, out); }
static int gather_sector_size(sqlite3_file *file) { return gather_of(file)->real->xSectorSize(file); }
static int gather_characteristics(sqlite3_file *file) { return gather_of(file)->real->xDeviceCharacteristics(file); }
static int gather_shm_map(sqlite3_file *file, int region, int size, int extend, void volatile **out) {
    return gather_of(file)->real->xShmMap(file, region, size, extend, out);
}
static int gather_shm_lock(sqlite3_file *file, int offset, int n, int flags) { return gather_of(file)->real->xShmLock(file, offset, n, flags); }
static void gather_shm_barrier(sqlite3_file *file) { gather_of(file)->real->xShmBarrier(file); }
static int gather_shm_unmap(sqlite3_file *file, int delete) { return gather_of(file)->real->xShmUnmap(file, delete); }
static int gather_unfetch(sqlite3_file *file, sqlite3_int64 offset, void *pointer) { return gather_of(file)->real->xUnfetch(file, offset, pointer); }

static int gather_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *out_flags) {
    (void)vfs;
    int rc = unix_vfs->xOpen(unix_vfs, name, file, flags, out_flags);
    if (rc != SQLITE_OK || !(flags & SQLITE_OPEN_WAL) || file->pMethods == NULL || file->pMethods->iVersion < 3) return rc;
    Gather *g = gather_of(file);
    memset(g, 0, sizeof *g);
    g->real = file->pMethods;
    file->pMethods = &gather_methods;
    return SQLITE_OK;
}

// The rest is the `unix` VFS's.
static int gather_delete(sqlite3_vfs *v, const char *name, int sync) { (void)v; return unix_vfs->xDelete(unix_vfs, name, sync); }
static int gather_access(sqlite3_vfs *v, const char *name, int flags, int *out) { (void)v; return unix_vfs->xAccess(unix_vfs, name, flags, out); }
static int gather_full_pathname(sqlite3_vfs *v, const char *name, int n, char *out) { (void)v; return unix_vfs->xFullPathname(unix_vfs, name, n, out); }
static void *gather_dl_open(sqlite3_vfs *v, const char *name) { (void)v; return unix_vfs->xDlOpen(unix_vfs, name); }
static void gather_dl_error(sqlite3_vfs *v, int n, char *out) { (void)v; unix_vfs->xDlError(unix_vfs, n, out); }
static void (*gather_dl_sym(sqlite3_vfs *v, void *handle, const char *symbol))(void) { (void)v; return unix_vfs->xDlSym(unix_vfs, handle, symbol); }
static void gather_dl_close(sqlite3_vfs *v, void *handle) { (void)v; unix_vfs->xDlClose(unix_vfs, handle); }
static int gather_randomness(sqlite3_vfs *v, int n, char *out) { (void)v; return unix_vfs->xRandomness(unix_vfs, n, out); }
static int gather_sleep(sqlite3_vfs *v, int micro) { (void)v; return unix_vfs->xSleep(unix_vfs, micro); }
static int gather_current_time(sqlite3_vfs *v, double *out) { (void)v; return unix_vfs->xCurrentTime(unix_vfs, out); }
static int gather_last_error(sqlite3_vfs *v, int n, char *out) { (void)v; return unix_vfs->xGetLastError(unix_vfs, n, out); }
static int gather_current_time64(sqlite3_vfs *v, sqlite3_int64 *out) { (void)v; return unix_vfs->xCurrentTimeInt64(unix_vfs, out); }
static int gather_set_syscall(sqlite3_vfs *v, const char *name, sqlite3_syscall_ptr call) { (void)v; return unix_vfs->xSetSystemCall(unix_vfs, name, call); }
static sqlite3_syscall_ptr gather_get_syscall(sqlite3_vfs *v, const char *name) { (void)v; return unix_vfs->xGetSystemCall(unix_vfs, name); }
static const char *gather_next_syscall(sqlite3_vfs *v, const char *name) { (void)v; return unix_vfs->xNextSystemCall(unix_vfs, name); }

static int registered = SQLITE_ERROR;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void gather_register_once(void) {
    unix_vfs = sqlite3_vfs_find("unix");
    if (unix_vfs == NULL || unix_vfs->iVersion < 3) return;
    gather_methods = (sqlite3_io_methods){
        .iVersion = 3, .xClose = gather_close, .xRead = gather_Read, .xWrite = gather_write, .xTruncate = gather_Truncate,
        .xSync = gather_Sync, .xFileSize = gather_FileSize, .xLock = gather_lock, .xUnlock = gather_unlock,
        .xCheckReservedLock = gather_check_reserved, .xFileControl = gather_FileControl, .xSectorSize = gather_sector_size,
        .xDeviceCharacteristics = gather_characteristics, .xShmMap = gather_shm_map, .xShmLock = gather_shm_lock,
        .xShmBarrier = gather_shm_barrier, .xShmUnmap = gather_shm_unmap, .xFetch = gather_Fetch, .xUnfetch = gather_unfetch,
    };
    gather_vfs = (sqlite3_vfs){
        .iVersion = 3, .szOsFile = ((unix_vfs->szOsFile + 15) & ~15) + (int)sizeof(Gather), .mxPathname = unix_vfs->mxPathname,
        .zName = ARCHIVE_WAL_GATHER_VFS, .xOpen = gather_open, .xDelete = gather_delete, .xAccess = gather_access,
        .xFullPathname = gather_full_pathname, .xDlOpen = gather_dl_open, .xDlError = gather_dl_error, .xDlSym = gather_dl_sym,
        .xDlClose = gather_dl_close, .xRandomness = gather_randomness, .xSleep = gather_sleep, .xCurrentTime = gather_current_time,
        .xGetLastError = gather_last_error, .xCurrentTimeInt64 = gather_current_time64, .xSetSystemCall = gather_set_syscall,
        .xGetSystemCall = gather_get_syscall, .xNextSystemCall = gather_next_syscall,
    };
    registered = sqlite3_vfs_register(&gather_vfs, 0);
}

int archive_wal_gather_register(void) {
    pthread_once(&once, gather_register_once);
    return registered;
}

int archive_wal_gather_counts(sqlite3 *db, long long *writes, long long *frames) {
    sqlite3_file *wal = NULL;
    if (sqlite3_file_control(db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal) != SQLITE_OK || wal == NULL) return 0;
    if (wal->pMethods != &gather_methods) return 0;
    *writes = gather_of(wal)->writes;
    *frames = gather_of(wal)->frames_written;
    return 1;
}
