import ArchiveLocking
import ArchiveS3
import ArchiveStore
import ArchiveSync
import Foundation

/// A bucket prefix as one side of a sync (docs/bucket.md): a replica with an id of its own,
/// whose state is the fold of every replica's log in the bucket.
///
/// The store on the other side pushes into its own log (`log/<its replica>/`), so no two hosts
/// ever write the same key; it reads the others' logs after its cache's positions. The cache
/// (an SQLite file in the store's `.archive-sync/`) holds the fold, the positions and the
/// bucket replica's checkpoint of the store, so that a sync that finds nothing new costs one
/// conditional PUT and a listing.
package final class BucketReplica: PolledReplica {
    package let replica: ReplicaID
    package let name: String
    private let storage: any BucketStorage
    private let layout: BucketLayout
    private let cache: BucketCache
    private let log: BucketLog
    /// The syncing store's replica id: the log this side pushes into.
    private let pusher: ReplicaID
    /// The first change sequence of this session at which the view came to show something
    /// other than what the sync pushed (see ``sequenceAfterOwnWrites(since:)``).
    private let firstOther = TracedMutex<Int?>(nil)
    /// Called once, at ``end()`` (unless `closesAtEnd` is false: a live session's replica
    /// serves many syncs), at ``disconnect()``, or else when the replica goes away: shuts down
    /// a client this replica owns.
    private let close: TracedMutex<(@Sendable () async throws -> Void)?>
    private let closesAtEnd: Bool
    /// The opening requests sent ahead (``sendOpeningRequests()``, or a ``BucketOpening``),
    /// each taken by the step that needs it.
    private let opening = TracedMutex(OpeningRequests())

    /// Opens the bucket replica at `prefix` for a sync with the store `pusher`, whose cache of
    /// it is a file in `cacheDirectory` named after `cacheKey` (the endpoint, bucket and prefix).
    ///
    /// Reads the marker unless the cache already names the replica. With `opening` (made for
    /// the same store directory and bucket), takes over its cache and the requests it sent.
    /// - Throws: ``BucketError/notAReplica(location:)`` when the prefix has no marker.
    package init(
        storage: any BucketStorage, prefix: String, name: String, cacheDirectory: String, cacheKey: String, pusher: ReplicaID,
        opening: BucketOpening? = nil, close: (@Sendable () async throws -> Void)? = nil, closesAtEnd: Bool = true
    ) throws {
        self.storage = storage
        self.close = TracedMutex(close)
        self.closesAtEnd = closesAtEnd
        self.name = name
        self.pusher = pusher
        layout = BucketLayout(prefix: prefix)
        if let opening {
            replica = opening.replica
            cache = opening.cache
        } else if let existing = try BucketCache.existing(at: BucketCache.path(in: cacheDirectory, key: cacheKey)) {
            replica = existing.replica
            cache = existing.cache
        } else {
            let layout = layout
            guard let data = try blocking({ try await storage.read(layout.marker) }) else { throw BucketError.notAReplica(location: name) }
            replica = try BucketMarker.decode(data, key: layout.marker).replica
            cache = try BucketCache(path: BucketCache.path(in: cacheDirectory, key: cacheKey), replica: replica)
        }
        log = BucketLog(storage: storage, layout: layout, cache: cache)
        if let opening { self.opening.withLock { $0 = opening.requests } }
    }

    /// Sends the probe and the first page of the listing now, for the sync about to begin: its
    /// ``begin()`` and ``makeCurrent()`` then wait for answers already under way (see
    /// ``OpeningRequests``). For one sync only: a live session's replica probes at each cycle.
    package func sendOpeningRequests() {
        let requests = OpeningRequests.send(storage: storage, layout: layout, replica: replica, name: name)
        opening.withLock { $0 = requests }
    }

    /// Makes a bucket replica at `prefix`: checks that the server enforces conditional writes,
    /// then writes the marker with `If-None-Match: *`.
    ///
    /// - Returns: the replica's id, and false when the prefix already was one (left as it was).
    package static func create(storage: any BucketStorage, prefix: String, name: String) async throws -> (replica: ReplicaID, created: Bool) {
        let layout = BucketLayout(prefix: prefix)
        let probe = layout.prefix + "probe-" + randomName()
        // Other bytes the second time: the same bytes would pass for the first write retried.
        let first = try await storage.write(probe, Data("probe 1".utf8), ifAbsent: true)
        let second = try await storage.write(probe, Data("probe 2".utf8), ifAbsent: true)
        try await storage.delete(probe)
        guard first && !second else { throw BucketError.conditionalWritesIgnored(location: name) }
        let marker = BucketMarker(replica: ReplicaID(rawValue: randomName()))
        if try await storage.write(layout.marker, marker.encoded(), ifAbsent: true) { return (marker.replica, true) }
        guard let data = try await storage.read(layout.marker) else { throw BucketError.notAReplica(location: name) }
        return (try BucketMarker.decode(data, key: layout.marker).replica, false)
    }

    /// 16 random hex digits. (Not `String(format:)`: its first use sets up Foundation's
    /// formatting, a cost on every sync's path.)
    static func randomName() -> String { SignatureV4.hex((0..<8).map { _ in UInt8.random(in: .min ... .max) }) }

    /// Checks that the server still enforces conditional writes and the marker is still
    /// there (``probeConditionalWrites(storage:marker:replica:name:)``). A probe sent ahead is
    /// not waited for here but by the first step that reads or writes the bucket's side
    /// (``makeCurrent()`` in a sync): the other side then makes itself current (a watched
    /// store asks its watcher) while the answer is on its way.
    package func begin() throws {
        firstOther.withLock { $0 = nil }
        if opening.withLock({ $0.probe }) != nil { return }
        let (storage, key, replica, name) = (storage, layout.marker, replica, name)
        try blocking { try await probeConditionalWrites(storage: storage, marker: key, replica: replica, name: name) }
    }

    /// Waits for the probe sent ahead, if any, and throws what it found: nothing is read from
    /// or written to the bucket's side before the server has shown that it enforces
    /// conditional writes. The task stays until it has succeeded, so that every caller waits
    /// for it, and throws its error, until then.
    private func probed() throws {
        guard let sent = opening.withLock({ $0.probe }) else { return }
        try blocking { try await sent.value }
        opening.withLock { requests in
            if requests.probe == sent { requests.probe = nil }
        }
    }

    package func end() {
        if closesAtEnd { disconnect() }
    }

    package func disconnect() {
        opening.withLock { requests in
            requests.cancel()
            requests = OpeningRequests()
        }
        guard
            let close = close.withLock({ value in
                defer { value = nil }; return value
            })
        else { return }
        _ = try? blocking { try await close() }
    }

    deinit { disconnect() }

    /// Reads the logs' new segments into the cache, starting from the listing's first page
    /// when it was sent ahead.
    package func makeCurrent() throws -> Bool {
        try probed()
        let log = log
        let sent = opening.withLock { requests in
            defer { requests.firstPage = nil }; return requests.firstPage
        }
        _ = try blocking { try await log.catchUp(firstPage: sent) }
        return false
    }

    /// Reads the logs' new segments into the cache: one listing when there are none.
    package func poll() throws -> Int {
        try probed()
        let log = log
        _ = try blocking { try await log.catchUp() }
        return try cache.changeSequence()
    }

    package func changeSequence() throws -> Int {
        try probed()
        return try cache.changeSequence()
    }

    package func liveObjectCount() throws -> Int { try cache.liveCount() }

    package func checkpoint(for peer: ReplicaID) throws -> Int? {
        try probed()
        return try cache.checkpoint(for: peer)
    }

    package func setCheckpoint(for peer: ReplicaID, to sequence: Int) throws {
        try probed()
        try cache.setCheckpoint(for: peer, to: sequence)
    }

    /// The view's sequence, or just before the first change the sync's pushes did not decide:
    /// where a version pushed meanwhile by another store won over the sync's, the store must
    /// still compare it.
    package func sequenceAfterOwnWrites(since sequence: Int) throws -> Int {
        if let other = firstOther.withLock({ $0 }), other > sequence { return other - 1 }
        return try cache.changeSequence()
    }

    package func entries(after id: ObjectID?, limit: Int) throws -> [ReplicaEntry] { try cache.shown(after: id, limit: limit) }

    package func entries(changedAfter after: Int, through: Int, limit: Int) throws -> [ReplicaEntry] {
        try cache.shown(changedAfter: after, through: through, limit: limit)
    }

    package func entries(for ids: [ObjectID]) throws -> [ReplicaEntry?] { try cache.shown(ids) }

    /// The blobs of `entries`, each checked against its name; nil for a delete or a blob that
    /// is not there.
    package func contents(of entries: [ReplicaEntry]) throws -> [Data?] {
        try probed()
        let (storage, layout) = (storage, layout)
        let hashes = entries.map { $0.isDeleted ? nil : $0.hash }
        return try blocking {
            try await concurrentMap(hashes) { hash -> Data? in
                guard let hash, let data = try await storage.read(layout.blob(hash)) else { return nil }
                guard ContentHash(of: data) == hash else { throw BucketError.damagedBlob(key: layout.blob(hash)) }
                return data
            }
        }
    }

    /// Pushes the writes whose object still shows what the sync planned on: their blobs, then
    /// one segment of the store's log.
    package func apply(_ objects: [IncomingObject]) throws -> [Bool] {
        let shown = try cache.shown(objects.map(\.id))
        var entries: [BucketEntry] = []
        var blobs: [ContentHash: Data] = [:]
        let accepted = zip(objects, shown).map { object, row in
            guard row.flatMap({ $0.isDeleted ? nil : $0.hash }) == object.version.expected else { return false }
            let hash = object.content.map { ContentHash(of: $0) }
            if let hash, let content = object.content { blobs[hash] = content }
            let version = object.version
            entries.append(
                BucketEntry(
                    id: object.id, kind: object.fileExtension, vector: version.vector, hash: hash, size: object.content?.count ?? 0,
                    modified: version.modified, author: version.author))
            return true
        }
        try push(entries, blobs: blobs)
        return accepted
    }

    /// Pushes the merged vectors of objects whose view still holds the contents named.
    package func mergeVectors(_ merges: [VectorMerge]) throws {
        let shown = try cache.shown(merges.map(\.id))
        let entries = zip(merges, shown).compactMap { merge, row -> BucketEntry? in
            guard let row, (row.isDeleted ? nil : row.hash) == merge.hash else { return nil }
            return BucketEntry(
                id: row.id, kind: fileExtension(row.file), vector: merge.vector, hash: row.hash, size: row.size, modified: row.modified,
                author: row.author)
        }
        try push(entries, blobs: [:])
    }

    private func push(_ entries: [BucketEntry], blobs: [ContentHash: Data]) throws {
        try probed()
        let (log, pusher) = (log, pusher)
        let other = try blocking { try await log.append(entries, to: pusher, blobs: blobs) }
        if let other { firstOther.withLock { $0 = min($0 ?? other, other) } }
    }

    /// The bucket keeps no history to merge from: the store's may hold the base.
    package func mergeBases(_ queries: [MergeBaseQuery]) throws -> [MergeBaseAnswer] { queries.map { _ in .none } }
}
