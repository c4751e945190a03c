import ArchiveLocking
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The watcher keeping a store's manifest current, as ``ArchiveStore/status()`` reports it.
public struct WatcherStatus: Sendable, Codable, Equatable {
    /// The watching process.
    public let pid: Int32
    /// When its first scan finished and it began recording every change as it happens; nil
    /// while that first scan still runs (the manifest may lag the disk until then).
    public let currentSince: Date?
    /// True when it answered a probe through its event queue just now (see ``WatchProbe``):
    /// every change made before ``ArchiveStore/status()`` was called is in the manifest. False
    /// when it did not answer in time (stopped, hung, or far behind): the manifest may lag the
    /// disk, and `diff`, `sync` and the like scan as if no watcher ran.
    public let caughtUp: Bool
}

/// A store's watch lease: an exclusive lock on `.archive-sync/watch.lock`, which the kernel
/// releases when the holding process dies. While one is held, the manifest is kept current.
package typealias WatchLease = LockFile

extension ArchiveStore {
    private static let leaseFile = "watch.lock"

    /// Takes the store's watch lease, or throws ``ArchiveError/alreadyWatched(path:pid:)``
    /// naming the process that holds it.
    package func acquireWatchLease() throws -> WatchLease {
        try refuseIfReadOnly()
        let lease = try lockFile(named: Self.leaseFile)!  // released however this ends
        do {
            guard try lease.lockExclusively() else { throw ArchiveError.alreadyWatched(path: path, pid: lease.recordedHolder()) }
            try? lease.recordHolder()  // only what `status` shows
            try manifest.write { tx in
                try tx.setMeta("watcher", String(getpid()))
                try tx.setMeta("watched_since", "")
            }
            return lease
        } catch {
            throw ArchiveError.wrap(error)
        }
    }

    /// Records that the lease holder has caught up with the disk and records every change as
    /// it happens from now on.
    package func markManifestCurrent(_ lease: WatchLease) throws {
        removeStaleWatchProbes()  // from now on each probe gets an answer
        do {
            try manifest.write { try $0.setMeta("watched_since", String(Manifest.now())) }
        } catch {
            throw ArchiveError.wrap(error)
        }
    }

    /// The live watcher of this store, if one holds the lease; `caughtUp` is whether it
    /// answered a probe just before this transaction.
    func currentWatcher(_ tx: ManifestTransaction, caughtUp: Bool = false) throws -> WatcherStatus? {
        guard let lease = try lockFile(named: Self.leaseFile, create: false), try lease.isHeldElsewhere(),
            let pid = lease.recordedHolder()
        else { return nil }
        let since = try tx.meta("watcher") == String(pid) ? try tx.meta("watched_since").flatMap { Int64($0) } : nil
        return WatcherStatus(
            pid: pid, currentSince: since.map { Date(timeIntervalSince1970: Double($0) / 1e9) }, caughtUp: caughtUp && since != nil)
    }
}

extension ArchiveStore {
    /// True when a watcher holds the store's lease and has caught up with the disk, so the
    /// manifest is current without a scan: it answered a probe through its event queue in
    /// time (see ``WatchProbe``). A stopped or stuck watcher does not.
    package func isKeptCurrentByWatcher() throws -> Bool {
        try watcherHasCaughtUp()
    }
}
