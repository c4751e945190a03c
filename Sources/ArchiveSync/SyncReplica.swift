import ArchiveLocking
import ArchiveStore
import Foundation

/// One side of a sync as the executor sees it: a store in a directory here, or one at the
/// far end of a pipe. Every call is one request; each returns or throws.
package protocol SyncReplica: AnyObject, Sendable {
    /// The store's replica id.
    var replica: ReplicaID { get }
    /// How the store is named to the user (its path, or `host:path`).
    var name: String { get }

    /// Starts this side's part in a sync: takes the store's sync lock, so that no other sync
    /// of the store runs at once. ``end()`` releases it.
    func begin() throws
    func end()
    /// Makes the manifest current: scans the store unless a watcher keeps it current.
    /// - Returns: true when it scanned.
    func makeCurrent() throws -> Bool
    func changeSequence() throws -> Int
    func liveObjectCount() throws -> Int
    func checkpoint(for peer: ReplicaID) throws -> Int?
    func setCheckpoint(for peer: ReplicaID, to sequence: Int) throws
    func sequenceAfterOwnWrites(since sequence: Int) throws -> Int
    func entries(after id: ObjectID?, limit: Int) throws -> [ReplicaEntry]
    func entries(changedAfter after: Int, through: Int, limit: Int) throws -> [ReplicaEntry]
    func entries(for ids: [ObjectID]) throws -> [ReplicaEntry?]
    /// The bytes of each entry's file; nil where they no longer match the entry's hash.
    func contents(of entries: [ReplicaEntry]) throws -> [Data?]
    /// Writes what the other side sent; false where the object changed since the plan.
    func apply(_ objects: [IncomingObject]) throws -> [Bool]
    func mergeVectors(_ merges: [VectorMerge]) throws
    /// What this side's history holds for merging each object (see ``MergeBaseQuery``).
    func mergeBases(_ queries: [MergeBaseQuery]) throws -> [MergeBaseAnswer]
}

/// A store in a directory on this machine.
package final class LocalReplica: SyncReplica {
    package let store: ArchiveStore
    package let name: String
    private let lock = TracedMutex<SyncLock?>(nil)
    /// A scan started before the sync began (``startMakingCurrentAhead()``), not yet waited for.
    private let madeCurrentAhead = TracedMutex<InBackground<Bool>?>(nil)

    package init(_ store: ArchiveStore, name: String? = nil) {
        self.store = store
        self.name = name ?? store.path
    }

    package func begin() throws {
        let held = try store.acquireSyncLock()
        lock.withLock { $0 = held }
    }

    package func end() { lock.withLock { $0 = nil } }

    package var replica: ReplicaID { store.replica }

    /// Starts making the store current now, on a thread of its own, before the sync begins
    /// (while a far side connects); the sync's own ``makeCurrent()`` then waits for that scan
    /// instead of scanning again. Safe: what changes after the scan is the next sync's, as with
    /// a scan inside the sync. Not waited for here, so that the far side's own scan (or its
    /// watcher's answer) starts as soon as it is connected, not once this scan is done.
    package func startMakingCurrentAhead() {
        let scan = InBackground { try self.scanUnlessWatched() }
        madeCurrentAhead.withLock { $0 = scan }
    }

    /// Waits for a scan ``startMakingCurrentAhead()`` started, if any, and drops its outcome:
    /// for a sync that fails before it begins, so that no scan outlives it.
    package func abandonMakingCurrentAhead() {
        _ = try? madeCurrentAhead.withLock({ value in
            defer { value = nil }
            return value
        })?.value()
    }

    package func makeCurrent() throws -> Bool {
        if let ahead = madeCurrentAhead.withLock({ value in
            defer { value = nil }
            return value
        }) {
            return try ahead.value()
        }
        return try scanUnlessWatched()
    }

    private func scanUnlessWatched() throws -> Bool {
        if try store.isKeptCurrentByWatcher() { return false }
        _ = try store.scan()
        return true
    }

    package func changeSequence() throws -> Int { try store.changeSequence() }
    package func liveObjectCount() throws -> Int { try store.liveObjectCount() }
    package func checkpoint(for peer: ReplicaID) throws -> Int? { try store.checkpoint(for: peer) }
    package func setCheckpoint(for peer: ReplicaID, to sequence: Int) throws { try store.setCheckpoint(for: peer, to: sequence) }
    package func sequenceAfterOwnWrites(since sequence: Int) throws -> Int { try store.sequenceAfterOwnWrites(since: sequence) }
    package func entries(after id: ObjectID?, limit: Int) throws -> [ReplicaEntry] { try store.replicaEntries(after: id, limit: limit) }

    package func entries(changedAfter after: Int, through: Int, limit: Int) throws -> [ReplicaEntry] {
        try store.replicaEntries(changedAfter: after, through: through, limit: limit)
    }

    package func entries(for ids: [ObjectID]) throws -> [ReplicaEntry?] { try store.replicaEntries(for: ids) }
    package func contents(of entries: [ReplicaEntry]) throws -> [Data?] { try entries.map { try store.contents(of: $0) } }
    package func apply(_ objects: [IncomingObject]) throws -> [Bool] { try store.applyIncoming(objects) }
    package func mergeVectors(_ merges: [VectorMerge]) throws { try store.mergeVectors(merges) }
    package func mergeBases(_ queries: [MergeBaseQuery]) throws -> [MergeBaseAnswer] { try store.mergeBases(queries) }
}
