import ArchiveStore
import Foundation

// Snapshots and marks (docs/bucket.md, "Compaction"): a snapshot is the fold of every log up to
// a position per log, so that readers need not read the segments it covers; a mark lists the
// objects a compaction will delete once its grace period has passed.

extension BucketLayout {
    package var snapshots: String { prefix + "snapshot/" }
    package func snapshot(_ number: Int) -> String { snapshots + Self.padded(number) }
    package var marks: String { prefix + "marks/" }
    package var blobs: String { prefix + "blobs/" }
    /// The compaction lease: who compacts, until when.
    package var lease: String { prefix + "lease" }

    /// The number of the snapshot `key` names; nil for any other key.
    package func snapshotNumber(_ key: String) -> Int? {
        guard key.hasPrefix(snapshots) else { return nil }
        let digits = key.dropFirst(snapshots.count)
        guard digits.count == 16, digits.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return Int(digits)
    }

    /// The hash a blob's key names; nil for any other key.
    package func blobHash(_ key: String) -> ContentHash? {
        guard key.hasPrefix(blobs) else { return nil }
        return try? JSONDecoder().decode(ContentHash.self, from: Data("\"\(key.dropFirst(blobs.count))\"".utf8))
    }
}

/// How far a snapshot covers one log: through entry `last`, whose segment is `key`.
package struct SnapshotPosition: Codable, Sendable, Hashable {
    package var last: Int
    package var key: String

    package init(_ position: LogPosition) {
        last = position.last
        key = position.key
    }

    package var position: LogPosition { LogPosition(last: last, key: key) }
}

/// A snapshot's contents: every version no other version has seen (tombstones included) as of
/// the segments it covers, and per log the last entry it covers.
package struct Snapshot: Codable, Sendable {
    package var format: Int
    package var number: Int
    /// When the compaction wrote it, in nanoseconds since 1970.
    package var made: Int64
    /// Per log (its replica id) how far the snapshot covers it.
    package var logs: [String: SnapshotPosition]
    package var entries: [BucketEntry]

    package init(number: Int, made: Int64, logs: [ReplicaID: LogPosition], entries: [BucketEntry]) {
        format = bucketFormatVersion
        self.number = number
        self.made = made
        self.logs = Dictionary(uniqueKeysWithValues: logs.map { ($0.key.rawValue, SnapshotPosition($0.value)) })
        self.entries = entries
    }

    package var positions: [ReplicaID: LogPosition] {
        Dictionary(uniqueKeysWithValues: logs.map { (ReplicaID(rawValue: $0.key), $0.value.position) })
    }

    package func encoded() -> Data { try! sortedEncoder.encode(self) }

    /// Decodes and checks a snapshot read from `key`.
    package static func decode(_ data: Data, key: String, layout: BucketLayout) throws -> Snapshot {
        let snapshot: Snapshot
        do {
            snapshot = try JSONDecoder().decode(Snapshot.self, from: data)
        } catch {
            throw BucketError.malformed(key: key, reason: "it is not a snapshot (\(error))")
        }
        guard snapshot.format == bucketFormatVersion else {
            throw BucketError.malformed(
                key: key, reason: "it is of format \(snapshot.format), and this archive-sync reads format \(bucketFormatVersion)")
        }
        guard layout.snapshotNumber(key) == snapshot.number else {
            throw BucketError.malformed(key: key, reason: "it says it is snapshot \(snapshot.number)")
        }
        for (replica, position) in snapshot.logs where layout.segmentName(position.key)?.replica.rawValue != replica {
            throw BucketError.malformed(key: key, reason: "its position of log \(replica) names \(position.key)")
        }
        if let problem = snapshot.entries.lazy.compactMap({ $0.problem() }).first {
            throw BucketError.malformed(key: key, reason: problem)
        }
        return snapshot
    }
}

/// Objects a compaction found it could delete: the next compaction after the grace period
/// deletes each that is still unreferenced (segments a snapshot covers, snapshots a newer one
/// replaces, blobs no version references).
package struct DeletionMark: Codable, Sendable {
    package var format: Int
    /// When the objects were found unreferenced, in nanoseconds since 1970.
    package var marked: Int64
    /// The lease holder that marked them.
    package var holder: String
    package var keys: [String]

    package init(marked: Int64, holder: String, keys: [String]) {
        format = bucketFormatVersion
        self.marked = marked
        self.holder = holder
        self.keys = keys
    }

    package func encoded() -> Data { try! sortedEncoder.encode(self) }

    package static func decode(_ data: Data, key: String) throws -> DeletionMark {
        guard let mark = try? JSONDecoder().decode(DeletionMark.self, from: data), mark.format == bucketFormatVersion else {
            throw BucketError.malformed(key: key, reason: "it is not a deletion mark of format \(bucketFormatVersion)")
        }
        return mark
    }
}

extension BucketLog {
    /// Folds the newest snapshot the cache has not read, if any: after a gap in a log (its
    /// segments deleted by a compaction, or a listing lagging behind), or for a new reader.
    ///
    /// A snapshot deleted between the listing and the read (a newer one replaced it more than
    /// a grace period ago) sends it back to the listing once.
    /// - Returns: whether the snapshot moved any log's position (a new listing may then read on).
    package func foldNewestSnapshot() async throws -> Bool {
        for _ in 0..<2 {
            let read = try cache.snapshotRead()
            let keys = try await storage.keys(under: layout.snapshots, after: read).filter { layout.snapshotNumber($0) != nil }
            guard let newest = keys.max() else { return false }
            guard let data = try await storage.read(newest) else { continue }
            return try cache.fold(try Snapshot.decode(data, key: newest, layout: layout), key: newest)
        }
        throw CompactionError.compactedWhileReading(key: layout.snapshots)
    }
}

extension BucketLog {
    /// Folds every log's segments after the cache's positions except each log's newest: what
    /// a snapshot may cover. The newest segment of each log stays, so that a reader whose
    /// position is behind it finds a gap in its listing (and reads the snapshot) rather than
    /// an empty listing it would take for nothing new.
    func foldAllButNewest() async throws {
        let positions = try cache.logPositions()
        let names = try await storage.keys(under: layout.logs, after: nil).compactMap(layout.segmentName)
        for (replica, segments) in Dictionary(grouping: names, by: \.replica) {
            let older = segments.filter { segment in positions[replica].map { segment.key > $0.key } ?? true }.sorted { $0.key < $1.key }.dropLast()
            if !older.isEmpty { _ = try await fold(Array(older), of: replica, from: positions[replica], pushed: []) }
        }
    }
}
