import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// One object as a replica's manifest records it: what a sync compares between two stores.
package struct ReplicaEntry: Sendable, Hashable, Codable {
    package var id: ObjectID
    /// The object's file name in its collection's directory.
    package var file: String
    package var vector: VersionVector
    /// nil for a tombstone.
    package var hash: ContentHash?
    package var size: Int
    /// When the current version was made, in nanoseconds since 1970, as its author recorded it.
    package var modified: Int64
    /// The replica that made the current version.
    package var author: ReplicaID
    package var isDeleted: Bool
    /// The change sequence of this store at which the row last changed.
    package var sequence: Int

    package init(
        id: ObjectID, file: String, vector: VersionVector, hash: ContentHash?, size: Int, modified: Int64, author: ReplicaID, isDeleted: Bool,
        sequence: Int
    ) {
        self.id = id
        self.file = file
        self.vector = vector
        self.hash = hash
        self.size = size
        self.modified = modified
        self.author = author
        self.isDeleted = isDeleted
        self.sequence = sequence
    }

    init(_ record: ObjectRecord) {
        self.init(
            id: record.id, file: record.file, vector: record.vector, hash: record.isDeleted ? nil : record.hash, size: record.size,
            modified: record.modified, author: record.replica, isDeleted: record.isDeleted, sequence: record.sequence)
    }
}

/// What a sync writes into a store with an object's bytes (or its delete): the other
/// replica's record of the version, and what this store must still hold for it to go ahead.
package struct IncomingVersion: Sendable {
    package var vector: VersionVector
    package var modified: Int64
    package var author: ReplicaID
    /// The content hash of the object this store held when the sync planned; nil when it held
    /// no live object. The write is skipped when the object has changed since.
    package var expected: ContentHash?

    package init(vector: VersionVector, modified: Int64, author: ReplicaID, expected: ContentHash?) {
        self.vector = vector
        self.modified = modified
        self.author = author
        self.expected = expected
    }
}

/// One write a sync asks a store to make: `content` nil for a delete.
package struct IncomingObject: Sendable {
    package var id: ObjectID
    /// The file name's extension, which names the codec (`json`, `plist`).
    package var fileExtension: String
    package var content: Data?
    package var version: IncomingVersion

    package init(id: ObjectID, fileExtension: String, content: Data?, version: IncomingVersion) {
        self.id = id
        self.fileExtension = fileExtension
        self.content = content
        self.version = version
    }
}

/// A merge of version vectors for an object both replicas hold with the same contents.
package struct VectorMerge: Sendable, Codable, Hashable {
    package var id: ObjectID
    /// The contents both hold (nil: both hold a tombstone). Nothing is changed if this
    /// store's object no longer matches.
    package var hash: ContentHash?
    package var vector: VersionVector

    package init(id: ObjectID, hash: ContentHash?, vector: VersionVector) {
        self.id = id
        self.hash = hash
        self.vector = vector
    }
}

extension ManifestTransaction {
    /// The hash of `id`'s live contents; nil when it has no row or a tombstone.
    func liveHash(_ id: ObjectID) throws -> ContentHash? {
        guard let row = try object(id), !row.isDeleted else { return nil }
        return row.hash
    }

    private static let entryColumns = "collection, key, file, vector, hash, size, modified, replica, deleted, seq"

    fileprivate func entry(_ row: SQLiteRow) -> ReplicaEntry {
        let deleted = row.int(8) != 0
        return ReplicaEntry(
            id: ObjectID(unchecked: row.text(0), key: row.text(1)), file: row.text(2),
            vector: VersionVector(parsing: row.text(3)) ?? VersionVector(),
            hash: deleted || row.isNull(4) ? nil : ContentHash(bytes: row.blob(4)), size: Int(row.int(5)), modified: row.int(6),
            author: ReplicaID(rawValue: row.text(7)), isDeleted: deleted, sequence: Int(row.int(9)))
    }

    /// Up to `limit` rows after `id` in (collection, key) byte order, tombstones included.
    func entries(after id: ObjectID?, limit: Int) throws -> [ReplicaEntry] {
        var entries: [ReplicaEntry] = []
        if let id {
            try db.query(
                "SELECT \(Self.entryColumns) FROM objects WHERE (collection, key) > (?, ?) ORDER BY collection, key LIMIT ?",
                [.text(id.collection), .text(id.key), .integer(Int64(limit))]
            ) { entries.append(entry($0)) }
        } else {
            try db.query("SELECT \(Self.entryColumns) FROM objects ORDER BY collection, key LIMIT ?", [.integer(Int64(limit))]) {
                entries.append(entry($0))
            }
        }
        return entries
    }

    /// Up to `limit` rows that changed after sequence `after` and up to `through`, in sequence order.
    func entries(changedAfter after: Int, through: Int, limit: Int) throws -> [ReplicaEntry] {
        var entries: [ReplicaEntry] = []
        try db.query(
            "SELECT \(Self.entryColumns) FROM objects WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?",
            [.integer(Int64(after)), .integer(Int64(through)), .integer(Int64(limit))]
        ) { entries.append(entry($0)) }
        return entries
    }

    /// The row of `id`, if any.
    func entry(_ id: ObjectID) throws -> ReplicaEntry? {
        try db.first("SELECT \(Self.entryColumns) FROM objects WHERE collection = ? AND key = ?", [.text(id.collection), .text(id.key)], entry)
    }
}

extension ArchiveStore {
    /// Up to `limit` manifest rows after `id` (from the start when nil), tombstones included,
    /// in (collection, key) byte order: a full diff walks both stores this way in step.
    package func replicaEntries(after id: ObjectID?, limit: Int) throws -> [ReplicaEntry] {
        try withManifest { try $0.read { try $0.entries(after: id, limit: limit) } }
    }

    /// Up to `limit` rows changed after sequence `after` and no later than `through`, in sequence order.
    package func replicaEntries(changedAfter after: Int, through: Int, limit: Int) throws -> [ReplicaEntry] {
        try withManifest { try $0.read { try $0.entries(changedAfter: after, through: through, limit: limit) } }
    }

    /// The rows of `ids` (nil where there is none), read under one snapshot.
    package func replicaEntries(for ids: [ObjectID]) throws -> [ReplicaEntry?] {
        try withManifest { try $0.read { tx in try ids.map { try tx.entry($0) } } }
    }

    /// The bytes of `entry`'s file, or nil when they no longer hash to `entry.hash` (the
    /// object changed since the manifest was read), the file is gone, or the row names a file
    /// no write makes (a damaged row, which is not followed; a scan repairs it).
    package func contents(of entry: ReplicaEntry) throws -> Data? {
        guard let hash = entry.hash, FileName.problem(withFile: entry.file, ofKey: entry.id.key) == nil else { return nil }
        let relative = FileName.encode(entry.id.collection).appendingComponent(entry.file)
        do {
            guard let data = try FileSystem.readFile(relative, in: root, path: path.appendingComponent(relative)) else { return nil }
            return ContentHash(of: data) == hash ? data : nil
        } catch let error as SystemCallError where error.errno == ENOTDIR || error.errno == ELOOP {
            return nil
        } catch {
            throw ArchiveError.wrap(error)
        }
    }

    /// Writes a sync's objects with one durability barrier, each with the version vector,
    /// time and author its other replica recorded. An object that no longer holds what
    /// ``IncomingVersion/expected`` says (in the manifest or, not yet scanned, on disk) is
    /// left alone: nothing written since the sync planned is ever overwritten.
    ///
    /// - Returns: for each object, whether it was written (or already stored exactly so).
    package func applyIncoming(_ objects: [IncomingObject]) throws -> [Bool] {
        var writes: [PendingWrite] = []
        writes.reserveCapacity(objects.count)
        for object in objects {
            guard ArchiveCodec(fileExtension: object.fileExtension) != nil else {
                throw ArchiveError.invalidInput("\(object.id) has the extension '\(object.fileExtension)', which names no codec")
            }
            let file = FileName.join(stem: FileName.encode(object.id.key), extension: object.fileExtension)
            var write = PendingWrite(id: object.id, file: object.content == nil ? "" : file, content: object.content)
            write.incoming = object.version
            write.condition = WriteCondition(liveHash: object.version.expected)
            writes.append(write)
        }
        return try applyChecked(writes).map { $0 != nil }
    }

    /// Sets the version vectors of objects both replicas hold alike; an object whose contents
    /// are no longer `hash` is left alone. No new version (the contents did not change), but
    /// a new change sequence, so that the merged vector reaches the store's other peers.
    package func mergeVectors(_ merges: [VectorMerge]) throws {
        guard !merges.isEmpty else { return }
        try requireRecovered()
        try withManifest {
            try $0.write { tx in
                for merge in merges {
                    guard let row = try tx.object(merge.id), row.isDeleted == (merge.hash == nil), row.isDeleted || row.hash == merge.hash
                    else { continue }
                    guard row.vector != merge.vector else { continue }
                    try tx.db.run(
                        "UPDATE objects SET vector = ?, seq = ?, origin = 'sync' WHERE collection = ? AND key = ?",
                        [.text(merge.vector.description), .integer(Int64(try tx.nextSequence())), .text(merge.id.collection), .text(merge.id.key)])
                }
            }
        }
    }

    /// The store's change sequence: how many changes it has recorded.
    package func changeSequence() throws -> Int {
        try withManifest { try $0.read { try $0.currentSequence() } }
    }

    /// How many live objects the store holds, as the manifest records them (no scan, no
    /// watcher probe: one read of the manifest).
    public func liveObjectCount() throws -> Int {
        try withManifest { try $0.read { try $0.totals().objects } }
    }

    /// The change sequence of `peer` through which this store has merged its changes, or nil
    /// when the two have never completed a sync.
    package func checkpoint(for peer: ReplicaID) throws -> Int? {
        try withManifest {
            try $0.read { tx in try tx.db.first("SELECT seq FROM peers WHERE replica = ?", [.text(peer.rawValue)]) { Int($0.int(0)) } }
        }
    }

    /// Records that this store has merged `peer`'s changes through `sequence`.
    package func setCheckpoint(for peer: ReplicaID, to sequence: Int) throws {
        try requireRecovered()
        try withManifest {
            try $0.write { tx in
                try tx.db.run(
                    "INSERT OR REPLACE INTO peers(replica, seq, updated) VALUES(?, ?, ?)",
                    [.text(peer.rawValue), .integer(Int64(sequence)), .integer(Manifest.now())])
            }
        }
    }

    /// The sequence a peer's checkpoint can move to after a sync that read this store's
    /// changes through `sequence` and then wrote into it: the last sequence before the first
    /// change made by anyone but a sync (whose writes the peer already holds).
    package func sequenceAfterOwnWrites(since sequence: Int) throws -> Int {
        try withManifest {
            try $0.read { tx in
                let firstOther = try tx.db.first(
                    "SELECT min(seq) FROM objects WHERE seq > ? AND coalesce(origin, '') != 'sync'", [.integer(Int64(sequence))]
                ) { $0.isNull(0) ? nil : Int($0.int(0)) }
                if let firstOther = firstOther ?? nil { return firstOther - 1 }
                return try tx.currentSequence()
            }
        }
    }

    /// True when a watcher holds the store's lease and has caught up with the disk, so the
    /// manifest is current without a scan: it answered a probe through its event queue in
    /// time (see ``WatchProbe``). A stopped or stuck watcher does not.
    package func isKeptCurrentByWatcher() throws -> Bool {
        try watcherHasCaughtUp()
    }
}

/// What an object must hold for a conditional write to go ahead: these live contents, or
/// (nil) no live object.
struct WriteCondition: Sendable {
    var liveHash: ContentHash?
}

/// What a conditional write's target must still look like on disk, checked just before the
/// rename (or unlink) that replaces it: a file changed or created since the last scan, which
/// the manifest has not recorded yet, must not be overwritten either.
enum DiskExpectation: Sendable {
    /// Nothing may stand at this name.
    case absent(String)
    /// The file holds these bytes (its recorded stamp, or failing that its hash, says so).
    case holds(file: String, stamp: FileStamp?, hash: ContentHash?)
}

extension ArchiveStore {
    /// What a conditional write expects on disk, when the manifest still holds what its
    /// condition names; nil when it does not (the write is skipped). Called under the write lock.
    func diskExpectation(of write: PendingWrite, directoryExists: Bool, tx: ManifestTransaction) throws -> DiskExpectation? {
        guard let condition = write.condition else { return nil }
        let live = try tx.object(write.id).flatMap { $0.isDeleted ? nil : $0 }
        guard live?.hash == condition.liveHash else { return nil }
        if let live { return directoryExists ? .holds(file: live.file, stamp: live.stamp, hash: live.hash) : nil }
        return .absent(write.file)
    }

    /// True when the disk still looks as `expectation` says.
    func diskMatches(_ expectation: DiskExpectation, in directory: Descriptor) throws -> Bool {
        switch expectation {
        case .absent(let file):
            return try file.isEmpty || FileSystem.status(file, in: directory, path: directory.path.appendingComponent(file)) == nil
        case .holds(let file, let stamp, let hash):
            let where_ = directory.path.appendingComponent(file)
            guard let status = try FileSystem.status(file, in: directory, path: where_), status.kind == .regular else { return false }
            if status.stamp == stamp { return true }
            // Touched since it was recorded: still as expected only if its bytes are.
            return try FileSystem.readFile(file, in: directory, path: where_).map(ContentHash.init(of:)) == hash
        }
    }
}
