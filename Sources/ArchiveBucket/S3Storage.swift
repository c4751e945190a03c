import ArchiveS3
import ArchiveStore
import ArchiveSync
import Foundation

/// The S3 client is the bucket replica's storage: a refused `If-None-Match: *` is a write that
/// left the key alone.
extension S3Client: BucketStorage {
    package func write(_ key: String, _ data: Data, ifAbsent: Bool) async throws -> Bool {
        do {
            _ = try await put(key, data, condition: ifAbsent ? .ifNoneMatch : .none)
            return true
        } catch S3Error.preconditionFailed(_) {
            return false
        }
    }

    package func read(_ key: String) async throws -> Data? { try await get(key)?.data }

    package func keys(under prefix: String, after startAfter: String?) async throws -> [String] {
        try await list(prefix: prefix, startAfter: startAfter).map(\.key)
    }

    package func keyPage(under prefix: String, after startAfter: String?) async throws -> (keys: [String], more: Bool) {
        let page = try await listPage(prefix: prefix, startAfter: startAfter)
        return (page.objects.map(\.key), page.truncated)
    }
}

/// A bucket prefix of S3-compatible storage as a replica a store syncs with (docs/bucket.md).
///
/// ```swift
/// let location = try S3Location(parsing: "s3://team-data/archive")
/// var configuration = try S3Configuration.fromEnvironment()
/// configuration.bucket = location.bucket
/// _ = try await BucketReplicas.create(location, configuration: configuration)      // once
/// let report = try await BucketReplicas.sync(store, with: location, configuration: configuration)
/// ```
public enum BucketReplicas {
    /// Makes `location` a bucket replica, once the server has shown that it enforces
    /// conditional writes; leaves one that already is as it is.
    ///
    /// - Returns: its replica id, and whether this call made it.
    /// - Throws: ``BucketError`` (a server that ignores conditional writes) or ``S3Error``.
    public static func create(_ location: S3Location, configuration: S3Configuration) async throws -> (replica: ReplicaID, created: Bool) {
        try await withClient(configuration) { client in
            try await BucketReplica.create(storage: client, prefix: location.prefix, name: location.description)
        }
    }

    /// Syncs `store` with the bucket replica at `location`, as `archive-sync sync` does.
    public static func sync(
        _ store: ArchiveStore, with location: S3Location, configuration: S3Configuration, options: SyncOptions = SyncOptions()
    ) async throws -> SyncReport {
        try await withClient(configuration) { client in
            // The replica's requests block their thread: this one is not on the concurrency pool.
            try await withCheckedThrowingContinuation { continuation in
                Thread {
                    continuation.resume(
                        with: Result {
                            let bucket = try replica(for: store, at: location, client: client)
                            bucket.sendOpeningRequests()
                            return try Sync(a: LocalReplica(store), b: bucket, options: options).runNow()
                        })
                }.start()
            }
        }
    }

    /// `body` with a client of `configuration`, shut down after it whatever happens.
    static func withClient<T: Sendable>(_ configuration: S3Configuration, _ body: (S3Client) async throws -> T) async throws -> T {
        let client = S3Client(configuration)
        do {
            let result = try await body(client)
            try await client.shutdown()
            return result
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    /// The bucket replica at `location` as `store` syncs with it, over `client`; `close` runs
    /// when the sync ends. With `opening` (``opening(forStoreAt:at:client:)`` of the same
    /// store and location), its cache and requests are taken over. Blocks while it reads the
    /// marker (once per store): call it off Swift's concurrency pool.
    package static func replica(
        for store: ArchiveStore, at location: S3Location, client: S3Client, opening: BucketOpening? = nil,
        close: (@Sendable () async throws -> Void)? = nil, closesAtEnd: Bool = true
    ) throws -> BucketReplica {
        let metadata = store.path + "/" + ArchiveStore.metadataDirectoryName
        return try BucketReplica(
            storage: client, prefix: location.prefix, name: location.description, cacheDirectory: metadata,
            cacheKey: cacheKey(location, client: client), pusher: store.replica, opening: opening, close: close, closesAtEnd: closesAtEnd)
    }

    /// The start of a sync of the store in `directory` with `location`, made before the store
    /// is opened (see ``BucketOpening``): nil when the store has no cache of the bucket yet.
    package static func opening(forStoreAt directory: String, at location: S3Location, client: S3Client) throws -> BucketOpening? {
        try BucketOpening(
            storage: client, prefix: location.prefix, name: location.description, storeDirectory: directory,
            cacheKey: cacheKey(location, client: client))
    }

    /// What names a store's cache of `location`: the endpoint, bucket and prefix.
    private static func cacheKey(_ location: S3Location, client: S3Client) -> String {
        "\(client.configuration.endpoint.absoluteString) \(location.bucket) \(location.prefix)"
    }
}
