import Foundation

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
