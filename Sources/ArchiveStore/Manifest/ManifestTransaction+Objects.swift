import ArchiveLocking
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

extension ManifestTransaction {
    // MARK: Objects

    /// The row for `id`, tombstone or not.
    func object(_ id: ObjectID) throws -> ObjectRecord? {
        try db.first(
            "SELECT \(ObjectRecord.columns) FROM objects WHERE collection = ? AND key = ?", [.text(id.collection), .text(id.key)],
            ObjectRecord.init(row:))
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
            try db.query("SELECT \(ObjectRecord.columns) FROM objects WHERE collection = ? ORDER BY key", [.text(collection)]) {
                records.append(ObjectRecord(row: $0))
            }
        } else {
            try db.query("SELECT \(ObjectRecord.columns) FROM objects ORDER BY collection, key") { records.append(ObjectRecord(row: $0)) }
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

    /// The objects whose rows a write of the store changed after `sequence`: a save's, a
    /// sync's, a restore's, not a scan's (whose file was found on disk, not put there).
    func writtenObjects(after sequence: Int) throws -> [ObjectID] {
        var ids: [ObjectID] = []
        try db.query(
            "SELECT collection, key FROM objects WHERE seq > ? AND (origin IS NULL OR origin != ?)",
            [.integer(Int64(sequence)), .text(StoreChange.Origin.external.rawValue)]
        ) { ids.append(ObjectID(unchecked: $0.text(0), key: $0.text(1))) }
        return ids
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
        try db.query("SELECT \(StampRow.columns) FROM objects WHERE collection = ?", [.text(collection)]) {
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
        try db.first(
            "SELECT \(ObjectRecord.columns) FROM objects WHERE collection = ? AND file = ?", [.text(collection), .text(file)], ObjectRecord.init(row:)
        )
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
    /// The bytes live in the history row, appended with the commit's other rows (a rowid
    /// table; see the step "history in a rowid table"), where a table keyed by content hash
    /// would put each one on a random page of its own (one page written per object: about a
    /// quarter of a first sync's time).
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
        // Both rows store it: made once (sorting and joining the counters is a save's cost).
        let vectorText = SQLValue.text(vector.description)
        try db.run(
            Self.upsertObject,
            [
                .text(change.id.collection), .text(change.id.key), .text(change.file), .integer(Int64(version)), vectorText,
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
            Self.insertHistory,
            [
                .text(change.id.collection), .text(change.id.key), .integer(Int64(version)), .text(change.file), hashValue, .integer(Int64(size)),
                .integer(modified), .integer(change.content == nil ? 1 : 0), .text(author.rawValue), vectorText, schemaValue,
                change.content.map { .blob($0) } ?? .null,
            ])
        // A first version has nothing to prune (the limit is at least 1): a new object's save
        // skips reading the limit, a statement of its own.
        if version > 1, case let limit = try historyLimit(), version > limit {
            // While a settle is due, every version that a power cut may still leave on disk
            // stays: recovery knows such a file by its hash (``ArchiveStore/restoreCommitted``).
            // The next write after the settle drops them; ``history(_:unsettled:)`` hides them.
            if let after = try unsettledAfter() {
                if let existing, existing.sequence <= after {
                    try prune(change.id, keepingFrom: min(version - limit + 1, existing.version))
                }
            } else {
                try prune(change.id, keepingFrom: version - limit + 1)
            }
        }
        let recordedChange = StoreChange(id: change.id, kind: kind, version: version, origin: change.origin, sequence: sequence)
        recorded.append(recordedChange)
        return recordedChange
    }

    /// The object's row made anew, or changed where it stands: an `INSERT OR REPLACE` deleted
    /// the row before inserting it again, and searched it a third time for the `created_seq` it
    /// kept (a sync's page records 1,000 rows in one transaction). `created_seq` is kept unless
    /// the change begins a new life.
    private static let upsertObject = """
        INSERT INTO objects(\(ObjectRecord.columns), created_seq)
        VALUES(\(Array(repeating: "?", count: ObjectRecord.columnNames.count + 1).joined(separator: ", ")))
        ON CONFLICT(collection, key) DO UPDATE SET
            \(ObjectRecord.columnNames.dropFirst(2).map { "\($0) = excluded.\($0)" }.joined(separator: ", ")),
            created_seq = coalesce(excluded.created_seq, created_seq)
        """

    /// A version's history row, its columns named where the table is made.
    private static let insertHistory = "INSERT INTO history(\(Manifest.historyColumns)) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

    /// Records that `existing`'s file is gone: a tombstone version. Nothing when it is
    /// already a tombstone.
    @discardableResult
    func recordDelete(of existing: ObjectRecord?, origin: StoreChange.Origin, incoming: ReplicatedVersion? = nil) throws -> StoreChange? {
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
}
