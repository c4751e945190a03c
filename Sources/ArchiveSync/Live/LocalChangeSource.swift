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
/// Either way `changed` gets the store's change sequence each time it may have moved. When
/// the watcher followed stops or dies (its lease file is closed), this source takes the lease
/// over, so that the store stays watched.
package final class LocalChangeSource: Sendable {
    package let store: ArchiveStore
    /// The watcher this source started (nil while another holds the lease), and whether the
    /// source is stopped.
    private let shared = Shared()

    /// What the follower's lease thread and the source share.
    private final class Shared: Sendable {
        let state = TracedMutex<(watcher: StoreWatcher?, stopped: Bool, tryingLease: Bool)>((nil, false, false))
    }
    private let follower: ManifestFollower

    /// - Parameters:
    ///   - watch: options of the watcher this source starts when the lease is free.
    ///   - changed: called with the change sequence, on a thread of the source's, each time it
    ///     may have moved (and once at the start).
    package init(store: ArchiveStore, watch: WatchOptions, changed: @escaping @Sendable (Int) -> Void) throws {
        self.store = store
        let shared = self.shared
        // Followed first: a change recorded while the watcher starts is not missed.
        follower = try ManifestFollower(
            storePath: store.path,
            changed: {
                if let sequence = try? store.changeSequence() { changed(sequence) }
            },
            leaseClosed: {
                // On a thread of its own: taking the lease may wait for a holder to let go.
                let trying = shared.state.withLock { state in
                    defer { state.tryingLease = true }
                    return state.watcher != nil || state.stopped || state.tryingLease
                }
                guard !trying else { return }
                Thread {
                    let started = try? Self.watcher(store, watch)
                    let extra = shared.state.withLock { state in
                        defer { state.tryingLease = false }
                        guard let started, state.watcher == nil, !state.stopped else { return started }
                        state.watcher = started
                        return nil
                    }
                    extra?.stop()
                }.start()
            })
        do {
            let watcher = try Self.watcher(store, watch)
            // The follower's thread may have taken the lease while this start waited for it
            // (its file's close woke it): the watcher it stored is the one to keep, never
            // overwritten, or it would outlive `stop()` with the lease.
            let extra = shared.state.withLock { state -> StoreWatcher? in
                guard let watcher, state.watcher == nil else { return watcher }
                state.watcher = watcher
                return nil
            }
            extra?.stop()
        } catch {
            follower.stop()
            throw error
        }
        changed(try store.changeSequence())
    }

    /// The watcher this source started; nil while another holds the lease.
    package var watcher: StoreWatcher? { shared.state.withLock { $0.watcher } }

    /// Starts watching `store`, or nil when another watcher holds its lease.
    private static func watcher(_ store: ArchiveStore, _ options: WatchOptions) throws -> StoreWatcher? {
        // A lease held by a running watcher (`archive-sync watch`, another session) is
        // followed at once: trying to take it would wait out the lock's patience (1 s) first,
        // on each side of a session's start. A holder that is only stopping is followed
        // too, and its lease taken over when it closes.
        guard (try? store.lockFile(named: "watch.lock")?.isHeldElsewhere()) != true else { return nil }
        do {
            return try store.startWatching(options)
        } catch ArchiveError.alreadyWatched {
            return nil
        }
    }

    /// Stops the watcher (if this source started one) and the follower.
    package func stop() {
        follower.stop()
        let watcher = shared.state.withLock { state in
            state.stopped = true
            return state.watcher
        }
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
