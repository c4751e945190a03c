import ArchiveStore
import ArchiveSync
import Foundation

// The objects of a bucket replica (docs/bucket.md): a marker, content-addressed blobs, and
// each replica's log of numbered segments. Every object is written once and never changed.

/// Where a bucket replica's objects are under its prefix.
package struct BucketLayout: Sendable, Hashable {
    /// The prefix with its trailing `/`, or empty for a whole bucket.
    package let prefix: String

    package init(prefix: String) {
        let trimmed = prefix.split(separator: "/", omittingEmptySubsequences: true).joined(separator: "/")
        self.prefix = trimmed.isEmpty ? "" : trimmed + "/"
    }

    /// The marker: the bucket replica's id and the format version, written once at `init`.
    package var marker: String { prefix + "replica" }
    package var logs: String { prefix + "log/" }
    /// One empty object per log, `replicas/<replica>`, that pushes wrote before a log's first
    /// segment until the listing of ``logs`` came to find new logs itself. Neither written
    /// nor read any more; buckets made before still hold them (compaction may delete them).
    package var replicas: String { prefix + "replicas/" }
    package func log(_ replica: ReplicaID) -> String { logs + replica.rawValue + "/" }
    package func blob(_ hash: ContentHash) -> String { prefix + "blobs/" + hash.description }

    /// Entry numbers are zero-padded so that a listing's byte order is their numeric order.
    package func segment(_ replica: ReplicaID, first: Int, last: Int) -> String {
        log(replica) + Self.padded(first) + "-" + Self.padded(last)
    }

    static func padded(_ number: Int) -> String {
        let digits = String(number)
        return String(repeating: "0", count: max(0, 16 - digits.count)) + digits
    }

    /// The segment `key` names; nil for a key that is not one (a stray object is ignored).
    package func segmentName(_ key: String) -> SegmentName? {
        guard key.hasPrefix(logs) else { return nil }
        let parts = key.dropFirst(logs.count).split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, isReplicaName(parts[0]) else { return nil }
        let numbers = parts[1].split(separator: "-", omittingEmptySubsequences: false)
        guard numbers.count == 2, numbers.allSatisfy({ $0.count == 16 }), let first = Int(numbers[0]), let last = Int(numbers[1]),
            first >= 1, last >= first
        else { return nil }
        return SegmentName(replica: ReplicaID(rawValue: String(parts[0])), first: first, last: last, key: key)
    }

    /// The replica whose log `key` (under ``replicas``) names; nil for any other key.
    package func replicaName(_ key: String) -> ReplicaID? {
        guard key.hasPrefix(replicas) else { return nil }
        let name = key.dropFirst(replicas.count)
        return isReplicaName(name) ? ReplicaID(rawValue: String(name)) : nil
    }

    private func isReplicaName(_ name: Substring) -> Bool {
        !name.isEmpty && name.count <= 64 && name.utf8.allSatisfy { $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || isalnum(Int32($0)) != 0 }
    }
}

/// One segment of a replica's log: entries `first` through `last` of it.
package struct SegmentName: Sendable, Hashable {
    package var replica: ReplicaID
    package var first: Int
    package var last: Int
    package var key: String
}

/// The format version this code writes and reads.
package let bucketFormatVersion = 1

/// The marker object: which replica a bucket prefix is.
package struct BucketMarker: Codable, Sendable, Equatable {
    package var format: Int
    package var replica: ReplicaID
    /// Set only in the bytes a sync's probe tries to write over the marker (see
    /// ``BucketReplica/begin()``): other bytes than the marker's, so that a refusal is one.
    package var probe: String?

    package init(replica: ReplicaID, probe: String? = nil) {
        format = bucketFormatVersion
        self.replica = replica
        self.probe = probe
    }

    package func encoded() -> Data { try! sortedEncoder.encode(self) }

    package static func decode(_ data: Data, key: String) throws -> BucketMarker {
        guard let marker = try? JSONDecoder().decode(BucketMarker.self, from: data) else {
            throw BucketError.malformed(key: key, reason: "it is not a bucket replica's marker")
        }
        guard marker.format == bucketFormatVersion else {
            throw BucketError.malformed(
                key: key, reason: "it is of format \(marker.format), and this archive-sync reads format \(bucketFormatVersion)")
        }
        return marker
    }
}

/// One change in a log: an object's version (or its delete) as the replica that pushed it had it.
package struct BucketEntry: Codable, Sendable, Hashable {
    package var collection: String
    package var key: String
    /// The file extension, which names the codec (`json`, `plist`).
    package var kind: String
    package var vector: VersionVector
    /// The contents' SHA-256, the blob's name; nil for a delete.
    package var hash: ContentHash?
    package var size: Int
    /// When the version was made, in nanoseconds since 1970, as its author recorded it.
    package var modified: Int64
    /// The replica that made the version.
    package var author: ReplicaID

    package var id: ObjectID { ObjectID(unchecked: collection, key: key) }
    package var isDeleted: Bool { hash == nil }

    package init(id: ObjectID, kind: String, vector: VersionVector, hash: ContentHash?, size: Int, modified: Int64, author: ReplicaID) {
        collection = id.collection
        key = id.key
        self.kind = kind
        self.vector = vector
        self.hash = hash
        self.size = size
        self.modified = modified
        self.author = author
    }

    /// The entry as the sync compares it, at the bucket replica's change `sequence`.
    package func replicaEntry(sequence: Int) -> ReplicaEntry {
        ReplicaEntry(
            id: id, file: key + "." + kind, vector: vector, hash: hash, size: size, modified: modified, author: author, isDeleted: isDeleted,
            sequence: sequence)
    }

    /// A problem with an entry read from a bucket; nil when it is sound.
    func problem() -> String? {
        do { _ = try ObjectID(collection: collection, key: key) } catch { return "\(error)" }
        if kind.isEmpty || kind.contains("/") || kind.contains(".") { return "the kind \"\(kind)\" of \(id) is not a file extension" }
        if size < 0 || (hash == nil && size != 0) { return "the size of \(id) is \(size)" }
        if vector.counters.values.contains(where: { $0 < 0 }) { return "the version vector of \(id) has a negative counter" }
        return nil
    }
}

/// A segment's contents: entries `first` through `last` of `replica`'s log.
package struct Segment: Codable, Sendable {
    package var format: Int
    package var replica: ReplicaID
    package var first: Int
    package var last: Int
    package var entries: [BucketEntry]

    package init(replica: ReplicaID, first: Int, entries: [BucketEntry]) {
        format = bucketFormatVersion
        self.replica = replica
        self.first = first
        last = first + entries.count - 1
        self.entries = entries
    }

    package func encoded() -> Data { try! sortedEncoder.encode(self) }

    /// Decodes and checks a segment against the key it was read from.
    package static func decode(_ data: Data, name: SegmentName) throws -> Segment {
        let segment: Segment
        do {
            segment = try JSONDecoder().decode(Segment.self, from: data)
        } catch {
            throw BucketError.malformed(key: name.key, reason: "it is not a log segment (\(error))")
        }
        guard segment.format == bucketFormatVersion else {
            throw BucketError.malformed(
                key: name.key, reason: "it is of format \(segment.format), and this archive-sync reads format \(bucketFormatVersion)")
        }
        guard segment.replica == name.replica, segment.first == name.first, segment.last == name.last,
            segment.entries.count == name.last - name.first + 1
        else {
            throw BucketError.malformed(
                key: name.key,
                reason:
                    "its contents do not match its name (entries \(segment.first)-\(segment.last) of \(segment.replica), \(segment.entries.count) of them)"
            )
        }
        if let problem = segment.entries.lazy.compactMap({ $0.problem() }).first {
            throw BucketError.malformed(key: name.key, reason: problem)
        }
        return segment
    }
}

let sortedEncoder: JSONEncoder = {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return encoder
}()

/// Why a bucket replica cannot be used.
package enum BucketError: ExitStatusError, LiveStoppingError, Sendable, Equatable {
    /// Retrying cannot help: the prefix is no replica (or its marker went away), or the server
    /// ignores conditional writes.
    package var stopsLiveSession: Bool {
        switch self {
        case .notAReplica, .conditionalWritesIgnored, .markerMissing: true
        default: false
        }
    }

    /// Refusals of a server or a prefix are bad input (2); damage and lost races are failures (1).
    package var exitStatus: Int32 {
        switch self {
        case .notAReplica, .conditionalWritesIgnored: ExitStatus.badInput
        default: ExitStatus.failure
        }
    }

    /// An object in the bucket is not what the format says it must be.
    case malformed(key: String, reason: String)
    /// No replica marker at the prefix: `archive-sync init` makes one.
    case notAReplica(location: String)
    /// The server wrote over an object that a conditional write must have left alone.
    case conditionalWritesIgnored(location: String)
    /// A blob's bytes do not hash to its name.
    case damagedBlob(key: String)
    /// The marker is gone from a prefix this store has synced with.
    case markerMissing(location: String)
    /// Pushes kept losing races for the next segment number.
    case segmentRace(key: String, attempts: Int)

    package var description: String {
        switch self {
        case .malformed(let key, let reason): "\(key) in the bucket is damaged: \(reason)"
        case .notAReplica(let location):
            "\(location) is not a bucket replica (it has no replica marker); create one with `archive-sync init \(location)`"
        case .conditionalWritesIgnored(let location):
            "the server of \(location) ignores conditional writes (If-None-Match), so two hosts could overwrite each other's data; use a server that enforces them"
        case .damagedBlob(let key): "\(key) in the bucket is damaged: its bytes do not match their SHA-256; nothing was written from it"
        case .markerMissing(let location):
            "the replica marker of \(location) is gone (the prefix was emptied or deleted); nothing was synced"
        case .segmentRace(let key, let attempts): "another writer took the log segment \(key) \(attempts) times in a row; run the sync again"
        }
    }
}
