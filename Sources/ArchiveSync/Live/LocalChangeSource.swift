import ArchiveLocking
import ArchiveStore
import ArchiveWatch
import Foundation

/// Tells a live session when a store on this machine changed, without polling.
///
/// When no watcher holds the store's lease, this one takes it and watches the store (other
/// programs' edits are recorded in the manifest, as `archive-sync watch` records them). When
/// one does (another process, or another session of this one), the store is not watched
/// twice: the manifest's files are followed instead, and the watcher's records show up there.
/// Either way `changed` gets the store's change sequence each time it may have moved.
package final class LocalChangeSource: Sendable {
    package let store: ArchiveStore
    /// The watcher this source started; nil when another holds the lease.
    package let watcher: StoreWatcher?
    private let follower: ManifestFollower

    /// - Parameters:
    ///   - watch: options of the watcher this source starts when the lease is free.
    ///   - changed: called with the change sequence, on a thread of the source's, each time it
    ///     may have moved (and once at the start).
    package init(store: ArchiveStore, watch: WatchOptions, changed: @escaping @Sendable (Int) -> Void) throws {
        self.store = store
        // Followed first: a change recorded while the watcher starts is not missed.
        follower = try ManifestFollower(storePath: store.path) {
            if let sequence = try? store.changeSequence() { changed(sequence) }
        }
        do {
            watcher = try Self.watcher(store, watch)
        } catch {
            follower.stop()
            throw error
        }
        changed(try store.changeSequence())
    }

    /// Starts watching `store`, or nil when another watcher holds its lease.
    private static func watcher(_ store: ArchiveStore, _ options: WatchOptions) throws -> StoreWatcher? {
        do {
            return try store.startWatching(options)
        } catch ArchiveError.alreadyWatched {
            return nil
        }
    }

    /// Stops the watcher (if this source started one) and the follower.
    package func stop() {
        follower.stop()
        watcher?.stop()
        _ = watcher?.waitUntilStopped(timeout: .seconds(2))
    }

    /// The error that stopped this source's watcher on its own (the store was removed), if any.
    package var failure: (any Error)? {
        guard let watcher, watcher.waitUntilStopped(timeout: .zero) else { return nil }
        let result = TracedMutex<(any Error)?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            do { try await watcher.wait() } catch { result.withLock { $0 = error } }
            done.signal()
        }
        done.wait()
        return result.withLock { $0 }
    }
}
