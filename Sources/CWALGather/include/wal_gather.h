#ifndef ARCHIVE_SYNC_WAL_GATHER_H
#define ARCHIVE_SYNC_WAL_GATHER_H

#include <sqlite3.h>

/// The name of the SQLite VFS that ``archive_wal_gather_register`` makes: the default `unix`
/// VFS, except that a WAL file's frames reach the file in one write per commit.
#define ARCHIVE_WAL_GATHER_VFS "archive-wal-gather"

/// Registers the VFS (once per process; later calls do nothing). Returns an SQLite result
/// code: SQLITE_OK, or why it could not be made (the manifest then opens with `unix`).
int archive_wal_gather_register(void);

/// How many gathered writes the WAL file of `db` made since it was opened, and how many
/// frames they carried: the tests' way to see that a commit's frames went out together.
/// Returns 0 (and sets neither) when that file is not open or not gathered.
int archive_wal_gather_counts(sqlite3 *db, long long *writes, long long *frames);

#endif
