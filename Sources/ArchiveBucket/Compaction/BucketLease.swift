import ArchiveStore
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The lease object's contents: who compacts a bucket replica, and until when.
package struct LeaseRecord: Codable, Sendable, Equatable {
    package var format: Int
    /// Names the holder to people: `host pid N`.
    package var holder: String
    package var host: String
    package var pid: Int32
    /// Random, one per take: tells this holder's own write (a retried request) from another's.
    package var token: String
    /// When the lease ends unless renewed, in nanoseconds since 1970.
    package var expires: Int64

    package init(holder: String, host: String, pid: Int32, token: String, expires: Int64) {
        format = bucketFormatVersion
        self.holder = holder
        self.host = host
        self.pid = pid
        self.token = token
        self.expires = expires
    }

    package var expiry: Date { Date(timeIntervalSince1970: Double(expires) / 1e9) }

    /// Whether another may take the lease: it expired, or its holder was a process of this
    /// host that is gone (a compaction killed and run again need not wait for the expiry).
    func isStale(now: Date, host: String) -> Bool {
        if expiry <= now { return true }
        return self.host == host && kill(pid, 0) != 0 && errno == ESRCH
    }
}

/// A compaction's lease on a bucket replica (`<prefix>/lease`): taken with `If-None-Match: *`,
/// renewed with `If-Match` on its ETag, taken over once expired with `If-Match` on the expired
/// lease's ETag, so that of two takers only one wins. Sync never takes it.
package struct BucketLease: Sendable {
    let storage: any ConditionalStorage
    let key: String
    let location: String
    let duration: Duration
    private(set) var record: LeaseRecord
    private var etag: String

    package var holder: String { record.holder }

    /// Takes the lease at `layout` for `duration`.
    /// - Throws: ``CompactionError/leaseHeld(location:holder:expires:)`` while another holds a live one.
    package static func take(storage: any ConditionalStorage, layout: BucketLayout, location: String, duration: Duration) async throws
        -> BucketLease
    {
        let host = ProcessInfo.processInfo.hostName
        let pid = getpid()
        let token = String(format: "%016llx", UInt64.random(in: .min ... .max))
        var record = LeaseRecord(holder: "\(host) pid \(pid)", host: host, pid: pid, token: token, expires: 0)
        for _ in 0..<4 {
            record.expires = nanoseconds(Date() + duration.timeInterval)
            if let etag = try await storage.write(layout.lease, encoded(record), ifMatch: nil) {
                return BucketLease(storage: storage, key: layout.lease, location: location, duration: duration, record: record, etag: etag)
            }
            // Released between the two requests: try the empty key again.
            guard let (data, etag) = try await storage.readTagged(layout.lease) else { continue }
            let current = try decode(data, key: layout.lease)
            if current.token == token {
                return BucketLease(storage: storage, key: layout.lease, location: location, duration: duration, record: current, etag: etag)
            }
            guard current.isStale(now: Date(), host: host) else {
                throw CompactionError.leaseHeld(location: location, holder: current.holder, expires: current.expiry)
            }
            if let taken = try await storage.write(layout.lease, encoded(record), ifMatch: etag) {
                return BucketLease(storage: storage, key: layout.lease, location: location, duration: duration, record: record, etag: taken)
            }
            // Another taker won the expired lease (or a retried write of ours landed): read again.
        }
        throw CompactionError.leaseLost(location: location)
    }

    /// Moves the expiry `duration` from now, if the lease is still this holder's.
    /// - Throws: ``CompactionError/leaseLost(location:)`` when another took it over.
    package mutating func renew() async throws {
        var renewed = record
        renewed.expires = Self.nanoseconds(Date() + duration.timeInterval)
        if let etag = try await storage.write(key, Self.encoded(renewed), ifMatch: etag) {
            (record, self.etag) = (renewed, etag)
            return
        }
        // Refused: another holder, or a retry of this very write whose first try landed.
        guard let (data, etag) = try await storage.readTagged(key), let current = try? Self.decode(data, key: key), current == renewed else {
            throw CompactionError.leaseLost(location: location)
        }
        (record, self.etag) = (current, etag)
    }

    /// Deletes the lease if it is still this holder's with time to spare: S3 has no
    /// conditional delete, and a lease that another cannot take before its expiry cannot be
    /// another's when the delete lands. One closer to its expiry is left to expire.
    package func release() async throws {
        guard let (data, _) = try await storage.readTagged(key), let current = try? Self.decode(data, key: key), current.token == record.token,
            current.expiry > Date() + 10
        else { return }
        try await storage.delete(key)
    }

    static func nanoseconds(_ date: Date) -> Int64 { Int64(date.timeIntervalSince1970 * 1e9) }

    static func encoded(_ record: LeaseRecord) -> Data { try! sortedEncoder.encode(record) }

    static func decode(_ data: Data, key: String) throws -> LeaseRecord {
        guard let record = try? JSONDecoder().decode(LeaseRecord.self, from: data), record.format == bucketFormatVersion else {
            throw BucketError.malformed(
                key: key, reason: "it is not a compaction lease of format \(bucketFormatVersion); delete it if no compaction runs")
        }
        return record
    }
}

extension Duration {
    /// The duration in seconds, as Foundation's dates count.
    var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
