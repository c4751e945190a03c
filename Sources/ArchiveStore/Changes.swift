import ArchiveLocking
import Synchronization

/// Hands each recorded change to every subscriber of ``ArchiveStore/changes``.
///
/// Changes this process records are published the moment their transaction commits. While
/// the store follows other processes (a watcher runs), it also reads the manifest for
/// changes they recorded, by sequence number, and publishes those it has not published yet.
///
/// The manifest keeps one row per object, so what other processes recorded between two
/// reads is coalesced, as CouchDB's changes feed does: each object's latest change, once.
/// A life that began between the two reads is reported as `created` (at its latest version),
/// never as `modified`: a subscriber never hears of a modification of an object it has not
/// been told exists.
final class ChangeFeed: Sendable {
    private struct State {
        var subscribers: [Int: AsyncStream<StoreChange>.Continuation] = [:]
        var nextSubscriber = 0
        /// While following other processes: every change up to this sequence has been published.
        var watermark: Int?
        /// Sequences above the watermark that this process already published itself.
        var publishedAbove: Set<Int> = []
    }

    private let state = TracedMutex(State())
    /// Called synchronously with every batch of changes published (see ``observe(_:)``).
    private let observers = TracedMutex<[Int: @Sendable ([StoreChange]) -> Void]>([:])
    private let nextObserver = Atomic<Int>(0)
    /// Counts each start and stop of following other processes: odd while following.
    let followGeneration = Atomic<Int>(0)

    /// Calls `body` with every batch of changes as it is published, before the write that
    /// recorded them returns. `body` runs with the manifest's connection locked: it must not
    /// use the store. Returns a token for ``stopObserving(_:)``.
    func observe(_ body: @escaping @Sendable ([StoreChange]) -> Void) -> Int {
        let token = nextObserver.add(1, ordering: .relaxed).newValue
        observers.withLock { $0[token] = body }
        return token
    }

    func stopObserving(_ token: Int) {
        _ = observers.withLock { $0.removeValue(forKey: token) }
    }

    private func notifyObservers(_ changes: [StoreChange]) {
        guard !changes.isEmpty else { return }
        for observer in observers.withLock({ Array($0.values) }) { observer(changes) }
    }

    /// A new subscription, starting now.
    func subscribe() -> AsyncStream<StoreChange> {
        let (stream, continuation) = AsyncStream.makeStream(of: StoreChange.self, bufferingPolicy: .unbounded)
        let id = state.withLock { state in
            defer { state.nextSubscriber += 1 }
            state.subscribers[state.nextSubscriber] = continuation
            return state.nextSubscriber
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    /// Ends every subscription, once each has delivered what it holds.
    func finishAll() {
        let subscribers = state.withLock { state in
            defer { state.subscribers = [:] }
            return Array(state.subscribers.values)
        }
        for subscriber in subscribers { subscriber.finish() }
    }

    /// Publishes changes this process recorded. Called with the manifest connection locked.
    func publish(_ changes: [StoreChange]) {
        let subscribers = state.withLock { state in
            if let watermark = state.watermark {
                for change in changes where change.sequence > watermark { state.publishedAbove.insert(change.sequence) }
            }
            return Array(state.subscribers.values)
        }
        notifyObservers(changes)
        for subscriber in subscribers {
            for change in changes { subscriber.yield(change) }
        }
    }

    /// Starts following other processes from `sequence` (changes up to it are not published).
    func follow(from sequence: Int) {
        state.withLock { state in
            state.watermark = sequence
            state.publishedAbove = []
            if followGeneration.load(ordering: .acquiring) % 2 == 0 { followGeneration.add(1, ordering: .acquiringAndReleasing) }
        }
    }

    /// Stops following other processes.
    func unfollow() {
        state.withLock { state in
            state.watermark = nil
            state.publishedAbove = []
            if followGeneration.load(ordering: .acquiring) % 2 == 1 { followGeneration.add(1, ordering: .acquiringAndReleasing) }
        }
    }

    /// The sequence to read other processes' changes after, or nil when not following.
    var watermark: Int? { state.withLock { $0.watermark } }

    /// Publishes what the manifest recorded after the watermark and this process did not
    /// publish itself. Called with the manifest connection locked.
    func publishOthers(_ changes: [(change: StoreChange, lifeBegan: Int?)]) {
        let (fresh, subscribers) = state.withLock { state -> ([StoreChange], [AsyncStream<StoreChange>.Continuation]) in
            guard let watermark = state.watermark else { return ([], []) }
            let fresh = changes.compactMap { change, lifeBegan -> StoreChange? in
                guard !state.publishedAbove.contains(change.sequence) else { return nil }
                // Begun after the last read and not by this process: no subscriber has seen it.
                guard change.kind == .modified, let lifeBegan, lifeBegan > watermark, !state.publishedAbove.contains(lifeBegan) else {
                    return change
                }
                return StoreChange(id: change.id, kind: .created, version: change.version, origin: change.origin, sequence: change.sequence)
            }
            if let last = changes.last?.change.sequence, last > watermark {
                state.watermark = last
                state.publishedAbove = state.publishedAbove.filter { $0 > last }
            }
            return (fresh, Array(state.subscribers.values))
        }
        notifyObservers(fresh)
        for subscriber in subscribers {
            for change in fresh { subscriber.yield(change) }
        }
    }
}

extension ArchiveStore {
    /// Every change to the store from now on, as it is recorded, for as long as the caller
    /// iterates. Each access starts a new subscription; ending the iteration ends it.
    ///
    /// It delivers this process's own saves, restores and removals (origin `local`) and what
    /// this process's scans find (`external`). While a watcher runs in this process
    /// (`ArchiveWatch`'s `store.startWatching()`), it also delivers what other processes
    /// wrote: each object's latest change since the watcher last read the manifest, once
    /// (`external`, or `sync` for a sync's). Versions another process recorded in between are
    /// not delivered one by one (``ArchiveStore/history(_:)`` keeps them), but an object
    /// created (or re-created after a delete) in between is delivered as `created`, never as
    /// `modified`; a `deleted` may name an object created and deleted in between.
    ///
    /// ```swift
    /// for await change in store.changes {
    ///     print(change.kind, change.id, change.version)   // modified Person/person1 3
    /// }
    /// ```
    ///
    /// The buffer is unbounded: a subscriber that stops reading without ending the loop
    /// keeps every later change in memory.
    public var changes: AsyncStream<StoreChange> { manifest.feed.subscribe() }

    /// Ends every current subscription to ``changes`` (each first delivers what it holds):
    /// their loops end. Later accesses to ``changes`` start new ones.
    public func finishChanges() {
        manifest.feed.finishAll()
    }

    /// Starts publishing other processes' changes to ``changes``: those recorded after now.
    package func followOtherProcesses() throws {
        do {
            try manifest.read { tx in manifest.feed.follow(from: try tx.currentSequence()) }
        } catch {
            throw ArchiveError.wrap(error)
        }
    }

    /// Stops publishing other processes' changes.
    package func unfollowOtherProcesses() {
        manifest.feed.unfollow()
    }

    /// Publishes to ``changes`` what other processes recorded since the last call.
    package func publishOtherProcessesChanges() throws {
        do {
            try manifest.read { tx in
                guard let watermark = manifest.feed.watermark else { return }
                manifest.feed.publishOthers(try tx.changes(after: watermark))
            }
        } catch {
            throw ArchiveError.wrap(error)
        }
    }
}
