import ArchiveLocking
import ArchiveStore
import Foundation

/// Keeps two stores in step until stopped: each side is watched (a far side by
/// `serve --stdio` in its watch mode, over one connection for the session's life), and each
/// change starts an incremental sync after a short debounce.
///
/// ```swift
/// let session = LiveSession(.directory("laptop"), StoreLocation("me@server:/srv/store"))
/// for await event in session.events() {          // cancelling this task stops the session
///     if case .cycle(let cycle) = event { print(cycle.report.summary) }
/// }
/// ```
///
/// A cycle is a ``Sync``: the same plan, the same conflict copies and winners, the same
/// guarantees (each object old or new whenever it stops). The first cycle, at the start and
/// after each reconnection, is incremental from both checkpoints (what changed while the
/// session was down crosses at once); a full compare, the safety net, runs right after it and
/// at ``LiveOptions/fullCompareInterval``. Writes a cycle made are
/// never sent back, and when neither side's change sequence moved past what the other has
/// merged no cycle runs at all: a quiet pair of stores costs nothing but keepalives. A far side
/// that goes away is retried with capped exponential backoff while the side here keeps
/// recording its writes. A safety valve (more than half of a side deleted, a side that is no
/// store) stops the session with ``LiveEvent/stopped(peer:reason:)`` and deletes nothing.
public final class LiveSession: Sendable {
    /// The two stores, as named.
    public let names: (a: String, b: String)
    private let sides: (a: LiveSide, b: LiveSide)
    private let options: LiveOptions
    private let signals = LiveSignals()
    private let started = TracedMutex(false)

    /// A session between two stores, each in a directory here or on another host.
    public convenience init(_ a: StoreLocation, _ b: StoreLocation, options: LiveOptions = LiveOptions()) {
        self.init(sides: (LiveSide(.a, location: a), LiveSide(.b, location: b)), options: options)
    }

    /// A session between a store this process has opened (a hub's, shared by several
    /// sessions: the first watches it, the others follow its manifest) and `peer`.
    public convenience init(_ store: ArchiveStore, _ peer: StoreLocation, options: LiveOptions = LiveOptions()) {
        self.init(sides: (LiveSide(.a, location: .directory(store.path), store: store), LiveSide(.b, location: peer)), options: options)
    }

    /// A session between a store this process has opened and a peer that is polled (a
    /// bucket: ArchiveBucket's `BucketReplicas.liveSession`).
    package convenience init(_ store: ArchiveStore, polled peer: any PolledPeer, options: LiveOptions = LiveOptions()) {
        self.init(sides: (LiveSide(.a, location: .directory(store.path), store: store), LiveSide(.b, polled: peer, for: store)), options: options)
    }

    private init(sides: (a: LiveSide, b: LiveSide), options: LiveOptions) {
        self.sides = sides
        self.options = options
        names = (sides.a.name, sides.b.name)
    }

    /// Opens the stores here and starts watching them, so that a directory that is not a store
    /// (or one inotify cannot watch) is refused before ``events()``, with the error a one-shot
    /// sync gives. Optional: ``events()`` opens them otherwise. Call it before ``events()``.
    public func openStoresHere() throws {
        do {
            try sides.a.open(options: options, signals: signals)
            try sides.b.open(options: options, signals: signals)
        } catch {
            sides.a.close()
            sides.b.close()
            throw error
        }
    }

    /// Starts the session (once) and reports what it does until it ends: after ``stop()``,
    /// when the task iterating is cancelled, or after ``LiveEvent/stopped(peer:reason:)``.
    public func events() -> AsyncStream<LiveEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: LiveEvent.self)
        let first = started.withLock { started in
            defer { started = true }
            return !started
        }
        guard first else {
            continuation.finish()
            return stream
        }
        let signals = self.signals
        continuation.onTermination = { _ in signals.stop() }
        let thread = Thread { [self] in
            run { continuation.yield($0) }
            continuation.finish()
        }
        thread.name = "archive-sync live"
        thread.start()
        return stream
    }

    /// Stops the session: a cycle running stops between pages (each object old or new), the
    /// connections close, the watchers stop. Returns at once; ``events()`` ends when done.
    public func stop() { signals.stop() }

    // MARK: The session's thread

    private var peerName: String { sides.b.isRemote || !sides.a.isRemote ? names.b : names.a }

    private func run(_ emit: (LiveEvent) -> Void) {
        let status = LiveStatusBoard(peer: peerName, sides: [sides.a, sides.b])
        defer {
            sides.a.close()
            sides.b.close()
            status.remove()
        }
        do {
            try sides.a.open(options: options, signals: signals)
            try sides.b.open(options: options, signals: signals)
        } catch {
            emit(.stopped(peer: peerName, reason: "\(error)"))
            return
        }
        status.publish()
        let clock = ContinuousClock()
        var connected = false
        // A far side that cannot serve at the first connection (its program missing, a
        // handshake it refuses) is given up; once it has served, a failed reconnection is
        // retried (a host being upgraded can refuse for a while).
        var everConnected = false
        var delay = options.reconnectDelay
        var retryAt = clock.now
        // At the start and after each reconnection a cycle runs at once, incremental from both
        // checkpoints (what either side changed while the session was down, delivered without
        // reading either manifest whole); the full compare, the safety net, is the cycle right
        // after it (docs/live.md: start-up).
        var startDue = true
        var fullDue = false
        var nextFull: ContinuousClock.Instant?
        var checkpoints: (a: Int?, b: Int?) = (nil, nil)
        // A cycle that skipped objects (they changed while it ran) moved no checkpoint: the
        // next one runs after this delay even if no change wakes it, doubling while skips go on.
        var retrySkipped: ContinuousClock.Instant?
        var skipDelay = Duration.milliseconds(100)
        // A polled peer is asked after this much quiet (a cycle reads it too).
        let polls = sides.b.isPolled
        var nextPoll: ContinuousClock.Instant?

        /// Gives the far side(s) up and schedules the next attempt.
        func lose(_ why: String) {
            sides.a.disconnect()
            sides.b.disconnect()
            connected = false
            retryAt = clock.now + delay
            emit(.disconnected(peer: peerName, error: why, retryIn: delay))
            status.update {
                $0.connected = false; $0.lastError = why
            }
            delay = min(delay * 2, options.maximumReconnectDelay)
        }

        while !signals.stopRequested {
            if !connected {
                guard signals.sleep(until: retryAt) else { break }
                do {
                    try sides.a.connect(peer: sides.b.replica?.replica, options: options, signals: signals)
                    try sides.b.connect(peer: sides.a.replica?.replica, options: options, signals: signals)
                    connected = true
                    everConnected = true
                    delay = options.reconnectDelay
                    startDue = true
                    fullDue = false
                    if sides.a.isRemote || sides.b.isRemote { emit(.connected(peer: peerName)) }
                    status.update { $0.connected = true }
                } catch {
                    if let reason = Self.safetyValve(error) ?? (everConnected ? nil : Self.cannotServe(error)) {
                        emit(.stopped(peer: peerName, reason: reason))
                        status.update { $0.lastError = reason }
                        return
                    }
                    lose("\(error)")
                    continue
                }
            }
            if !fullDue && !startDue {
                var seen = signals.sequences
                var retryDue = false
                let deadline = [nextFull, retrySkipped, nextPoll].compactMap { $0 }.min()
                // The debounce again, over both sides: a burst recorded in pieces (a removal of
                // most of a store, say) is planned as one, and its safety valve sees all of it.
                switch signals.wait(debounce: options.debounce, deadline: deadline) {
                case .stop: return
                case .lost(_, let why):
                    lose(why)
                    continue
                case .deadline:
                    fullDue = nextFull.map { clock.now >= $0 } ?? false
                    if let retry = retrySkipped, clock.now >= retry { retryDue = true }
                    if !fullDue && !retryDue, let poll = nextPoll, clock.now >= poll {
                        nextPoll = clock.now + options.poll
                        // News moves the peer's sequence: the next wake is a cycle, after the debounce.
                        do { try sides.b.poll(signals: signals) } catch { lose("\(error)") }
                        continue
                    }
                case .changes(let sequences): seen = sequences
                }
                if let failure = sides.a.watchFailure ?? sides.b.watchFailure {
                    emit(.stopped(peer: peerName, reason: "\(failure)"))
                    status.update { $0.lastError = "\(failure)" }
                    return
                }
                let behind = Self.behind(seen, checkpoints)
                status.update { $0.behind = behind }
                // Nothing past what the other side has merged (a cycle's own writes): no cycle.
                if !fullDue && !retryDue && behind == 0 && checkpoints.a != nil && checkpoints.b != nil { continue }
            }
            // Changes from here on are the next cycle's, or this one's: none is lost.
            signals.clearPending()
            guard let a = sides.a.replica, let b = sides.b.replica else { continue }
            let begun = Date()
            let objects = TracedMutex<[LiveObject]>([])
            var syncOptions = options.sync
            syncOptions.dryRun = false
            syncOptions.full = syncOptions.full || fullDue
            let signals = self.signals
            // Between full compares both sides are watched (here, or by the far side's
            // `serve`): their manifests are current, and what is not recorded yet starts a
            // cycle of its own once it is.
            var step: (@Sendable (String) -> Void)?
            if LiveTrace.enabled { step = { @Sendable name in LiveTrace.line("cycle " + name) } }
            let landed = TracedMutex<SyncReport?>(nil)
            let observer = SyncObserver(
                propagated: { object in objects.withLock { $0.append(object) } }, shouldStop: { signals.stopRequested },
                manifestsCurrent: !syncOptions.full, step: step, pageLanded: { report in landed.withLock { $0 = report } })
            // A cycle that fails after objects landed (a link lost between pages) still says
            // which: they landed, and no later cycle carries them again.
            func reportLanded(before error: any Error) {
                let carried = objects.withLock { $0 }
                guard !carried.isEmpty else { return }
                let report =
                    landed.withLock { $0 }
                    ?? SyncReport(a: names.a, b: names.b, dryRun: false, incremental: !syncOptions.full, scannedA: false, scannedB: false)
                emit(
                    .cycle(
                        LiveCycle(
                            report: report, objects: carried, full: !report.incremental, started: begun, seconds: Date().timeIntervalSince(begun),
                            error: error is CancellationError ? "the session stopped" : "\(error)")))
            }
            LiveTrace.line("cycle start full=\(syncOptions.full)")
            do {
                let report = try Sync(a: a, b: b, options: syncOptions, observer: observer).runNow()
                checkpoints = (try b.checkpoint(for: a.replica), try a.checkpoint(for: b.replica))
                LiveTrace.line(Self.cycleEndTrace(objects.withLock { $0 }, report, checkpoints))
                // A walk of everything: asked for, or because the checkpoints did not allow less.
                let compared = !report.incremental
                let cycle = LiveCycle(
                    report: report, objects: objects.withLock { $0 }, full: compared, started: begun, seconds: Date().timeIntervalSince(begun))
                if compared { nextFull = options.fullCompareInterval.map { clock.now + $0 } }
                if report.skipped.isEmpty {
                    retrySkipped = nil
                    skipDelay = .milliseconds(100)
                } else {
                    retrySkipped = clock.now + skipDelay
                    skipDelay = min(skipDelay * 2, .seconds(30))
                }
                // The start's incremental cycle is followed at once by the full compare it owes.
                fullDue = startDue && !compared
                startDue = false
                if polls { nextPoll = clock.now + options.poll }
                emit(.cycle(cycle))
                let behind = Self.behind(signals.sequences, checkpoints)
                status.update {
                    $0.lastCycle = Date()
                    $0.behind = behind
                    $0.lastError = nil
                }
                // Skipped objects changed during the cycle; their change brings the next one.
            } catch is CancellationError {
                reportLanded(before: CancellationError())
                return
            } catch {
                reportLanded(before: error)
                if let reason = Self.safetyValve(error) {
                    emit(.stopped(peer: peerName, reason: reason))
                    status.update { $0.lastError = reason }
                    return
                }
                if Self.isBusy(error) {
                    // Another session or sync holds a store's lock for a moment: try again soon.
                    signals.markPending()
                    guard signals.sleep(until: clock.now + .milliseconds(50)) else { return }
                    continue
                }
                lose("\(error)")
            }
        }
    }

    /// How many changes (by sequence) of either side the other has not merged yet.
    private static func behind(_ seen: [SyncSide: Int], _ checkpoints: (a: Int?, b: Int?)) -> Int {
        max(0, (seen[.a] ?? 0) - (checkpoints.a ?? 0)) + max(0, (seen[.b] ?? 0) - (checkpoints.b ?? 0))
    }

    /// The message when `error` is a safety valve that stops the session for good.
    private static func safetyValve(_ error: any Error) -> String? {
        switch error {
        case SyncError.tooManyDeletes, SyncError.sameReplica, SyncError.tooLarge:
            return
                "\(error); syncing with this peer stopped and nothing was deleted (run a one-shot `sync`, with --force if it is meant, then start again)"
        case ArchiveError.notAStore:
            return "\(error); syncing with this peer stopped"
        case let error as any LiveStoppingError where error.stopsLiveSession:
            return "\(error); syncing with this peer stopped"
        case SyncError.remote(let message) where message.contains("is not a usable store"),
            SyncError.farSideCannotServe(let message) where message.contains("is not a usable store"):
            return "\(message); syncing with this peer stopped"
        default:
            return nil
        }
    }

    /// The message when `error` says the far side cannot serve, which trying again will not mend.
    private static func cannotServe(_ error: any Error) -> String? {
        guard case SyncError.farSideCannotServe(let message) = error else { return nil }
        return "\(message); syncing with this peer stopped, since trying again would not help"
    }

    private static func isBusy(_ error: any Error) -> Bool {
        if case ArchiveError.busy = error { return true }
        if case SyncError.remote(let message) = error, message.contains("another sync of") { return true }
        return false
    }
}

extension LiveSession {
    /// The trace line of a finished cycle, with the first 20 objects and skips: enough to
    /// follow a test's few objects.
    fileprivate static func cycleEndTrace(_ carried: [LiveObject], _ report: SyncReport, _ checkpoints: (a: Int?, b: Int?)) -> String {
        let first = carried.prefix(20).map { "\($0.direction.rawValue):\($0.id):\($0.version):\($0.kind.rawValue)" }
        let skipped = report.skipped.prefix(20).map { "\($0.side):\($0.id)" }
        return "cycle end objects=\(carried.count) \(first) skipped=\(report.skipped.count) \(skipped) vm=\(report.vectorsMerged)"
            + " incremental=\(report.incremental) checkpoints=\(checkpoints.a ?? -1),\(checkpoints.b ?? -1)"
    }
}
