import Foundation

#if canImport(Glibc)
    import Glibc
#endif

// The core tables as client modules read and change them beyond saves and removes: listings of
// the manifest's object records, the change sequence, and version vectors.

/// The columns of an object's manifest row that a replica compares, read from the row as they
/// are used: valid only in the call that gives it. (A sync lists every row of both stores:
/// reading all of ``ObjectRecord``'s columns instead made a no-op sync of 100,000 objects
/// about 20% slower.)
package struct ComparedRow {
    fileprivate let row: SQLiteRow

    /// The columns the accessors below read, in their order.
    fileprivate static let columns = "collection, key, file, vector, hash, size, modified, replica, deleted, seq"

    package var id: ObjectID { ObjectID(unchecked: row.text(0), key: row.text(1)) }
    /// The object's file name in its collection's directory.
    package var file: String { row.text(2) }
    package var vector: VersionVector { VersionVector(parsing: row.text(3)) ?? VersionVector() }
    /// The recorded contents' hash; nil for a tombstone.
    package var hash: ContentHash? { isDeleted || row.isNull(4) ? nil : ContentHash(bytes: row.blob(4)) }
    package var size: Int { Int(row.int(5)) }
    /// When the current version was made, in nanoseconds since 1970, as its author recorded it.
    package var modified: Int64 { row.int(6) }
    /// The replica that made the current version.
    package var replica: ReplicaID { ReplicaID(rawValue: row.text(7)) }
    package var isDeleted: Bool { row.int(8) != 0 }
    /// The change sequence of this store at which the row last changed.
    package var sequence: Int { Int(row.int(9)) }
}

extension ArchiveStore {
    /// Up to `limit` rows after `id` (from the start when nil), tombstones included, in
    /// (collection, key) byte order, each given to `map` as the columns a replica compares.
    package func objectRows<T: Sendable>(after id: ObjectID?, limit: Int, _ map: (ComparedRow) -> T) throws -> [T] {
        try withManifest {
            try $0.read { tx in
                var rows: [T] = []
                if let id {
                    try tx.db.query(
                        "SELECT \(ComparedRow.columns) FROM objects WHERE (collection, key) > (?, ?) ORDER BY collection, key LIMIT ?",
                        [.text(id.collection), .text(id.key), .integer(Int64(limit))]
                    ) { rows.append(map(ComparedRow(row: $0))) }
                } else {
                    try tx.db.query("SELECT \(ComparedRow.columns) FROM objects ORDER BY collection, key LIMIT ?", [.integer(Int64(limit))]) {
                        rows.append(map(ComparedRow(row: $0)))
                    }
                }
                return rows
            }
        }
    }

    /// Up to `limit` rows that changed after sequence `after` and no later than `through`, in
    /// sequence order, each given to `map` as the columns a replica compares.
    package func objectRows<T: Sendable>(changedAfter after: Int, through: Int, limit: Int, _ map: (ComparedRow) -> T) throws -> [T] {
        try withManifest {
            try $0.read { tx in
                var rows: [T] = []
                try tx.db.query(
                    "SELECT \(ComparedRow.columns) FROM objects WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
                    [.integer(Int64(after)), .integer(Int64(through)), .integer(Int64(limit))]
                ) { rows.append(map(ComparedRow(row: $0))) }
                return rows
            }
        }
    }

    /// The rows of `ids` (nil where there is none), read under one snapshot, each given to
    /// `map` as the columns a replica compares.
    package func objectRows<T: Sendable>(for ids: [ObjectID], _ map: (ComparedRow) -> T) throws -> [T?] {
        try withManifest {
            try $0.read { tx in
                try ids.map { id in
                    try tx.db.first(
                        "SELECT \(ComparedRow.columns) FROM objects WHERE collection = ? AND key = ?", [.text(id.collection), .text(id.key)]
                    ) { map(ComparedRow(row: $0)) }
                }
            }
        }
    }

    /// The records of `ids` (nil where there is none), read under one snapshot.
    package func objectRecords(for ids: [ObjectID]) throws -> [ObjectRecord?] {
        try withManifest { try $0.read { tx in try ids.map { try tx.object($0) } } }
    }

    /// The bytes of `id`'s `file`, or nil when they no longer hash to `hash` (the object changed
    /// since its record was read), the file is gone, or the record names a file no write makes
    /// (a damaged row, which is not followed; a scan repairs it).
    package func contents(of id: ObjectID, file: String, hash: ContentHash?) throws -> Data? {
        guard let hash, FileName.problem(withFile: file, ofKey: id.key) == nil else { return nil }
        let relative = FileName.encode(id.collection).appendingComponent(file)
        do {
            guard let data = try FileSystem.readFile(relative, in: root, path: path.appendingComponent(relative)) else { return nil }
            return ContentHash(of: data) == hash ? data : nil
        } catch let error as SystemCallError where error.errno == ENOTDIR || error.errno == ELOOP {
            return nil
        } catch {
            throw ArchiveError.wrap(error)
        }
    }

    /// Sets the version vectors of objects whose contents are still `hash` (nil: a tombstone);
    /// any other is left alone. No new version (the contents do not change), but a new change
    /// sequence, with `origin`, so that the vector reaches whoever follows the store's changes.
    package func setVectors(_ updates: [(id: ObjectID, hash: ContentHash?, vector: VersionVector)], origin: StoreChange.Origin) throws {
        guard !updates.isEmpty else { return }
        try requireRecovered()
        try withManifest {
            try $0.write { tx in
                for update in updates {
                    guard let row = try tx.object(update.id), row.isDeleted == (update.hash == nil), row.isDeleted || row.hash == update.hash
                    else { continue }
                    guard row.vector != update.vector else { continue }
                    try tx.db.run(
                        "UPDATE objects SET vector = ?, seq = ?, origin = ? WHERE collection = ? AND key = ?",
                        [
                            .text(update.vector.description), .integer(Int64(try tx.nextSequence())), .text(origin.rawValue),
                            .text(update.id.collection), .text(update.id.key),
                        ])
                }
            }
        }
    }

    /// The store's change sequence: how many changes it has recorded.
    package func changeSequence() throws -> Int {
        try withManifest { try $0.read { try $0.currentSequence() } }
    }

    /// The last sequence before the first change after `sequence` that `origin` did not make;
    /// the current sequence when `origin` made every change since.
    package func sequence(before sequence: Int, firstChangeNotMadeBy origin: StoreChange.Origin) throws -> Int {
        try withManifest {
            try $0.read { tx in
                let firstOther = try tx.db.first(
                    "SELECT min(seq) FROM objects WHERE seq > ? AND coalesce(origin, '') != ?", [.integer(Int64(sequence)), .text(origin.rawValue)]
                ) { $0.isNull(0) ? nil : Int($0.int(0)) }
                if let firstOther = firstOther ?? nil { return firstOther - 1 }
                return try tx.currentSequence()
            }
        }
    }

    /// How many live objects the store holds, as the manifest records them (no scan, no
    /// watcher probe: one read of the manifest).
    public func liveObjectCount() throws -> Int {
        try withManifest { try $0.read { try $0.totals().objects } }
    }
}
