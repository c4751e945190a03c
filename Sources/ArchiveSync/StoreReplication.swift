import ArchiveStore
import Foundation

// What a sync keeps in and reads from a store: its checkpoints (a table of its own in the
// manifest, installed as a ``StoreExtension``), the manifest's records as replica entries,
// and the store's conditional writes as incoming objects.

/// Sync's extension of a store's manifest: per peer, the change sequence of that peer through
/// which this store has merged its changes.
let syncTables = StoreExtension(
    name: "ArchiveSync",
    steps: [
        // The definition stores made before extensions were recorded already have, so that
        // their table (and their checkpoints) are adopted as they are.
        (
            "peers",
            """
            CREATE TABLE IF NOT EXISTS peers(
                replica TEXT PRIMARY KEY,
                seq INTEGER NOT NULL,
                updated INTEGER NOT NULL
            ) WITHOUT ROWID;
            """
        )
    ])

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

    init(_ row: ComparedRow) {
        let isDeleted = row.isDeleted
        self.init(
            id: row.id, file: row.file, vector: row.vector, hash: isDeleted ? nil : row.hash, size: row.size, modified: row.modified,
            author: row.replica, isDeleted: isDeleted, sequence: row.sequence)
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

extension ArchiveStore {
    /// Up to `limit` manifest rows after `id` (from the start when nil), tombstones included,
    /// in (collection, key) byte order: a full diff walks both stores this way in step.
    package func replicaEntries(after id: ObjectID?, limit: Int) throws -> [ReplicaEntry] {
        try objectRows(after: id, limit: limit, ReplicaEntry.init)
    }

    /// Up to `limit` rows changed after sequence `after` and no later than `through`, in sequence order.
    package func replicaEntries(changedAfter after: Int, through: Int, limit: Int) throws -> [ReplicaEntry] {
        try objectRows(changedAfter: after, through: through, limit: limit, ReplicaEntry.init)
    }

    /// The rows of `ids` (nil where there is none), read under one snapshot.
    package func replicaEntries(for ids: [ObjectID]) throws -> [ReplicaEntry?] {
        try objectRows(for: ids, ReplicaEntry.init)
    }

    /// The bytes of `entry`'s file, or nil when they no longer hash to `entry.hash` (the
    /// object changed since the manifest was read), the file is gone, or the row names a file
    /// no write makes.
    package func contents(of entry: ReplicaEntry) throws -> Data? {
        try contents(of: entry.id, file: entry.file, hash: entry.hash)
    }

    /// Writes a sync's objects with one durability barrier, each with the version vector,
    /// time and author its other replica recorded. An object that no longer holds what
    /// ``IncomingVersion/expected`` says (in the manifest or, not yet scanned, on disk) is
    /// left alone: nothing written since the sync planned is ever overwritten.
    ///
    /// - Returns: for each object, whether it was written (or already stored exactly so).
    package func applyIncoming(_ objects: [IncomingObject]) throws -> [Bool] {
        let writes = objects.map { object in
            ConditionalWrite(
                id: object.id, fileExtension: object.fileExtension, content: object.content, expected: object.version.expected,
                version: ReplicatedVersion(vector: object.version.vector, modified: object.version.modified, author: object.version.author))
        }
        return try applyConditional(writes).map { $0 != nil }
    }

    /// Sets the version vectors of objects both replicas hold alike; an object whose contents
    /// are no longer `hash` is left alone. No new version (the contents did not change), but
    /// a new change sequence, so that the merged vector reaches the store's other peers.
    package func mergeVectors(_ merges: [VectorMerge]) throws {
        try setVectors(merges.map { ($0.id, $0.hash, $0.vector) }, origin: .sync)
    }

    /// The change sequence of `peer` through which this store has merged its changes, or nil
    /// when the two have never completed a sync.
    package func checkpoint(for peer: ReplicaID) throws -> Int? {
        try install(syncTables)
        return try readManifest { sql in try sql.first("SELECT seq FROM peers WHERE replica = ?", [.text(peer.rawValue)]) { Int($0.int(0)) } }
    }

    /// Records that this store has merged `peer`'s changes through `sequence`. A checkpoint
    /// already there is not written again: a sync that found nothing to do commits nothing
    /// (a commit waits for the disk, and for the manifest's write lock a watcher may hold).
    package func setCheckpoint(for peer: ReplicaID, to sequence: Int) throws {
        guard try checkpoint(for: peer) != sequence else { return }
        try writeManifest { sql in
            try sql.run(
                "INSERT OR REPLACE INTO peers(replica, seq, updated) VALUES(?, ?, ?)",
                [.text(peer.rawValue), .integer(Int64(sequence)), .integer(Int64(Date().timeIntervalSince1970 * 1e9))])
        }
    }

    /// The sequence a peer's checkpoint can move to after a sync that read this store's
    /// changes through `sequence` and then wrote into it: the last sequence before the first
    /// change made by anyone but a sync (whose writes the peer already holds).
    package func sequenceAfterOwnWrites(since sequence: Int) throws -> Int {
        try self.sequence(before: sequence, firstChangeNotMadeBy: .sync)
    }
}
