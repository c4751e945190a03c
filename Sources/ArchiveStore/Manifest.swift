import ArchiveLocking
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The manifest's row for one object: what the store believes is on disk.
struct ObjectRecord: Sendable {
    var id: ObjectID
    var file: String
    var version: Int
    var vector: VersionVector
    var hash: ContentHash?
    var size: Int
    var stamp: FileStamp?
    /// The stamp was taken so soon after the file's mtime that a same-size rewrite within the
    /// same clock tick would not change it; the next scan hashes the file whatever its stamp.
    var racy: Bool
    var modified: Int64
    var isDeleted: Bool
    var schemaVersion: Int?
    var sequence: Int
    var replica: ReplicaID
}

/// A write in flight: recorded before its temp file exists, removed when the manifest has
/// recorded the write. One left behind by a dead process tells the next open exactly which
/// temp files to remove and which objects to reconcile.
struct WriteIntent: Sendable {
    struct Entry: Codable, Sendable, Equatable {
        var collection: String
        var key: String
        /// The file to write, or "" for a delete.
        var file: String
        var temp: String?
        /// The new contents' hash: finding it in `file` tells recovery that the rename happened.
        var hash: ContentHash?
        var schemaVersion: Int?
        /// A sync's write: the version as its other replica recorded it, which recovery
        /// records too (rather than taking a landed sync write for this replica's own edit).
        var vector: VersionVector? = nil
        var modified: Int64? = nil
        var author: ReplicaID? = nil

        /// The sync's version this write carries, if it is a sync's.
        var incoming: IncomingVersion? {
            guard let vector, let modified, let author else { return nil }
            return IncomingVersion(vector: vector, modified: modified, author: author, expected: nil)
        }
    }

    var id: Int64
    var owner: ProcessIdentity
    /// nil when the recorded entries cannot be read, or name something no write of the store
    /// makes (an invalid id, a file that is not the key's, a temp name that is not one): a
    /// damaged manifest's record, which recovery must not follow by name.
    var entries: [Entry]?
}

extension WriteIntent.Entry {
    /// Whether this entry names only what a write of the store makes: a valid id, the key's
    /// own file name (or "" for a delete) and a temp file name, each one name in the
    /// collection's directory.
    var isWellFormed: Bool {
        guard ObjectID.problem(with: collection, isCollection: true) == nil, ObjectID.problem(with: key, isCollection: false) == nil
        else { return false }
        if !file.isEmpty, FileName.problem(withFile: file, ofKey: key) != nil { return false }
        if let temp, !temp.hasPrefix(FileName.tempPrefix) || temp.contains("/") { return false }
        return true
    }

    /// `entries` as the JSON that `JSONEncoder` makes of them (nil fields left out), written
    /// directly: a sync records an intent of 1,000 entries per page, and `JSONEncoder` took 6%
    /// of a first sync's time doing it. Read back with `JSONDecoder`.
    static func json(_ entries: [Self]) -> String {
        let hexDigits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(entries.count * 256)
        func string(_ value: String) {
            out.append(UInt8(ascii: "\""))
            for byte in value.utf8 {
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                    out += [UInt8(ascii: "\\"), byte]
                case 0..<0x20:
                    out += Array("\\u00".utf8) + [hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0xF)]]
                default:
                    out.append(byte)
                }
            }
            out.append(UInt8(ascii: "\""))
        }
        func field(_ name: String, first: Bool = false) {
            if !first { out.append(UInt8(ascii: ",")) }
            string(name)
            out.append(UInt8(ascii: ":"))
        }
        out.append(UInt8(ascii: "["))
        for (index, entry) in entries.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "{"))
            field("collection", first: true)
            string(entry.collection)
            field("key")
            string(entry.key)
            field("file")
            string(entry.file)
            if let temp = entry.temp {
                field("temp")
                string(temp)
            }
            if let hash = entry.hash {
                field("hash")
                string(hash.description)
            }
            if let schemaVersion = entry.schemaVersion {
                field("schemaVersion")
                out += Array(String(schemaVersion).utf8)
            }
            if let vector = entry.vector {
                field("vector")
                out.append(UInt8(ascii: "{"))
                for (position, (replica, counter)) in vector.counters.enumerated() {
                    if position > 0 { out.append(UInt8(ascii: ",")) }
                    string(replica.rawValue)
                    out.append(UInt8(ascii: ":"))
                    out += Array(String(counter).utf8)
                }
                out.append(UInt8(ascii: "}"))
            }
            if let modified = entry.modified {
                field("modified")
                out += Array(String(modified).utf8)
            }
            if let author = entry.author {
                field("author")
                string(author.rawValue)
            }
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
        return String(decoding: out, as: UTF8.self)
    }
}

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

/// What one call to ``ManifestTransaction/record(_:)`` records.
struct RecordedChange {
    var id: ObjectID
    var file: String
    /// nil for a delete.
    var content: Data?
    var hash: ContentHash?
    var stamp: FileStamp?
    var schemaVersion: Int?
    var origin: StoreChange.Origin
    /// A sync's: the version vector and modification time the other replica recorded, kept
    /// as they are instead of this replica's counter being incremented.
    var incoming: IncomingVersion? = nil
}

/// The manifest inside one transaction. Valid only inside ``Manifest/read(_:)`` or ``Manifest/write(_:)``.
final class ManifestTransaction {
    /// The connection, for the manifest's other tables (sync checkpoints, cache metadata),
    /// each defined in the file that uses it.
    let db: SQLiteConnection
    let replica: ReplicaID
    private var sequence: Int?
    private var cachedHistoryLimit: Int?
    /// Every change recorded in this transaction, published when it commits.
    private(set) var recorded: [StoreChange] = []
    private let now = Manifest.now()

    fileprivate init(db: SQLiteConnection, replica: ReplicaID) {
        self.db = db
        self.replica = replica
    }

    /// How many versions of each object history keeps: read in each transaction, because
    /// another process may have changed it.
    func historyLimit() throws -> Int {
        if let cachedHistoryLimit { return cachedHistoryLimit }
        let limit = try meta("history_limit").flatMap { Int($0) } ?? Manifest.defaultHistoryLimit
        cachedHistoryLimit = limit
        return limit
    }

    // MARK: Meta

    func meta(_ name: String) throws -> String? { try db.meta(name) }

    func setMeta(_ name: String, _ value: String) throws { try db.setMeta(name, value) }

    /// The store-wide change sequence: the number of changes ever recorded. Objects keep
    /// their rows as tombstones, so the largest `seq` of any row is the latest change.
    func currentSequence() throws -> Int {
        if let sequence { return sequence }
        let stored = try db.first("SELECT coalesce(max(seq), 0) FROM objects") { Int($0.int(0)) } ?? 0
        sequence = stored
        return stored
    }

    /// Takes the next change sequence number for a row that changes in this transaction.
    func nextSequence() throws -> Int {
        let next = try currentSequence() + 1
        sequence = next
        return next
    }

    // MARK: Objects

    private static let objectColumns = """
        collection, key, file, version, vector, hash, size, stamp_size, stamp_mtime, stamp_inode, racy, modified, deleted, schema, seq, replica, kind, origin
        """

    private func objectRecord(_ row: SQLiteRow) -> ObjectRecord {
        let stamp = row.optionalInt(7).map { size in
            FileStamp(size: size, mtimeNanoseconds: row.int(8), inode: UInt64(bitPattern: row.int(9)))
        }
        return ObjectRecord(
            id: ObjectID(unchecked: row.text(0), key: row.text(1)),
            file: row.text(2),
            version: Int(row.int(3)),
            vector: VersionVector(parsing: row.text(4)) ?? VersionVector(),
            hash: row.isNull(5) ? nil : ContentHash(bytes: row.blob(5)),
            size: Int(row.int(6)),
            stamp: stamp,
            racy: row.int(10) != 0,
            modified: row.int(11),
            isDeleted: row.int(12) != 0,
            schemaVersion: row.optionalInt(13).map { Int($0) },
            sequence: Int(row.int(14)),
            replica: ReplicaID(rawValue: row.text(15)))
    }

    /// The row for `id`, tombstone or not.
    func object(_ id: ObjectID) throws -> ObjectRecord? {
        try db.first(
            "SELECT \(Self.objectColumns) FROM objects WHERE collection = ? AND key = ?", [.text(id.collection), .text(id.key)], objectRecord)
    }

    /// The file of `id`'s live object, or nil when there is none: the only file a read returns.
    func liveFile(of id: ObjectID) throws -> String? {
        try db.first("SELECT file FROM objects WHERE collection = ? AND key = ? AND deleted = 0", [.text(id.collection), .text(id.key)]) {
            $0.text(0)
        }
    }

    /// Every row in `collection` (or in the store), tombstones included, in key order.
    func objects(in collection: String?) throws -> [ObjectRecord] {
        var records: [ObjectRecord] = []
        if let collection {
            try db.query("SELECT \(Self.objectColumns) FROM objects WHERE collection = ? ORDER BY key", [.text(collection)]) {
                records.append(objectRecord($0))
            }
        } else {
            try db.query("SELECT \(Self.objectColumns) FROM objects ORDER BY collection, key") { records.append(objectRecord($0)) }
        }
        return records
    }

    /// The keys of live objects in `collection`, sorted.
    func keys(in collection: String) throws -> [String] {
        var keys: [String] = []
        try db.query("SELECT key FROM objects WHERE collection = ? AND deleted = 0 ORDER BY key", [.text(collection)]) { keys.append($0.text(0)) }
        return keys
    }

    /// True when `collection` has any row, tombstones included.
    func hasObjects(in collection: String) throws -> Bool {
        try db.first("SELECT 1 FROM objects WHERE collection = ? LIMIT 1", [.text(collection)]) { _ in true } ?? false
    }

    /// The latest change of every object changed after `sequence`, by any process, in
    /// sequence order, each with the sequence of the change that began the object's current
    /// life (its creation, or its re-creation after a delete) when known. Changes recorded by
    /// another process are `external` (or `sync`) here.
    func changes(after sequence: Int) throws -> [(change: StoreChange, lifeBegan: Int?)] {
        var changes: [(change: StoreChange, lifeBegan: Int?)] = []
        try db.query(
            "SELECT collection, key, version, deleted, seq, kind, origin, created_seq FROM objects WHERE seq > ? ORDER BY seq",
            [.integer(Int64(sequence))]
        ) { row in
            let version = Int(row.int(2))
            let derived: StoreChange.Kind = row.int(3) != 0 ? .deleted : version == 1 ? .created : .modified
            let kind = row.isNull(5) ? derived : StoreChange.Kind(rawValue: row.text(5)) ?? derived
            let origin: StoreChange.Origin = !row.isNull(6) && row.text(6) == StoreChange.Origin.sync.rawValue ? .sync : .external
            let change = StoreChange(
                id: ObjectID(unchecked: row.text(0), key: row.text(1)), kind: kind, version: version, origin: origin, sequence: Int(row.int(4)))
            changes.append((change, row.optionalInt(7).map { Int($0) }))
        }
        return changes
    }

    /// Every collection with at least one row.
    func collections() throws -> [String] {
        // One seek per collection along the primary key, not a pass over every row.
        var names: [String] = []
        while let next = try db.first(
            "SELECT collection FROM objects WHERE collection > ? ORDER BY collection LIMIT 1", [.text(names.last ?? "")], { $0.text(0) })
        {
            names.append(next)
        }
        return names
    }

    /// Live objects and their total size.
    func totals() throws -> (objects: Int, bytes: Int) {
        try db.first("SELECT count(*), coalesce(sum(size), 0) FROM objects WHERE deleted = 0") { (Int($0.int(0)), Int($0.int(1))) } ?? (0, 0)
    }

    /// Calls `body` with every row of `collection`, as a scan compares it.
    func forEachStamp(in collection: String, _ body: (StampRow) throws -> Void) throws {
        try db.query("SELECT file, key, stamp_size, stamp_mtime, stamp_inode, racy, deleted FROM objects WHERE collection = ?", [.text(collection)]) {
            try body(StampRow(row: $0))
        }
    }

    /// The row whose file is `file` in `collection`, tombstone or not. A short name is found
    /// by its key; a long (hashed) one, which no key can be read from, by searching the collection.
    func object(holding file: String, in collection: String) throws -> ObjectRecord? {
        if let key = FileName.decode(FileName.split(file).stem) {
            guard let row = try object(ObjectID(unchecked: collection, key: key)), ExactName(row.file) == ExactName(file) else { return nil }
            return row
        }
        guard file.contains(FileName.longMarker) else { return nil }
        return try object(named: file, in: collection)
    }

    /// The row whose file is exactly `file` in `collection`, found by searching the collection:
    /// for a name no key gives (a damaged row's).
    func object(named file: String, in collection: String) throws -> ObjectRecord? {
        try db.first("SELECT \(Self.objectColumns) FROM objects WHERE collection = ? AND file = ?", [.text(collection), .text(file)], objectRecord)
    }

    /// Records a new stamp for an unchanged object (same hash), without a new version.
    func updateStamp(_ id: ObjectID, _ stamp: FileStamp) throws {
        try db.run(
            "UPDATE objects SET stamp_size = ?, stamp_mtime = ?, stamp_inode = ?, racy = ? WHERE collection = ? AND key = ?",
            [
                .integer(stamp.size), .integer(stamp.mtimeNanoseconds), .integer(Int64(bitPattern: stamp.inode)), .integer(isRacy(stamp) ? 1 : 0),
                .text(id.collection), .text(id.key),
            ])
    }

    private func isRacy(_ stamp: FileStamp) -> Bool {
        now - stamp.mtimeNanoseconds < Manifest.racyWindow
    }

    /// Records one change as the object's next version: bumps its version and this replica's
    /// counter in its vector, gives it the next store sequence number, adds a history row
    /// that keeps the contents, and drops versions past retention.
    ///
    /// The bytes live in the history row, whose key is the object's: a batch's rows land
    /// beside the object's other rows, where a table keyed by content hash would put each
    /// one on a random page of its own (one page written per object: about a quarter of a
    /// first sync's time).
    ///
    /// A change whose hash equals the current row's (and is not a delete of a tombstone) is
    /// not a new version: only the stamp (and a newly known schema version) is updated, and
    /// nil is returned.
    ///
    /// - Parameter existing: the object's current row, which the caller has just read.
    @discardableResult
    func record(_ change: RecordedChange, existing: ObjectRecord?) throws -> StoreChange? {
        if let existing {
            let unchanged =
                change.content == nil ? existing.isDeleted : (!existing.isDeleted && existing.hash == change.hash && existing.file == change.file)
            if unchanged {
                if let stamp = change.stamp, stamp != existing.stamp || existing.racy { try updateStamp(change.id, stamp) }
                if let schema = change.schemaVersion, schema != existing.schemaVersion {
                    // The same bytes, now known to be in this schema (a migration that changed nothing).
                    try db.run(
                        "UPDATE objects SET schema = ? WHERE collection = ? AND key = ?",
                        [.integer(Int64(schema)), .text(change.id.collection), .text(change.id.key)])
                }
                return nil
            }
        } else if change.content == nil {
            return nil
        }
        let version = (existing?.version ?? 0) + 1
        let kind: StoreChange.Kind = change.content == nil ? .deleted : (existing == nil || existing!.isDeleted ? .created : .modified)
        var vector = existing?.vector ?? VersionVector()
        if let incoming = change.incoming { vector = incoming.vector } else { vector.increment(replica) }
        let modified = change.incoming?.modified ?? now
        let author = change.incoming?.author ?? replica
        let sequence = try nextSequence()
        let size = change.content?.count ?? 0
        let hashValue: SQLValue = change.hash.map { .blob($0.bytes) } ?? .null
        let schemaValue: SQLValue = change.schemaVersion.map { .integer(Int64($0)) } ?? .null
        let stamp = change.stamp
        try db.run(
            """
            INSERT OR REPLACE INTO objects(\(Self.objectColumns), created_seq)
            VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
                   coalesce(?, (SELECT created_seq FROM objects WHERE collection = ?1 AND key = ?2)))
            """,
            [
                .text(change.id.collection), .text(change.id.key), .text(change.file), .integer(Int64(version)), .text(vector.description),
                hashValue, .integer(Int64(size)),
                stamp.map { .integer($0.size) } ?? .null, stamp.map { .integer($0.mtimeNanoseconds) } ?? .null,
                stamp.map { .integer(Int64(bitPattern: $0.inode)) } ?? .null, .integer(stamp.map { isRacy($0) ? 1 : 0 } ?? 0),
                .integer(modified), .integer(change.content == nil ? 1 : 0), schemaValue, .integer(Int64(sequence)), .text(author.rawValue),
                .text(kind.rawValue), .text(change.origin.rawValue),
                // Where the object's current life began: the change stream reports it as created to
                // readers that last looked before then (see `ChangeFeed`).
                kind == .created ? .integer(Int64(sequence)) : .null,
            ])
        try db.run(
            "INSERT INTO history(collection, key, version, file, hash, size, modified, deleted, replica, vector, schema, data) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                .text(change.id.collection), .text(change.id.key), .integer(Int64(version)), .text(change.file), hashValue, .integer(Int64(size)),
                .integer(modified), .integer(change.content == nil ? 1 : 0), .text(author.rawValue), .text(vector.description), schemaValue,
                change.content.map { .blob($0) } ?? .null,
            ])
        let limit = try historyLimit()
        if version > limit {
            try prune(change.id, keepingFrom: version - limit + 1)
        }
        let recordedChange = StoreChange(id: change.id, kind: kind, version: version, origin: change.origin, sequence: sequence)
        recorded.append(recordedChange)
        return recordedChange
    }

    /// Records that `existing`'s file is gone: a tombstone version. Nothing when it is
    /// already a tombstone.
    @discardableResult
    func recordDelete(of existing: ObjectRecord?, origin: StoreChange.Origin, incoming: IncomingVersion? = nil) throws -> StoreChange? {
        guard let existing, !existing.isDeleted else { return nil }
        return try record(
            RecordedChange(
                id: existing.id, file: existing.file, content: nil, hash: nil, stamp: nil, schemaVersion: existing.schemaVersion, origin: origin,
                incoming: incoming),
            existing: existing)
    }

    private func prune(_ id: ObjectID, keepingFrom version: Int) throws {
        try db.run(
            "DELETE FROM history WHERE collection = ? AND key = ? AND version < ?", [.text(id.collection), .text(id.key), .integer(Int64(version))])
    }

    // MARK: History

    /// The kept versions of `id`, oldest first.
    func history(_ id: ObjectID) throws -> [ObjectVersion] {
        var versions: [ObjectVersion] = []
        try db.query(
            "SELECT version, hash, size, modified, replica, vector, deleted, file, schema FROM history WHERE collection = ? AND key = ? ORDER BY version",
            [.text(id.collection), .text(id.key)]
        ) { row in
            versions.append(
                ObjectVersion(
                    version: Int(row.int(0)),
                    hash: row.isNull(1) ? nil : ContentHash(bytes: row.blob(1)),
                    size: Int(row.int(2)),
                    date: Date(timeIntervalSince1970: Double(row.int(3)) / 1e9),
                    replica: ReplicaID(rawValue: row.text(4)),
                    vector: VersionVector(parsing: row.text(5)) ?? VersionVector(),
                    isDeleted: row.int(6) != 0,
                    file: row.text(7),
                    schemaVersion: row.optionalInt(8).map { Int($0) }))
        }
        return versions
    }

    /// The kept contents of version `version` of `id`; nil for a delete or a dropped version.
    func content(of id: ObjectID, version: Int) throws -> Data? {
        try db.first(
            "SELECT data FROM history WHERE collection = ? AND key = ? AND version = ? AND data IS NOT NULL",
            [.text(id.collection), .text(id.key), .integer(Int64(version))]
        ) { $0.blob(0) }
    }

    /// Calls `body` with every kept version's id, version, recorded hash and contents.
    func forEachContent(_ body: (ObjectID, Int, ContentHash, Data) throws -> Void) throws {
        try db.query("SELECT collection, key, version, hash, data FROM history WHERE data IS NOT NULL AND hash IS NOT NULL") {
            try body(ObjectID(unchecked: $0.text(0), key: $0.text(1)), Int($0.int(2)), ContentHash(bytes: $0.blob(3)), $0.blob(4))
        }
    }

    // MARK: Directories

    /// The stamp of each collection directory whose every entry a scan found to be an object
    /// it recorded, as that scan took it before listing the directory.
    func directoryStamps() throws -> [ExactName: DirectoryStamp] {
        var stamps: [ExactName: DirectoryStamp] = [:]
        try db.query("SELECT name, inode, mtime, ctime FROM directories") {
            stamps[ExactName($0.text(0))] = DirectoryStamp(
                inode: UInt64(bitPattern: $0.int(1)), mtimeNanoseconds: $0.int(2), ctimeNanoseconds: $0.int(3))
        }
        return stamps
    }

    /// Records (or, with nil, forgets) a directory's stamp.
    func setDirectoryStamp(_ name: String, _ stamp: DirectoryStamp?) throws {
        guard let stamp else {
            try db.run("DELETE FROM directories WHERE name = ?", [.text(name)])
            return
        }
        try db.run(
            "INSERT OR REPLACE INTO directories(name, inode, mtime, ctime) VALUES(?, ?, ?, ?)",
            [.text(name), .integer(Int64(bitPattern: stamp.inode)), .integer(stamp.mtimeNanoseconds), .integer(stamp.ctimeNanoseconds)])
    }

    // MARK: Intents

    /// Records writes about to start; returns the intent's id.
    func addIntent(_ entries: [WriteIntent.Entry], owner: ProcessIdentity = .current) throws -> Int64 {
        let text = WriteIntent.Entry.json(entries)
        try db.run("INSERT INTO intents(pid, start, entries) VALUES(?, ?, ?)", [.integer(Int64(owner.pid)), .integer(owner.startTime), .text(text)])
        return try db.first("SELECT last_insert_rowid()") { $0.int(0) } ?? 0
    }

    func removeIntent(_ id: Int64) throws {
        try db.run("DELETE FROM intents WHERE id = ?", [.integer(id)])
    }

    /// Every intent still recorded; one whose entries cannot be read, or are not well formed,
    /// has nil entries.
    func intents() throws -> [WriteIntent] {
        var intents: [WriteIntent] = []
        try db.query("SELECT id, pid, start, entries FROM intents") { row in
            let entries = (try? JSONDecoder().decode([WriteIntent.Entry].self, from: Data(row.text(3).utf8)))
            intents.append(
                WriteIntent(
                    id: row.int(0), owner: ProcessIdentity(pid: Int32(row.int(1)), startTime: row.int(2)),
                    entries: entries.flatMap { $0.allSatisfy(\.isWellFormed) ? $0 : nil }))
        }
        return intents
    }
}

extension SQLiteConnection {
    /// A store setting from the `meta` table.
    func meta(_ name: String) throws -> String? {
        try first("SELECT value FROM meta WHERE name = ?", [.text(name)]) { $0.text(0) }
    }

    func setMeta(_ name: String, _ value: String) throws {
        try run("INSERT OR REPLACE INTO meta(name, value) VALUES(?, ?)", [.text(name), .text(value)])
    }
}
