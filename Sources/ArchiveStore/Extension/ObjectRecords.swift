import Foundation

#if canImport(Glibc)
    import Glibc
#endif

// The core tables as client modules read and change them beyond saves and removes: listings of
// the manifest's object records, the change sequence, and version vectors.

extension ArchiveStore {
    /// Up to `limit` records after `id` (from the start when nil), tombstones included, in
    /// (collection, key) byte order.
    package func objectRecords(after id: ObjectID?, limit: Int) throws -> [ObjectRecord] {
        try withManifest {
            try $0.read { tx in
                var records: [ObjectRecord] = []
                if let id {
                    try tx.db.query(
                        "SELECT \(ObjectRecord.columns) FROM objects WHERE (collection, key) > (?, ?) ORDER BY collection, key LIMIT ?",
                        [.text(id.collection), .text(id.key), .integer(Int64(limit))]
                    ) { records.append(ObjectRecord(row: $0)) }
                } else {
                    try tx.db.query("SELECT \(ObjectRecord.columns) FROM objects ORDER BY collection, key LIMIT ?", [.integer(Int64(limit))]) {
                        records.append(ObjectRecord(row: $0))
                    }
                }
                return records
            }
        }
    }

    /// Up to `limit` records that changed after sequence `after` and no later than `through`,
    /// in sequence order.
    package func objectRecords(changedAfter after: Int, through: Int, limit: Int) throws -> [ObjectRecord] {
        try withManifest {
            try $0.read { tx in
                var records: [ObjectRecord] = []
                try tx.db.query(
                    "SELECT \(ObjectRecord.columns) FROM objects WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
                    [.integer(Int64(after)), .integer(Int64(through)), .integer(Int64(limit))]
                ) { records.append(ObjectRecord(row: $0)) }
                return records
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
