import Foundation

// The manifest's schema, as ordered, named steps: the only place the core tables are defined.
//
// How far a manifest has come is recorded in `PRAGMA user_version`: the number of steps it has
// run (the habit of GRDB's `DatabaseMigrator`). A step is never edited once released; a change
// is a new step at the end. Stores made before `user_version` was recorded read 0, so every
// step is written to be idempotent and to leave a store that already has what it makes as it
// is: today's stores, and stores of formats 1 and 2, run the same list and end alike. Each
// step also says how to tell it is done; a step found undone runs again even when recorded
// (a manifest put back by hand, a copy from an older release), as opening always checked.
//
// Client modules' tables (the cache's, sync's checkpoints) are not here: their steps are
// registered through ``StoreExtension`` and recorded by name in the manifest's
// `extension_steps` table (see Extension/StoreExtension.swift), because `user_version` is one
// number for one ordered list, while extensions are installed independently, in any order, by
// whichever modules a process links.

/// One step of the manifest's schema.
struct ManifestMigration: Sendable {
    var name: String
    /// Whether the store already has what the step makes: asked at every open (a few reads of
    /// the schema), so that what is missing is made whatever `user_version` says.
    var isApplied: @Sendable (SQLiteConnection) throws -> Bool
    /// Makes what the step makes; a no-op where it is already made.
    var apply: @Sendable (SQLiteConnection) throws -> Void
}

extension Manifest {
    /// The steps, in the order they run. `user_version` counts how many a manifest has run.
    static let migrations: [ManifestMigration] = [
        ManifestMigration(
            name: "tables",
            isApplied: { db in try coreTables.allSatisfy(db.hasTable) },
            apply: { db in try db.execute(tables) }),
        // Stores made before the change stream lack the columns that tell other processes what
        // kind of change a row is and who made it; adding them is instant.
        ManifestMigration(
            name: "change kind and origin",
            isApplied: { db in try db.hasColumn("origin", in: "objects") },
            apply: { db in
                if try !db.hasColumn("origin", in: "objects") {
                    try db.execute("ALTER TABLE objects ADD COLUMN kind TEXT; ALTER TABLE objects ADD COLUMN origin TEXT;")
                }
            }),
        // Rows without it were created before any watcher that reads it followed.
        ManifestMigration(
            name: "creation sequence",
            isApplied: { db in try db.hasColumn("created_seq", in: "objects") },
            apply: { db in
                if try !db.hasColumn("created_seq", in: "objects") { try db.execute("ALTER TABLE objects ADD COLUMN created_seq INTEGER") }
            }),
        ManifestMigration(
            name: "history keeps each version's bytes (format 2)",
            isApplied: { db in try !db.hasTable("meta") || (db.meta("format").flatMap { Int($0) } ?? formatVersion) >= 2 },
            apply: { db in
                if let format = try db.meta("format").flatMap({ Int($0) }), format < 2 { try migrateHistory(db) }
            }),
        // History rows hold each version's bytes (about 650 bytes a row). A `WITHOUT ROWID`
        // table keeps whole rows in its interior pages too, six to a page: a version recorded
        // among older ones split a full leaf and its parents, about 6 pages written per row
        // (a sync's page of 1,000 changes among 100,000 objects: Benchmarks/LOG.md). A rowid
        // table appends the row and adds a small key to its primary key's index. Either layout
        // serves every query alike, so a process that cannot write uses the old one as it is.
        ManifestMigration(
            name: "history in a rowid table",
            isApplied: { _ in true },
            apply: { db in
                guard
                    try db.first("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'history'", [], { $0.text(0) })?
                        .uppercased().contains("WITHOUT ROWID") == true
                else { return }
                try db.execute(
                    historyTable("history_rowid") + "INSERT INTO history_rowid(\(historyColumns)) SELECT \(historyColumns) FROM history; "
                        + "DROP TABLE history; ALTER TABLE history_rowid RENAME TO history;")
            }),
        // A settle period's one intent (``WriteIntent/after``): the change sequence it began
        // after. Rows of every other kind leave it null.
        ManifestMigration(
            name: "settle periods",
            isApplied: { db in try db.hasColumn("after", in: "intents") },
            apply: { db in
                if try !db.hasColumn("after", in: "intents") { try db.execute("ALTER TABLE intents ADD COLUMN after INTEGER") }
            }),
    ]

    /// The history table's columns, in the order ``historyTable(_:)`` makes them.
    static let historyColumns = "collection, key, version, file, hash, size, modified, deleted, replica, vector, schema, data"

    /// The history table as it is now made, under `name`.
    private static func historyTable(_ name: String) -> String {
        """
        CREATE TABLE IF NOT EXISTS \(name)(
            collection TEXT NOT NULL,
            key TEXT NOT NULL,
            version INTEGER NOT NULL,
            file TEXT NOT NULL,
            hash BLOB,
            size INTEGER NOT NULL,
            modified INTEGER NOT NULL,
            deleted INTEGER NOT NULL,
            replica TEXT NOT NULL,
            vector TEXT NOT NULL,
            schema INTEGER,
            data BLOB,
            PRIMARY KEY(collection, key, version)
        );
        """
    }

    /// The core tables as they are now made. Each is created only where it is missing: the
    /// steps after this one add what older stores' tables lack.
    private static let tables = """
        CREATE TABLE IF NOT EXISTS meta(
            name TEXT PRIMARY KEY,
            value TEXT NOT NULL
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS objects(
            collection TEXT NOT NULL,
            key TEXT NOT NULL,
            file TEXT NOT NULL,
            version INTEGER NOT NULL,
            vector TEXT NOT NULL,
            hash BLOB,
            size INTEGER NOT NULL,
            stamp_size INTEGER,
            stamp_mtime INTEGER,
            stamp_inode INTEGER,
            racy INTEGER NOT NULL DEFAULT 0,
            modified INTEGER NOT NULL,
            deleted INTEGER NOT NULL DEFAULT 0,
            schema INTEGER,
            seq INTEGER NOT NULL,
            replica TEXT NOT NULL,
            kind TEXT,
            origin TEXT,
            created_seq INTEGER,
            PRIMARY KEY(collection, key)
        ) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS objects_by_seq ON objects(seq);
        \(historyTable("history"))
        CREATE TABLE IF NOT EXISTS intents(
            id INTEGER PRIMARY KEY,
            pid INTEGER NOT NULL,
            start INTEGER NOT NULL,
            entries TEXT NOT NULL
        );
        CREATE TABLE IF NOT EXISTS directories(
            name TEXT PRIMARY KEY,
            inode INTEGER NOT NULL,
            mtime INTEGER NOT NULL,
            ctime INTEGER NOT NULL
        ) WITHOUT ROWID;
        """

    /// The tables `tables` makes.
    private static let coreTables = ["meta", "objects", "history", "intents", "directories"]

    /// How many steps `db` has recorded.
    static func recordedMigrations(_ db: SQLiteConnection) throws -> Int {
        try db.first("PRAGMA user_version") { Int($0.int(0)) } ?? 0
    }

    /// The steps `db` has not recorded, or lacks what they make; with whether each is done.
    static func pendingMigrations(_ db: SQLiteConnection) throws -> [(step: ManifestMigration, isApplied: Bool)] {
        let recorded = try recordedMigrations(db)
        return try migrations.enumerated().compactMap { index, step in
            let applied = try step.isApplied(db)
            return index < recorded && applied ? nil : (step, applied)
        }
    }

    /// Runs the steps `db` has not recorded and records them; inside the caller's write transaction.
    static func migrate(_ db: SQLiteConnection) throws {
        for (step, _) in try pendingMigrations(db) { try step.apply(db) }
        try db.execute("PRAGMA user_version = \(migrations.count)")
    }

    /// Format 1 to 2: each history row takes its version's bytes from the `blobs` table,
    /// which goes. One transaction with the rest of the open: all or nothing.
    private static func migrateHistory(_ db: SQLiteConnection) throws {
        if try !db.hasColumn("data", in: "history") {
            try db.execute("ALTER TABLE history ADD COLUMN data BLOB")
        }
        if try db.hasTable("blobs") {
            try db.execute(
                "UPDATE history SET data = (SELECT data FROM blobs WHERE blobs.hash = history.hash) WHERE hash IS NOT NULL; DROP TABLE blobs;")
        }
        try db.setMeta("format", String(formatVersion))
    }
}
