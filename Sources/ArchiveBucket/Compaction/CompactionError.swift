import ArchiveS3
import ArchiveStore
import Foundation

/// Why a compaction stopped, or why a sync met one.
public enum CompactionError: ExitStatusError, Sendable, Equatable {
    /// Another compaction holds the lease (busy: run again after `expires`).
    case leaseHeld(location: String, holder: String, expires: Date)
    /// The lease expired while this compaction ran and another took it over: it stopped
    /// before its next deletion.
    case leaseLost(location: String)
    /// Another compaction wrote the snapshot this one was to write.
    case snapshotTaken(key: String)
    /// Snapshots kept disappearing between their listing and their read.
    case compactedWhileReading(key: String)

    public var exitStatus: Int32 { ExitStatus.busy }

    public var description: String {
        switch self {
        case .leaseHeld(let location, let holder, let expires):
            "\(location) is being compacted by \(holder), whose lease runs until \(expires.formatted(.iso8601)); run compact again after that"
        case .leaseLost(let location):
            "another compaction took over the lease of \(location) after this one let it expire; this one stopped before deleting more, run it again"
        case .snapshotTaken(let key):
            "another compaction wrote \(key) at the same time (its lease had expired); nothing was deleted, run compact again"
        case .compactedWhileReading(let key):
            "the snapshots under \(key) were replaced twice while this sync read them; run the sync again"
        }
    }
}

/// What compaction needs of an object store beyond ``BucketStorage``: ETags, and writes
/// conditional on one (`If-Match`), for the lease.
package protocol ConditionalStorage: BucketStorage {
    /// The object's bytes and ETag, or nil when there is none.
    func readTagged(_ key: String) async throws -> (data: Data, etag: String)?
    /// Writes `data` at `key` if its ETag is still `etag` (`If-Match`), or, for a nil `etag`,
    /// if there is no object (`If-None-Match: *`). Returns the new ETag; nil when refused.
    func write(_ key: String, _ data: Data, ifMatch etag: String?) async throws -> String?
}

extension S3Client: ConditionalStorage {
    package func readTagged(_ key: String) async throws -> (data: Data, etag: String)? {
        try await get(key).map { ($0.data, $0.etag) }
    }

    package func write(_ key: String, _ data: Data, ifMatch etag: String?) async throws -> String? {
        do {
            return try await put(key, data, condition: etag.map { .ifMatch(etag: $0) } ?? .ifNoneMatch)
        } catch S3Error.preconditionFailed(_) {
            return nil
        }
    }
}
