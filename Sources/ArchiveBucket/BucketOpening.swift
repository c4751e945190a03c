import ArchiveLocking
import ArchiveS3
import ArchiveStore
import ArchiveSync
import Crypto
import Foundation

/// One page of a listing: its keys, and whether more follow.
package typealias KeyPage = (keys: [String], more: Bool)

/// The two requests every sync with a bucket starts with, sent at once instead of one after
/// the other in the sync's course: the probe of conditional writes (which ``BucketReplica/begin()``
/// waits for) and the first page of the listing of `log/` (which ``BucketReplica/makeCurrent()``
/// reads first). Neither needs anything of the store: the probe writes the marker's bytes,
/// which name the bucket replica, and the listing's first page starts at the beginning of
/// `log/` whatever the cache has read. A page sent before the sync took the store's lock is a
/// listing a little behind the bucket, which the reader copes with as with any listing that
/// lags a write: what it does not show yet, the next sync reads.
struct OpeningRequests: Sendable {
    var probe: Task<Void, any Error>?
    var firstPage: Task<KeyPage, any Error>?

    /// Sends both; each runs on Swift's concurrency pool until its value is taken.
    static func send(storage: any BucketStorage, layout: BucketLayout, replica: ReplicaID, name: String) -> OpeningRequests {
        OpeningRequests(
            probe: Task.detached { try await probeConditionalWrites(storage: storage, marker: layout.marker, replica: replica, name: name) },
            firstPage: Task.detached { try await storage.keyPage(under: layout.logs, after: nil) })
    }

    /// Stops what was not taken (a sync that ended before it needed it).
    func cancel() {
        probe?.cancel()
        firstPage?.cancel()
    }
}

/// Checks that the server still enforces conditional writes and the marker is still
/// there: the marker's bytes with a probe field added, written over it with
/// `If-None-Match: *`, must be refused (one PUT; see ``BucketStorage/write(_:_:ifAbsent:)``).
/// A server that ignores the condition has only written a marker that names the same replica.
func probeConditionalWrites(storage: any BucketStorage, marker key: String, replica: ReplicaID, name: String) async throws {
    let probe = { BucketMarker(replica: replica, probe: BucketReplica.randomName()).encoded() }
    guard try await storage.write(key, probe(), ifAbsent: true) else { return }
    // Written: the marker was gone, or the server ignores the condition. A second try tells which.
    guard !(try await storage.write(key, probe(), ifAbsent: true)) else { throw BucketError.conditionalWritesIgnored(location: name) }
    try await storage.delete(key)
    throw BucketError.markerMissing(location: name)
}

/// A bucket replica's start, made before the store that syncs with it is opened, so that the
/// sync's first two requests are under way while the store opens: its cache opened and the
/// ``OpeningRequests`` sent. Only where the cache already names the replica (the store has
/// synced with the bucket before): otherwise the replica reads the marker itself, once the
/// store is open.
package final class BucketOpening: Sendable {
    let cache: BucketCache
    let replica: ReplicaID
    let requests: OpeningRequests

    /// The start of the bucket replica at `prefix` for the store in `storeDirectory` (the
    /// directory as the sync will open it), whose cache is named after `cacheKey`; nil when
    /// that store has no cache of it yet.
    package init?(storage: any BucketStorage, prefix: String, name: String, storeDirectory: String, cacheKey: String) throws {
        let path = BucketCache.path(in: storeDirectory + "/" + ArchiveStore.metadataDirectoryName, key: cacheKey)
        guard let existing = try BucketCache.existing(at: path) else { return nil }
        cache = existing.cache
        replica = existing.replica
        requests = .send(storage: storage, layout: BucketLayout(prefix: prefix), replica: existing.replica, name: name)
    }

    /// Stops the requests, for a sync that goes no further (its store would not open).
    package func cancel() { requests.cancel() }
}

extension BucketCache {
    /// The cache file of the bucket `key` names (its endpoint, bucket and prefix) in a store's
    /// metadata directory `directory`.
    package static func path(in directory: String, key: String) -> String {
        directory + "/bucket-" + SignatureV4.hex(SHA256.hash(data: Data(key.utf8)).prefix(8)) + ".sqlite"
    }
}
