import ArchiveStore
import CArchiveShims
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Why a watcher could not start, or stopped on its own.
public enum WatchError: ExitStatusError, Sendable, Equatable {
    /// A watcher that could not start or stopped on its own is a failure (exit status 1).
    public var exitStatus: Int32 { ExitStatus.failure }

    /// The store's directory (or one it needed) was deleted or moved away while watched.
    case storeRemoved(path: String)
    /// The kernel's limit on inotify watches for this user is reached.
    case watchLimitReached(path: String, limit: Int)
    /// inotify itself failed.
    case inotifyUnavailable(reason: String)
    /// The manifest file the watcher records into was removed or replaced (`how`) by another
    /// program: what it recorded from then on would be lost.
    case manifestReplaced(path: String, how: String)
    /// The store's `.archive-sync` directory (its manifest and history) was removed or moved
    /// away while the store's own directory stayed.
    case metadataRemoved(path: String)

    public var description: String {
        switch self {
        case .storeRemoved(let path):
            return "\(path) was deleted or moved away while watched; watching stopped"
        case .watchLimitReached(let path, let limit):
            return
                "cannot watch \(path): the inotify watch limit (\(limit), /proc/sys/fs/inotify/max_user_watches) is reached; raise it with `sysctl fs.inotify.max_user_watches=524288`"
        case .inotifyUnavailable(let reason):
            return "inotify failed: \(reason)"
        case .metadataRemoved(let path):
            return
                "the \(ArchiveStore.metadataDirectoryName) directory of \(path) (its manifest and history) was removed or moved away while watched; watching stopped (`archive-sync init \(path)` makes it a store again, with a new replica id and no history)"
        case .manifestReplaced(let path, let how):
            return
                "the manifest of \(path) was \(how) while watched, so changes could no longer be recorded; watching stopped (start it again, after `archive-sync repair \(path)` if the store is refused)"
        }
    }
}

/// How a watcher works.
public struct WatchOptions: Sendable {
    /// How long to gather events before recording them: a burst, or an editor's
    /// write-then-rename, becomes one scan and one change. Default: 50 ms. Zero records each
    /// event as soon as the watcher is free.
    public var debounce: Duration
    /// How often to scan the whole store anyway, as a safety net for what inotify cannot
    /// see (hard links, changes made while the file system was mounted elsewhere). Default:
    /// one hour; nil never.
    public var rescanInterval: Duration?
    /// Where the watcher reports overflows, rescans and failures. Default: a logger that
    /// goes wherever the process bootstrapped swift-log to.
    public var logger: Logger
    /// Whether to hand the heap's free pages back to the system (glibc's `malloc_trim`) after
    /// each full scan, whose tables hold a row's stamp per object until it ends. Trimming acts
    /// on the whole process's heap, so it is the program's choice: default false. The
    /// `archive-sync watch` command sets it.
    public var trimsHeapAfterFullScans: Bool

    public init(
        debounce: Duration = .milliseconds(50), rescanInterval: Duration? = .seconds(3600),
        logger: Logger = Logger(label: "archive-sync.watch"), trimsHeapAfterFullScans: Bool = false
    ) {
        self.debounce = debounce
        self.rescanInterval = rescanInterval
        self.logger = logger
        self.trimsHeapAfterFullScans = trimsHeapAfterFullScans
    }
}

/// What a watcher has done so far.
public struct WatchStatistics: Sendable, Codable, Equatable {
    /// Paths the kernel reported (before coalescing).
    public var events = 0
    /// Times the watcher recorded a gathered set of paths.
    public var batches = 0
    /// Times the kernel's event queue overflowed (each followed by a full scan).
    public var overflows = 0
    /// Full scans after the first: overflows, periodic rescans, retries after an error.
    public var fullScans = 0
    /// Probes answered: readers (`status`, `diff`, `sync`) told that everything before their
    /// probe is recorded, so that they need not scan.
    public var probes = 0
}

extension ArchiveStore {
    /// Starts watching this store's directory: from now on every change another program makes
    /// is recorded in the manifest within milliseconds and delivered to ``ArchiveStore/changes``,
    /// along with what other processes recorded themselves.
    ///
    /// ```swift
    /// let watcher = try store.startWatching()
    /// for await change in store.changes { print(change) }   // includes other programs' edits
    /// watcher.stop()
    /// ```
    ///
    /// It takes the store's watch lease first (one watcher per store, across all processes),
    /// then watches every collection directory, then scans the whole store to catch up with
    /// what changed while nothing watched; the returned watcher's ``StoreWatcher/initialScan``
    /// is that scan. It runs until ``StoreWatcher/stop()`` or until it fails (the store is
    /// deleted while watched): ``StoreWatcher/wait()`` tells which.
    ///
    /// When the calling task is cancelled during the first scan, the scan stops within a
    /// fraction of a second, what it recorded stays recorded, the lease is released, and this
    /// throws `CancellationError`: the next watcher's (or scan's) first scan records the rest.
    ///
    /// - Throws: ``ArchiveError/alreadyWatched(path:pid:)`` when another watcher holds the
    ///   lease; ``WatchError`` when inotify cannot watch the store; `CancellationError`.
    public func startWatching(_ options: WatchOptions = WatchOptions()) throws -> StoreWatcher {
        try StoreWatcher(store: self, options: options)
    }
}

/// A running watcher of one store. See ``ArchiveStore/startWatching(_:)``.
public final class StoreWatcher: Sendable {
    /// The store watched.
    public let store: ArchiveStore
    /// What the first full scan found and recorded: its counts (each change it recorded went
    /// to ``ArchiveStore/changes``; a list of them is not kept for the watcher's lifetime).
    public let initialScan: ScanCounts

    private let options: WatchOptions
    private let lease: WatchLease
    private let inbox = Inbox()

    fileprivate init(store: ArchiveStore, options: WatchOptions) throws {
        self.store = store
        self.options = options
        lease = try store.acquireWatchLease()
        do {
            try store.followOtherProcesses()
            // Watch first, then scan: a change made during the scan is either in the scan or
            // in an event after it (a few are in both; recording one twice changes nothing).
            try InotifyThread.shared.add(store: ObjectIdentifier(store), root: store.path, sink: inbox)
            initialScan = try store.scan(until: { Task.isCancelled }).counts
            try store.markManifestCurrent(lease)
            if options.trimsHeapAfterFullScans { archive_trim_heap() }
        } catch {
            InotifyThread.shared.remove(store: ObjectIdentifier(store))
            store.unfollowOtherProcesses()
            lease.release()
            throw error
        }
        let thread = Thread { [self] in run() }
        thread.name = "archive-sync watch"
        thread.start()
    }

    /// What the watcher has done so far.
    public var statistics: WatchStatistics { inbox.statistics }

    /// Stops watching: the chunk of changes being recorded (if any) finishes, nothing more is
    /// (a full scan stops halfway; the next one records the rest), and the lease is released.
    /// Returns at once; ``wait()`` returns when the watcher has stopped.
    public func stop() {
        inbox.post(.stop)
    }

    /// Waits until the watcher has stopped, after ``stop()`` or on a failure.
    /// - Throws: the ``WatchError`` that stopped it, if it was not ``stop()``.
    public func wait() async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            inbox.whenFinished { result in continuation.resume(with: result) }
        }
    }

    /// Waits, blocking the calling thread, until the watcher has stopped or `timeout` passes.
    /// - Returns: false when the timeout passed first.
    public func waitUntilStopped(timeout: Duration) -> Bool {
        inbox.waitUntilFinished(timeout: timeout)
    }

    // MARK: The watcher's thread

    /// How often the watcher checks, when nothing else wakes it, that its manifest file is
    /// still the one at the manifest's path (inotify does not watch `.archive-sync/`).
    private static let manifestCheckInterval = Duration.seconds(1)

    /// `rm -rf STORE` removes the manifest first, then `.archive-sync`, then the root: a
    /// manifest or metadata directory seen gone is given half a second for the rest to go too
    /// before only that part is said to be lost.
    private static func settled(_ error: WatchError) -> WatchError {
        var error = error
        let path: String
        switch error {
        case .metadataRemoved(let root): path = root
        case .manifestReplaced(let root, "removed"): path = root
        default: return error
        }
        for _ in 0..<50 {
            if FileSystem.entryKind(atPath: path, followingSymlink: true) == nil { return .storeRemoved(path: path) }
            if case .manifestReplaced = error, FileSystem.entryKind(atPath: path.appendingComponent(ArchiveStore.metadataDirectoryName)) == nil {
                error = .metadataRemoved(path: path)
            }
            usleep(10_000)
        }
        return error
    }

    private func run() {
        let logger = options.logger
        let clock = ContinuousClock()
        var nextRescan = options.rescanInterval.map { clock.now + $0 }
        var failure: (any Error)?
        var retryDelay = 1.0
        while true {
            // Woken at least every manifestCheckInterval to look at the manifest file.
            let check = clock.now + Self.manifestCheckInterval
            let batch = inbox.next(debounce: options.debounce, deadline: nextRescan.map { min($0, check) } ?? check)
            if batch.stop { break }
            if let error = batch.failure {
                failure = Self.settled(error)
                break
            }
            if let how = store.manifestChange {
                failure = Self.settled(WatchError.manifestReplaced(path: store.path, how: how))
                break
            }
            let rescan = batch.overflow || batch.retry || nextRescan.map { clock.now >= $0 } ?? false
            // A wake-up only to look at the manifest file: nothing to record or answer.
            if !rescan && batch.paths.isEmpty && batch.probes.isEmpty { continue }
            let stopRequested = { [inbox] in inbox.stopRequested }
            do {
                if rescan {
                    if batch.overflow {
                        logger.notice("the kernel's event queue overflowed: scanning the whole store", metadata: ["store": "\(store.path)"])
                    }
                    let report = try store.scan(until: stopRequested)
                    if options.trimsHeapAfterFullScans { archive_trim_heap() }
                    inbox.count { $0.fullScans += 1 }
                    logger.info(
                        "full scan: \(report.created) created, \(report.modified) modified, \(report.deleted) deleted",
                        metadata: ["store": "\(store.path)"])
                    nextRescan = options.rescanInterval.map { clock.now + $0 }
                } else if !batch.paths.isEmpty {
                    _ = try store.scan(paths: batch.paths, until: stopRequested)
                }
                try store.publishOtherProcessesChanges()
                answer(batch.probes)
                retryDelay = 1
            } catch is CancellationError {
                continue  // a stop came; the next batch hands it over
            } catch {
                if !store.directoryExists {
                    failure = WatchError.storeRemoved(path: store.path)
                    break
                }
                // Nothing recorded is lost (each chunk is a transaction); try again with a full
                // scan, waiting longer each time it fails (up to a minute).
                logger.error(
                    "recording changes failed, scanning again in \(Int(retryDelay)) s: \(error)", metadata: ["store": "\(store.path)"])
                if !inbox.sleep(seconds: retryDelay) { break }
                retryDelay = min(retryDelay * 2, 60)
                inbox.post(.retry)
            }
        }
        InotifyThread.shared.remove(store: ObjectIdentifier(store))
        store.unfollowOtherProcesses()
        lease.release()
        if let failure { logger.error("\(failure)", metadata: ["store": "\(store.path)"]) }
        inbox.finish(failure.map { .failure($0) } ?? .success(()))
    }

    /// Answers probes that came after every path just recorded (see `WatchProbe`). Probes of
    /// a batch that failed get no answer: their readers scan.
    private func answer(_ probes: [String]) {
        guard !probes.isEmpty else { return }
        inbox.count { $0.probes += probes.count }  // first: a reader may look as soon as it has its answer
        for probe in probes { store.answerWatchProbe(probe) }
    }
}

extension ArchiveStore {
    /// True while the store's directory is still where it was opened, with its metadata
    /// directory in it (a symlink put in its place is not followed, and does not count).
    fileprivate var directoryExists: Bool {
        FileSystem.entryKind(atPath: path.appendingComponent(ArchiveStore.metadataDirectoryName)) == .directory
    }
}

/// The watcher's mailbox: hints from the inotify thread and commands from its owner, gathered
/// until the watcher's thread takes them. Its state is guarded by `condition`.
private final class Inbox: WatchHintSink, @unchecked Sendable {
    enum Message {
        case hint(WatchHint)
        case stop
        case retry
    }

    struct Batch {
        var paths: Set<String> = []
        /// Probes, in the order they came: answered once `paths` are recorded.
        var probes: [String] = []
        var overflow = false
        var retry = false
        var stop = false
        var failure: WatchError?
    }

    private let condition = NSCondition()
    private var pending = Batch()
    private var firstPending: ContinuousClock.Instant?
    private var stats = WatchStatistics()
    private var result: Result<Void, any Error>?
    private var waiters: [@Sendable (Result<Void, any Error>) -> Void] = []

    func post(_ hint: WatchHint) { post(.hint(hint)) }

    func post(_ message: Message) {
        condition.lock()
        defer { condition.unlock() }
        switch message {
        case .hint(.path(let path)):
            pending.paths.insert(path)
            stats.events += 1
        case .hint(.probe(let name)): pending.probes.append(name)
        case .hint(.overflow):
            pending.overflow = true
            stats.overflows += 1
        case .hint(.failed(let error)): pending.failure = error
        case .stop: pending.stop = true
        case .retry: pending.retry = true
        }
        if firstPending == nil { firstPending = .now }
        // Broadcast: threads in waitUntilFinished wait on this condition too, and a signal
        // could wake one of them instead of the watcher's thread.
        condition.broadcast()
    }

    /// Waits for something to do: a stop, a failure or a probe (its reader waits) at once;
    /// paths once the first of them is `debounce` old; nothing (an empty batch) at `deadline`.
    func next(debounce: Duration, deadline: ContinuousClock.Instant?) -> Batch {
        condition.lock()
        defer { condition.unlock() }
        while true {
            if pending.stop || pending.failure != nil || !pending.probes.isEmpty { break }
            let now = ContinuousClock.now
            if let first = firstPending, now >= first + debounce { break }
            if let deadline, now >= deadline { break }
            var wake = firstPending.map { $0 + debounce } ?? deadline
            if let deadline, let due = wake, deadline < due { wake = deadline }
            if let wake {
                _ = condition.wait(until: Date(timeIntervalSinceNow: Self.seconds(wake - now)))
            } else {
                condition.wait()
            }
        }
        defer {
            pending = Batch()
            firstPending = nil
        }
        if !pending.paths.isEmpty || pending.overflow { stats.batches += 1 }
        return pending
    }

    /// Waits `seconds`, or less if a stop comes. Returns false on a stop (left pending).
    func sleep(seconds: Double) -> Bool {
        let limit = Date(timeIntervalSinceNow: seconds)
        condition.lock()
        defer { condition.unlock() }
        while !pending.stop {
            if !condition.wait(until: limit) { break }
        }
        return !pending.stop
    }

    /// True once a stop is posted (and not yet handed over by ``next(debounce:deadline:)``).
    var stopRequested: Bool {
        condition.lock()
        defer { condition.unlock() }
        return pending.stop
    }

    func count(_ update: (inout WatchStatistics) -> Void) {
        condition.lock()
        defer { condition.unlock() }
        update(&stats)
    }

    var statistics: WatchStatistics {
        condition.lock()
        defer { condition.unlock() }
        return stats
    }

    func finish(_ value: Result<Void, any Error>) {
        condition.lock()
        result = value
        let waiting = waiters
        waiters = []
        condition.broadcast()
        condition.unlock()
        for waiter in waiting { waiter(value) }
    }

    func whenFinished(_ waiter: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        condition.lock()
        guard let result else {
            waiters.append(waiter)
            condition.unlock()
            return
        }
        condition.unlock()
        waiter(result)
    }

    func waitUntilFinished(timeout: Duration) -> Bool {
        let limit = Date(timeIntervalSinceNow: Self.seconds(timeout))
        condition.lock()
        defer { condition.unlock() }
        while result == nil {
            if !condition.wait(until: limit) { return result != nil }
        }
        return true
    }

    private static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
