import ArchiveLocking
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The store's version manifest: an SQLite database in WAL mode at
/// `.archive-sync/manifest.sqlite`. The schema below is the only place it is defined.
///
/// Every change to an object, whoever made it, goes through ``ManifestTransaction/record(_:)``.
final class Manifest: Sendable {
    /// 2 keeps each version's bytes in its history row; 1 kept them once per hash in a
    /// `blobs` table, and is migrated when opened.
    static let formatVersion = 2
    static let defaultHistoryLimit = 10

    static let schema = """
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
        CREATE TABLE IF NOT EXISTS history(
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
        ) WITHOUT ROWID;
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
        CREATE TABLE IF NOT EXISTS peers(
            replica TEXT PRIMARY KEY,
            seq INTEGER NOT NULL,
            updated INTEGER NOT NULL
        ) WITHOUT ROWID;
        """

    /// The tables `schema` makes: a store lacking one was made by an older version. (Named,
    /// not counted: other files add tables of their own, such as the cache's.)
    private static let tableNames: Set<String> = Set(
        schema.components(separatedBy: "CREATE TABLE IF NOT EXISTS ").dropFirst().map { String($0.prefix { $0 != "(" }) })

    private let connection: TracedMutex<SQLiteConnection>
    /// This store's replica id, made when the store was created.
    let replica: ReplicaID
    /// Why the store cannot be written, when it cannot: every write throws it.
    let writeRefusal: ArchiveError?
    /// Where every change this process records is published, as soon as it commits.
    let feed = ChangeFeed()

    /// Opens the existing manifest at `path` (a new one is made by ``create(at:replica:historyLimit:)``).
    ///
    /// Opening only reads; the write lock is taken only to upgrade the schema or to change
    /// the history limit. A manifest without its settings, or that SQLite cannot read, is
    /// refused as damaged (``ArchiveError/damagedManifest(store:problem:)``): it is never
    /// filled in afresh, which would give the store a new replica id and no history.
    ///
    /// - Parameters:
    ///   - store: the store's path as given, for messages.
    ///   - readOnly: why the store cannot be written, when it cannot: the connection then only
    ///     reads, and every write throws this.
    init(path: String, store: String, historyLimit requestedLimit: Int?, readOnly: ArchiveError?) throws {
        let db: SQLiteConnection
        var current: (replica: String, limit: Int, format: Int)
        var needsColumns: Bool
        do {
            db = try readOnly == nil ? SQLiteConnection.openWAL(path: path) : SQLiteConnection(path: path, mode: .readOnly)
            guard try db.hasTable("meta"), let text = try db.meta("format"), let replica = try db.meta("replica"),
                let limit = try db.meta("history_limit").flatMap({ Int($0) })
            else {
                throw ArchiveError.damagedManifest(store: store, problem: "has no format, replica id or history limit in its meta table")
            }
            guard let format = Int(text), (1...Self.formatVersion).contains(format) else {
                throw ArchiveError.notAStore(
                    path: store, reason: "its manifest has format \(text); this program reads formats 1 to \(Self.formatVersion)")
            }
            current = (replica, limit, format)
            // Stores made before the change stream lack the columns that tell other processes
            // what kind of change a row is and who made it; adding them is instant. Stores made
            // before a table was added lack it: `schema` creates whatever is missing.
            needsColumns =
                try !Self.tableNames.allSatisfy(db.hasTable) || !db.hasColumn("origin", in: "objects") || !db.hasColumn("created_seq", in: "objects")
        } catch let error as SQLiteError where error.isDamagedFile {
            throw ArchiveError.damagedManifest(store: store, problem: "is not a readable SQLite database (\(error))")
        }
        let upgrade = needsColumns || current.format < Self.formatVersion
        if readOnly != nil && upgrade {
            throw ArchiveError.notAStore(
                path: store, reason: "its manifest was made by an older release and must be upgraded once by a process that can write it")
        }
        if let readOnly, requestedLimit != nil && requestedLimit != current.limit { throw readOnly }
        if upgrade || (requestedLimit != nil && requestedLimit != current.limit) {
            try db.execute("BEGIN IMMEDIATE")
            do {
                try db.execute(Self.schema)
                if try !db.hasColumn("origin", in: "objects") {
                    try db.execute("ALTER TABLE objects ADD COLUMN kind TEXT; ALTER TABLE objects ADD COLUMN origin TEXT;")
                }
                if try !db.hasColumn("created_seq", in: "objects") {
                    // Rows without it were created before any watcher that reads it followed.
                    try db.execute("ALTER TABLE objects ADD COLUMN created_seq INTEGER")
                }
                if let format = try db.meta("format").flatMap({ Int($0) }), format < Self.formatVersion {
                    try Self.migrateHistory(db)
                }
                if let requestedLimit {
                    try db.setMeta("history_limit", String(requestedLimit))
                    current.limit = requestedLimit
                }
                try db.execute("COMMIT")
            } catch {
                try? db.execute("ROLLBACK")
                throw error
            }
        }
        replica = ReplicaID(rawValue: current.replica)
        writeRefusal = readOnly
        connection = TracedMutex(db)
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

    /// Reads under one consistent snapshot.
    func read<T: Sendable>(_ body: (ManifestTransaction) throws -> T) throws -> T {
        try transaction("BEGIN", body)
    }

    /// Runs one statement in SQLite's autocommit mode: a single statement sees one snapshot
    /// by itself, without the `BEGIN` and `COMMIT` of a ``read(_:)`` (every load makes one).
    /// `body` runs one statement only.
    func readOne<T: Sendable>(_ body: (ManifestTransaction) throws -> T) throws -> T {
        try connection.withLock { db in try body(ManifestTransaction(db: db, replica: replica)) }
    }

    /// Writes in one transaction, holding SQLite's write lock (and so excluding every other
    /// writer in every process) from the start. Rolls back if `body` throws.
    func write<T: Sendable>(_ body: (ManifestTransaction) throws -> T) throws -> T {
        if let writeRefusal { throw writeRefusal }
        return try transaction("BEGIN IMMEDIATE", body)
    }

    private func transaction<T: Sendable>(_ begin: String, _ body: (ManifestTransaction) throws -> T) throws -> T {
        try connection.withLock { db in
            try db.execute(begin)
            let tx = ManifestTransaction(db: db, replica: replica)
            do {
                let result = try body(tx)
                try db.execute("COMMIT")
                // Still under the connection's lock: a catch-up read of other processes'
                // changes sees these either not at all or already published (never twice).
                if !tx.recorded.isEmpty { feed.publish(tx.recorded) }
                return result
            } catch {
                try? db.execute("ROLLBACK")
                throw error
            }
        }
    }

    /// Nanoseconds since 1970, from the real-time clock.
    /// Within this many nanoseconds of a file's mtime, a rewrite of the same size could keep
    /// its stamp (file system clocks are coarse), so a stamp that new is not trusted.
    static let racyWindow: Int64 = 2_000_000_000

    static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return time.nanoseconds
    }
}
