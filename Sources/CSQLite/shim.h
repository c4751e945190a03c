#ifndef ARCHIVE_SYNC_CSQLITE_SHIM_H
#define ARCHIVE_SYNC_CSQLITE_SHIM_H
#include <sqlite3.h>
#endif
