import ArchiveBucket
import ArchiveLocking
import ArchiveStore
import ArchiveSync
import Foundation

/// A bucket in memory, for the format's logic only (the end-to-end tests use a real gateway):
/// it counts requests, and can hide keys from listings as a lagging listing would.
final class MemoryBucket: BucketStorage {
    let objects = TracedMutex<[String: Data]>([:])
    let requests = TracedMutex<[String: Int]>([:])
    /// Keys that exist but that listings do not show yet.
    let hidden = TracedMutex<Set<String>>([])

    func count(_ kind: String) { requests.withLock { $0[kind, default: 0] += 1 } }

    func write(_ key: String, _ data: Data, ifAbsent: Bool) async throws -> Bool {
        count("PUT")
        let written = objects.withLock { objects in
            if ifAbsent && objects[key] != nil { return false }
            objects[key] = data
            return true
        }
        // As the S3 client's first try: a refusal is one, with no read-back (there was no earlier try).
        return written
    }

    func read(_ key: String) async throws -> Data? {
        count("GET")
        return objects.withLock { $0[key] }
    }

    /// Keys per page of a listing (S3's is 1,000).
    let pageSize = TracedMutex(1_000)

    func keys(under prefix: String, after startAfter: String?) async throws -> [String] {
        var keys: [String] = []
        var after = startAfter
        while true {
            let page = try await keyPage(under: prefix, after: after)
            keys += page.keys
            guard page.more else { return keys }
            after = page.keys.last
        }
    }

    func keyPage(under prefix: String, after startAfter: String?) async throws -> (keys: [String], more: Bool) {
        count("LIST")
        let hidden = hidden.withLock { $0 }
        let size = pageSize.withLock { $0 }
        let keys = objects.withLock { objects in
            objects.keys.filter { key in key.hasPrefix(prefix) && !hidden.contains(key) && startAfter.map { key > $0 } ?? true }.sorted()
        }
        return (Array(keys.prefix(size)), keys.count > size)
    }

    func delete(_ key: String) async throws {
        count("DELETE")
        objects.withLock { $0[key] = nil }
    }

    /// A bucket with a replica made at `p`.
    static func made() async throws -> MemoryBucket {
        let bucket = MemoryBucket()
        let (_, created) = try await BucketReplica.create(storage: bucket, prefix: "p", name: "s3://test/p")
        precondition(created)
        return bucket
    }

    func stored(under prefix: String) -> [String] { objects.withLock { $0.keys.filter { $0.hasPrefix(prefix) }.sorted() } }
}

/// Runs `body` on a thread of its own: bucket replicas block their caller until requests
/// return, which a test's task on the concurrency pool must not do.
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// Syncs `store` with the bucket replica at `prefix` of `bucket`, as the command does.
func sync(_ store: ArchiveStore, with bucket: any BucketStorage, prefix: String = "p", options: SyncOptions = SyncOptions()) async throws
    -> SyncReport
{
    try await onThread {
        let replica = try BucketReplica(
            storage: bucket, prefix: prefix, name: "s3://test/\(prefix)", cacheDirectory: store.path + "/.archive-sync", cacheKey: "test/\(prefix)",
            pusher: store.replica)
        return try Sync(a: LocalReplica(store), b: replica, options: options).runNow()
    }
}

extension ArchiveStore {
    /// Every live object's contents.
    func liveContents() throws -> [ObjectID: Data] {
        var result: [ObjectID: Data] = [:]
        for entry in try replicaEntries(after: nil, limit: .max) where !entry.isDeleted { result[entry.id] = try data(for: entry.id) }
        return result
    }
}

/// ETags as S3 gives them for a plain PUT: the MD5 of the bytes, here their SHA-256.
extension MemoryBucket: ConditionalStorage {
    func readTagged(_ key: String) async throws -> (data: Data, etag: String)? {
        count("GET")
        return objects.withLock { $0[key] }.map { ($0, ContentHash(of: $0).description) }
    }

    func write(_ key: String, _ data: Data, ifMatch etag: String?) async throws -> String? {
        count("PUT")
        return objects.withLock { objects in
            guard objects[key].map({ ContentHash(of: $0).description }) == etag else { return nil }
            objects[key] = data
            return ContentHash(of: data).description
        }
    }
}
