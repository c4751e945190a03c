// A model of a single save's manifest commit in C, for what SQLite alone costs: one
// transaction per save at synchronous=FULL with the store's `objects` row (and its
// `objects_by_seq` index), a `history` row holding 194 bytes and, as a committed intent, an
// `intents` row; every 3,000 saves the intents go in an unflushed commit, as the store's
// settle drops them. Prints wall and CPU time per save. Run it on tmpfs for CPU alone.
//   cc -O2 -o /tmp/commit-model Benchmarks/tools/commit-model.c -lsqlite3
//   /tmp/commit-model DB SAVES AUTOCHECKPOINT TICK-CHECKPOINT [INTENT [INDEX [ROWID-HISTORY [SIZE [PER-COMMIT]]]]]
//   e.g. /tmp/commit-model /dev/shm/m.db 10000 1000 0      (the store's settings)
//        /tmp/commit-model /dev/shm/m.db 10000 0 1         (a PASSIVE checkpoint at each drop instead)
//        /tmp/commit-model /dev/shm/m.db 10000 1000 0 0 0  (no intent row, no sequence index)
//        /tmp/commit-model /tmp/m.db 3000 1000 0 1 1 1 512  (history as a rowid table with a unique
//        index on (collection, key, version) instead of WITHOUT ROWID, 512-byte versions)
//        /tmp/commit-model /dev/shm/m.db 10000 8192 0 0 1 1 194 10000  (a batch: 10,000 saves in one
//        commit, as `store.batch` records them, less its one intent row)
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double clockSeconds(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void run(sqlite3 *db, const char *sql) {
    char *error = 0;
    if (sqlite3_exec(db, sql, 0, 0, &error) != SQLITE_OK) { fprintf(stderr, "%s: %s\n", sql, error); exit(1); }
}

static void step(sqlite3_stmt *statement) {
    if (sqlite3_step(statement) != SQLITE_DONE) { fprintf(stderr, "step failed\n"); exit(1); }
    sqlite3_reset(statement);
}

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: commit-model DB SAVES AUTOCHECKPOINT TICK-CHECKPOINT [INTENT [INDEX [ROWID-HISTORY [SIZE [PER-COMMIT]]]]]\n"); return 2; }
    const char *path = argv[1];
    int saves = atoi(argv[2]), autocheckpoint = atoi(argv[3]), tickCheckpoint = atoi(argv[4]);
    int withIntent = argc > 5 ? atoi(argv[5]) : 1, withIndex = argc > 6 ? atoi(argv[6]) : 1, rowidHistory = argc > 7 ? atoi(argv[7]) : 0, size = argc > 8 ? atoi(argv[8]) : 194;
    int perCommit = argc > 9 ? atoi(argv[9]) : 1;
    const int tick = 3000;
    char other[4200];
    unlink(path);
    snprintf(other, sizeof other, "%s-wal", path);
    unlink(other);
    snprintf(other, sizeof other, "%s-shm", path);
    unlink(other);
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK) { fprintf(stderr, "cannot open %s\n", path); return 1; }
    run(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;");
    snprintf(other, sizeof other, "PRAGMA wal_autocheckpoint=%d;", autocheckpoint);
    run(db, other);
    run(db, "CREATE TABLE objects(collection TEXT NOT NULL, key TEXT NOT NULL, file TEXT NOT NULL, version INTEGER NOT NULL,"
            " vector TEXT NOT NULL, hash BLOB, size INTEGER NOT NULL, stamp_size INTEGER, stamp_mtime INTEGER, stamp_inode INTEGER,"
            " racy INTEGER NOT NULL DEFAULT 0, modified INTEGER NOT NULL, deleted INTEGER NOT NULL DEFAULT 0, schema INTEGER,"
            " seq INTEGER NOT NULL, replica TEXT NOT NULL, kind TEXT, origin TEXT, created_seq INTEGER,"
            " PRIMARY KEY(collection, key)) WITHOUT ROWID;"
            "CREATE TABLE intents(id INTEGER PRIMARY KEY, pid INTEGER NOT NULL, start INTEGER NOT NULL, entries TEXT NOT NULL);");
    if (rowidHistory) run(db, "CREATE TABLE history(collection TEXT NOT NULL, key TEXT NOT NULL, version INTEGER NOT NULL, file TEXT NOT NULL,"
            " hash BLOB, size INTEGER NOT NULL, modified INTEGER NOT NULL, deleted INTEGER NOT NULL, replica TEXT NOT NULL,"
            " vector TEXT NOT NULL, schema INTEGER, data BLOB); CREATE UNIQUE INDEX history_by_version ON history(collection, key, version);");
    else run(db, "CREATE TABLE history(collection TEXT NOT NULL, key TEXT NOT NULL, version INTEGER NOT NULL, file TEXT NOT NULL,"
            " hash BLOB, size INTEGER NOT NULL, modified INTEGER NOT NULL, deleted INTEGER NOT NULL, replica TEXT NOT NULL,"
            " vector TEXT NOT NULL, schema INTEGER, data BLOB, PRIMARY KEY(collection, key, version)) WITHOUT ROWID;");
    if (withIndex) run(db, "CREATE INDEX objects_by_seq ON objects(seq)");
    sqlite3_stmt *object, *history, *intent, *drop;
    sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO objects VALUES(?, ?, ?, 1, 'r:1', ?, 194, 194, 1, 1, 1, 1, 0, NULL, ?,"
                           " 'replica-id-0', 'created', 'local', ?)", -1, &object, 0);
    sqlite3_prepare_v2(db, "INSERT INTO history VALUES(?, ?, 1, ?, ?, 194, 1, 0, 'replica-id-0', 'r:1', NULL, ?)", -1, &history, 0);
    sqlite3_prepare_v2(db, "INSERT INTO intents(pid, start, entries) VALUES(1, 2, ?)", -1, &intent, 0);
    sqlite3_prepare_v2(db, "DELETE FROM intents", -1, &drop, 0);
    char data[4096], entries[300];
    unsigned char hash[32];
    memset(data, 'd', sizeof data);
    memset(entries, 'e', sizeof entries - 1);
    entries[sizeof entries - 1] = 0;
    memset(hash, 7, sizeof hash);
    double wall = clockSeconds(CLOCK_MONOTONIC), cpu = clockSeconds(CLOCK_PROCESS_CPUTIME_ID);
    for (int n = 0; n < saves; n++) {
        char key[32], file[48];
        snprintf(key, sizeof key, "person%d", n);
        snprintf(file, sizeof file, "person%d.json", n);
        if (n % perCommit == 0) run(db, "BEGIN IMMEDIATE");
        sqlite3_bind_text(object, 1, "Person", -1, SQLITE_STATIC);
        sqlite3_bind_text(object, 2, key, -1, SQLITE_STATIC);
        sqlite3_bind_text(object, 3, file, -1, SQLITE_STATIC);
        sqlite3_bind_blob(object, 4, hash, sizeof hash, SQLITE_STATIC);
        sqlite3_bind_int(object, 5, n + 1);
        sqlite3_bind_int(object, 6, n + 1);
        step(object);
        sqlite3_bind_text(history, 1, "Person", -1, SQLITE_STATIC);
        sqlite3_bind_text(history, 2, key, -1, SQLITE_STATIC);
        sqlite3_bind_text(history, 3, file, -1, SQLITE_STATIC);
        sqlite3_bind_blob(history, 4, hash, sizeof hash, SQLITE_STATIC);
        sqlite3_bind_blob(history, 5, data, size, SQLITE_STATIC);
        step(history);
        if (withIntent) {
            sqlite3_bind_text(intent, 1, entries, -1, SQLITE_STATIC);
            step(intent);
        }
        if ((n + 1) % perCommit == 0 || n + 1 == saves) run(db, "COMMIT");
        if ((n + 1) % tick == 0 && (n + 1) % perCommit == 0) {
            run(db, "PRAGMA synchronous=NORMAL; BEGIN IMMEDIATE");
            step(drop);
            run(db, "COMMIT; PRAGMA synchronous=FULL");
            if (tickCheckpoint) run(db, "PRAGMA wal_checkpoint(PASSIVE)");
        }
    }
    wall = clockSeconds(CLOCK_MONOTONIC) - wall;
    cpu = clockSeconds(CLOCK_PROCESS_CPUTIME_ID) - cpu;
    printf("rowid history %d, size %d, intent %d, sequence index %d, wal_autocheckpoint %d, checkpoint at each drop %d, %d saves per commit: %.1f us per save (%.0f/s), CPU %.1f us per save\n",
           rowidHistory, size, withIntent, withIndex, autocheckpoint, tickCheckpoint, perCommit, wall / saves * 1e6, saves / wall, cpu / saves * 1e6);
    sqlite3_finalize(object);
    sqlite3_finalize(history);
    sqlite3_finalize(intent);
    sqlite3_finalize(drop);
    sqlite3_close(db);
    return 0;
}
