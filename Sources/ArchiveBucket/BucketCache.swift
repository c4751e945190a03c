import ArchiveLocking
import ArchiveStore
import ArchiveSync
import Foundation

/// The fold of a bucket's logs as one syncing store last read them: an SQLite file in that
/// store's `.archive-sync/`, so that a sync reads only the segments written since the last.
///
/// Per object it keeps every version no other version has seen (the *antichain*: one version,
/// or several made apart), and the one of them the bucket replica shows a sync (its *view*),
/// numbered by a change sequence of the cache's own, as a store numbers its changes. Per log
/// it keeps how far it has read. Folding is order-free: whatever order the segments are read
/// in, the same versions give the same view, on every host.
package final class BucketCache: Sendable {
    let db: TracedMutex<SQLiteConnection>

    /// Opens (or makes) the cache at `path` for the bucket replica `replica`. A cache made for
    /// another replica (the prefix was made anew) is emptied: its fold is of another bucket.
    package convenience init(path: String, replica: ReplicaID) throws {
        try self.init(connection: try SQLiteConnection(path: path, mode: .create), replica: replica)
    }

    private init(connection: sending SQLiteConnection, replica: ReplicaID) throws {
        // FULL: a commit that returned is on disk, so the change sequence never goes back
        // below a checkpoint a store recorded after it. Each sync opens the cache anew, in a
        // process of its own: its WAL files stay (emptied) between them.
        connection.keepWALFiles()
        try connection.execute("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA journal_size_limit=0;")
        try connection.execute(Self.schema)
        let cached = try connection.first("SELECT value FROM meta WHERE name = 'replica'") { $0.text(0) }
        if cached != replica.rawValue {
            try connection.execute(
                "BEGIN IMMEDIATE; DELETE FROM logs; DELETE FROM versions; DELETE FROM view; DELETE FROM peers; DELETE FROM blobs; DELETE FROM pushed;"
            )
            try connection.run("INSERT OR REPLACE INTO meta(name, value) VALUES('replica', ?)", [.text(replica.rawValue)])
            try connection.execute("COMMIT")
        }
        db = TracedMutex(connection)
    }

    /// The cache at `path` and the replica it was made for, opened once; nil when there is no
    /// cache there yet.
    package static func existing(at path: String) throws -> (cache: BucketCache, replica: ReplicaID)? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        let connection = try SQLiteConnection(path: path, mode: .existing)
        guard try connection.first("SELECT 1 FROM sqlite_master WHERE name = 'meta'", [], { _ in true }) ?? false,
            let replica = try connection.first("SELECT value FROM meta WHERE name = 'replica'", [], { ReplicaID(rawValue: $0.text(0)) })
        else { return nil }
        return (try BucketCache(connection: connection, replica: replica), replica)
    }

    private static let schema = """
        CREATE TABLE IF NOT EXISTS meta(name TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS logs(replica TEXT PRIMARY KEY, last INTEGER NOT NULL, key TEXT NOT NULL) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS versions(
            collection TEXT NOT NULL, key TEXT NOT NULL, kind TEXT NOT NULL, vector TEXT NOT NULL, hash BLOB,
            size INTEGER NOT NULL, modified INTEGER NOT NULL, author TEXT NOT NULL);
        CREATE INDEX IF NOT EXISTS versions_id ON versions(collection, key);
        CREATE INDEX IF NOT EXISTS versions_hash ON versions(hash);
        CREATE TABLE IF NOT EXISTS view(
            collection TEXT NOT NULL, key TEXT NOT NULL, kind TEXT NOT NULL, vector TEXT NOT NULL, hash BLOB,
            size INTEGER NOT NULL, modified INTEGER NOT NULL, author TEXT NOT NULL, seq INTEGER NOT NULL,
            PRIMARY KEY(collection, key)) WITHOUT ROWID;
        CREATE INDEX IF NOT EXISTS view_seq ON view(seq);
        CREATE TABLE IF NOT EXISTS peers(replica TEXT PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS blobs(hash BLOB PRIMARY KEY) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS pushed(key TEXT PRIMARY KEY) WITHOUT ROWID;
        """

    /// The view's change sequence: the number of the last change the fold made to it.
    package func changeSequence() throws -> Int {
        try db.withLock { try Self.sequence($0) }
    }

    static func sequence(_ sql: SQLiteConnection) throws -> Int {
        try sql.first("SELECT value FROM meta WHERE name = 'sequence'") { Int($0.text(0)) ?? 0 } ?? 0
    }

    /// How far each log has been read: its last entry folded and the key of that segment.
    package func logPositions() throws -> [ReplicaID: LogPosition] {
        try db.withLock { sql in
            var positions: [ReplicaID: LogPosition] = [:]
            try sql.query("SELECT replica, last, key FROM logs") { row in
                positions[ReplicaID(rawValue: row.text(0))] = LogPosition(last: Int(row.int(1)), key: row.text(2))
            }
            return positions
        }
    }

    /// The segments this cache pushed that no listing has passed yet: a read passes them
    /// without fetching them (their entries are folded).
    package func pushedKeys() throws -> Set<String> {
        try db.withLock { sql in
            var keys: Set<String> = []
            try sql.query("SELECT key FROM pushed") { keys.insert($0.text(0)) }
            return keys
        }
    }

    /// Folds `entries` into the view and, in the same transaction, moves `log`'s position:
    /// what was folded and how far the log was read never disagree. With `pushed` (the key of
    /// the segment this cache just wrote, holding `entries`), the position's key stays the
    /// last one read, so that the next listing still shows a segment another writer put at
    /// the same number; without it, the pushed keys the position passes are forgotten.
    ///
    /// - Returns: the first change sequence the fold gave the view (`change`), and the first at
    ///   which the view came to show a version other than the entry just folded for it
    ///   (`other`: another, concurrent version won); nil when there was none.
    @discardableResult
    package func fold(_ entries: [BucketEntry], log: (replica: ReplicaID, position: LogPosition)?, pushed: String? = nil) throws -> (
        change: Int?, other: Int?
    ) {
        try transaction { sql in
            let folded = try Self.fold(entries, sql)
            if let log {
                try sql.run(
                    "INSERT OR REPLACE INTO logs(replica, last, key) VALUES(?, ?, ?)",
                    [.text(log.replica.rawValue), .integer(Int64(log.position.last)), .text(log.position.key)])
                if let pushed {
                    try sql.run("INSERT OR IGNORE INTO pushed(key) VALUES(?)", [.text(pushed)])
                } else {
                    let key = log.position.key
                    let directory = String(key[...(key.lastIndex(of: "/") ?? key.startIndex)])
                    try sql.run("DELETE FROM pushed WHERE key > ? AND key <= ?", [.text(directory), .text(key)])
                }
            }
            return folded
        }
    }

    /// `body` in one write transaction, rolled back if it throws.
    func transaction<T>(_ body: (SQLiteConnection) throws -> T) throws -> T {
        try db.withLock { sql in
            try sql.execute("BEGIN IMMEDIATE")
            do {
                let result = try body(sql)
                try sql.execute("COMMIT")
                return result
            } catch {
                try? sql.execute("ROLLBACK")
                throw error
            }
        }
    }

    /// Folds `entries` into the view inside a transaction (see ``fold(_:log:pushed:)``).
    static func fold(_ entries: [BucketEntry], _ sql: SQLiteConnection) throws -> (change: Int?, other: Int?) {
        let start = try Self.sequence(sql)
        var sequence = start
        var firstOther: Int?
        for entry in entries {
            if let hash = entry.hash { try sql.run("INSERT OR IGNORE INTO blobs(hash) VALUES(?)", [.blob(hash.bytes)]) }
            guard let shown = try Self.add(entry, sql) else { continue }
            let current = try Self.viewRow(entry.id, sql)
            guard current?.entry != shown else { continue }
            sequence += 1
            try Self.write(shown, sequence: sequence, sql)
            if shown != entry && firstOther == nil { firstOther = sequence }
        }
        try sql.run("INSERT OR REPLACE INTO meta(name, value) VALUES('sequence', ?)", [.text(String(sequence))])
        return (sequence > start ? start + 1 : nil, firstOther)
    }

    /// Adds `entry` to its object's antichain. Returns the version the view shows for the
    /// object afterwards, or nil when `entry` changed nothing (a version already there has
    /// seen it).
    private static func add(_ entry: BucketEntry, _ sql: SQLiteConnection) throws -> BucketEntry? {
        var chain: [(rowid: Int64, version: BucketEntry)] = []
        try sql.query("SELECT rowid, \(columns) FROM versions WHERE collection = ? AND key = ?", [.text(entry.collection), .text(entry.key)]) {
            chain.append(($0.int(0), try Self.entry(from: $0, at: 1)))
        }
        // Equal vectors over other contents are two versions made apart (stores that never
        // met): both stay. Anything else a version has seen is no news.
        if chain.contains(where: { $0.version.vector.dominates(entry.vector) && ($0.version.vector != entry.vector || $0.version.hash == entry.hash) }
        ) {
            return nil
        }
        var kept: [BucketEntry] = [entry]
        for (rowid, version) in chain {
            if entry.vector.dominates(version.vector) && entry.vector != version.vector {
                try sql.run("DELETE FROM versions WHERE rowid = ?", [.integer(rowid)])
            } else {
                kept.append(version)
            }
        }
        try sql.run("INSERT INTO versions(\(columns)) VALUES(?, ?, ?, ?, ?, ?, ?, ?)", bindings(entry))
        return kept.max(by: shownBefore)!
    }

    /// The order in which the view picks among versions made apart: a live version before a
    /// delete (an edit beats a delete), then the newer, then the larger author, contents and
    /// vector. Every host picks the same; the sync of a store holding another of them finds
    /// a conflict (or a merge) with it and pushes the outcome, which has seen both.
    private static func shownBefore(_ a: BucketEntry, _ b: BucketEntry) -> Bool {
        if a.isDeleted != b.isDeleted { return a.isDeleted }
        if a.modified != b.modified { return a.modified < b.modified }
        if a.author != b.author { return a.author < b.author }
        let ha = a.hash?.bytes ?? Data()
        let hb = b.hash?.bytes ?? Data()
        if ha != hb { return ha.lexicographicallyPrecedes(hb) }
        return a.vector.description < b.vector.description
    }

    static let columns = "collection, key, kind, vector, hash, size, modified, author"

    private static func bindings(_ entry: BucketEntry) -> [SQLValue] {
        [
            .text(entry.collection), .text(entry.key), .text(entry.kind), .text(entry.vector.description),
            entry.hash.map { .blob($0.bytes) } ?? .null,
            .integer(Int64(entry.size)), .integer(entry.modified), .text(entry.author.rawValue),
        ]
    }

    static func entry(from row: SQLiteRow, at start: Int32) throws -> BucketEntry {
        let collection = row.text(start)
        let key = row.text(start + 1)
        guard let vector = VersionVector(parsing: row.text(start + 3)) else {
            throw BucketError.malformed(key: "\(collection)/\(key)", reason: "the local cache of the bucket holds a malformed version vector")
        }
        return BucketEntry(
            id: ObjectID(unchecked: collection, key: key), kind: row.text(start + 2), vector: vector,
            hash: row.isNull(start + 4) ? nil : ContentHash(digest: row.blob(start + 4)), size: Int(row.int(start + 5)),
            modified: row.int(start + 6), author: ReplicaID(rawValue: row.text(start + 7)))
    }

    private static func viewRow(_ id: ObjectID, _ sql: SQLiteConnection) throws -> (entry: BucketEntry, sequence: Int)? {
        try sql.first("SELECT \(columns), seq FROM view WHERE collection = ? AND key = ?", [.text(id.collection), .text(id.key)]) {
            (try entry(from: $0, at: 0), Int($0.int(8)))
        }
    }

    private static func write(_ entry: BucketEntry, sequence: Int, _ sql: SQLiteConnection) throws {
        try sql.run(
            "INSERT OR REPLACE INTO view(\(columns), seq) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)", bindings(entry) + [.integer(Int64(sequence))])
    }

    /// The view's rows for `ids` (nil where it has none).
    package func shown(_ ids: [ObjectID]) throws -> [ReplicaEntry?] {
        try db.withLock { sql in try ids.map { id in try Self.viewRow(id, sql).map { $0.entry.replicaEntry(sequence: $0.sequence) } } }
    }

    /// Up to `limit` view rows after `id` in (collection, key) byte order, as a store lists its manifest.
    package func shown(after id: ObjectID?, limit: Int) throws -> [ReplicaEntry] {
        let (condition, bindings): (String, [SQLValue]) =
            if let id { ("WHERE collection > ? OR (collection = ? AND key > ?)", [.text(id.collection), .text(id.collection), .text(id.key)]) } else {
                ("", [])
            }
        return try rows("SELECT \(Self.columns), seq FROM view \(condition) ORDER BY collection, key LIMIT \(limit)", bindings)
    }

    /// Up to `limit` view rows changed after `after` and no later than `through`, in change order.
    package func shown(changedAfter after: Int, through: Int, limit: Int) throws -> [ReplicaEntry] {
        try rows(
            "SELECT \(Self.columns), seq FROM view WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT \(limit)",
            [.integer(Int64(after)), .integer(Int64(through))])
    }

    private func rows(_ query: String, _ bindings: [SQLValue]) throws -> [ReplicaEntry] {
        try db.withLock { sql in
            var rows: [ReplicaEntry] = []
            try sql.query(query, bindings) { rows.append(try Self.entry(from: $0, at: 0).replicaEntry(sequence: Int($0.int(8)))) }
            return rows
        }
    }

    package func liveCount() throws -> Int {
        try db.withLock { try $0.first("SELECT count(*) FROM view WHERE hash IS NOT NULL") { Int($0.int(0)) } ?? 0 }
    }

    /// The hashes among `hashes` whose blobs are known to be in the bucket: those a version of
    /// the fold references. A blob only older versions referenced may have been deleted by a
    /// compaction (docs/bucket.md), so a push writes it again.
    package func knownBlobs(_ hashes: [ContentHash]) throws -> Set<ContentHash> {
        try db.withLock { sql in
            Set(try hashes.filter { try sql.first("SELECT 1 FROM versions WHERE hash = ?", [.blob($0.bytes)]) { _ in true } ?? false })
        }
    }

    /// How far the bucket replica has merged `peer`'s changes (a store's change sequence).
    package func checkpoint(for peer: ReplicaID) throws -> Int? {
        try db.withLock { try $0.first("SELECT seq FROM peers WHERE replica = ?", [.text(peer.rawValue)]) { Int($0.int(0)) } }
    }

    package func setCheckpoint(for peer: ReplicaID, to sequence: Int) throws {
        try db.withLock { sql in
            // A no-op sync moves nothing: no commit, so no flush of the cache's journal.
            let known = try sql.first("SELECT seq FROM peers WHERE replica = ?", [.text(peer.rawValue)]) { Int($0.int(0)) }
            guard known != sequence else { return }
            try sql.run("INSERT OR REPLACE INTO peers(replica, seq) VALUES(?, ?)", [.text(peer.rawValue), .integer(Int64(sequence))])
        }
    }
}

/// How far one replica's log has been read.
package struct LogPosition: Sendable, Equatable {
    /// The last entry folded.
    package var last: Int
    /// The key of the segment that holds it: the next listing starts after it.
    package var key: String
}
