import Foundation

// The manifest's rows as Swift values. Each record that is read from a row names its columns
// here, beside the `init(row:)` that reads them by position: a query selects
// `Record.columns`, so the positions are defined once.

/// The manifest's row for one object: what the store believes is on disk.
///
/// Client modules see the fields a replica compares (``ArchiveStore/objectRecords(for:)``).
package struct ObjectRecord: Sendable {
    package var id: ObjectID
    /// The object's file name in its collection's directory.
    package var file: String
    var version: Int
    package var vector: VersionVector
    /// The recorded contents' hash; a tombstone may keep its last one.
    package var hash: ContentHash?
    package var size: Int
    var stamp: FileStamp?
    /// The stamp was taken so soon after the file's mtime that a same-size rewrite within the
    /// same clock tick would not change it; the next scan hashes the file whatever its stamp.
    var racy: Bool
    /// When the current version was made, in nanoseconds since 1970, as its author recorded it.
    package var modified: Int64
    package var isDeleted: Bool
    var schemaVersion: Int?
    /// The change sequence of this store at which the row last changed.
    package var sequence: Int
    /// The replica that made the current version.
    package var replica: ReplicaID

    /// The columns ``init(row:)`` reads, in its order.
    static let columns = """
        collection, key, file, version, vector, hash, size, stamp_size, stamp_mtime, stamp_inode, racy, modified, deleted, schema, seq, replica, kind, origin
        """
    /// ``columns`` one by one; the first two are the row's key (the upsert updates the rest).
    static let columnNames = columns.split(separator: ",").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }

    /// A row selected as ``columns``.
    init(row: SQLiteRow) {
        let stamp = row.optionalInt(7).map { size in
            FileStamp(size: size, mtimeNanoseconds: row.int(8), inode: UInt64(bitPattern: row.int(9)))
        }
        id = ObjectID(unchecked: row.text(0), key: row.text(1))
        file = row.text(2)
        version = Int(row.int(3))
        vector = VersionVector(parsing: row.text(4)) ?? VersionVector()
        hash = row.isNull(5) ? nil : ContentHash(bytes: row.blob(5))
        size = Int(row.int(6))
        self.stamp = stamp
        racy = row.int(10) != 0
        modified = row.int(11)
        isDeleted = row.int(12) != 0
        schemaVersion = row.optionalInt(13).map { Int($0) }
        sequence = Int(row.int(14))
        replica = ReplicaID(rawValue: row.text(15))
    }
}

extension ObjectVersion {
    /// The columns of a `history` row ``init(row:)`` reads, in its order.
    static let columns = "version, hash, size, modified, replica, vector, deleted, file, schema"

    /// A history row selected as ``columns``.
    init(row: SQLiteRow) {
        self.init(
            version: Int(row.int(0)),
            hash: row.isNull(1) ? nil : ContentHash(bytes: row.blob(1)),
            size: Int(row.int(2)),
            date: Date(timeIntervalSince1970: Double(row.int(3)) / 1e9),
            replica: ReplicaID(rawValue: row.text(4)),
            vector: VersionVector(parsing: row.text(5)) ?? VersionVector(),
            isDeleted: row.int(6) != 0,
            file: row.text(7),
            schemaVersion: row.optionalInt(8).map { Int($0) })
    }
}

/// The part of a manifest row a scan compares, read from the row as it is used: valid only in
/// the ``ManifestTransaction/forEachStamp(in:_:)`` call that gives it.
struct StampRow {
    fileprivate let row: SQLiteRow

    /// The columns the accessors below read, in their order.
    static let columns = "file, key, stamp_size, stamp_mtime, stamp_inode, racy, deleted"

    /// A row selected as ``columns``.
    init(row: SQLiteRow) { self.row = row }

    var file: String { row.text(0) }
    /// Calls `body` with the file name's bytes, without making a `String`.
    func withFile<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R { try row.withText(0, body) }
    var key: String { row.text(1) }
    var stamp: FileStamp? {
        row.optionalInt(2).map { FileStamp(size: $0, mtimeNanoseconds: row.int(3), inode: UInt64(bitPattern: row.int(4))) }
    }
    var racy: Bool { row.int(5) != 0 }
    var isDeleted: Bool { row.int(6) != 0 }
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
    /// A version another replica made (a sync's): its version vector, modification time and
    /// author, kept as they are instead of this replica's counter being incremented.
    var incoming: ReplicatedVersion? = nil
}
