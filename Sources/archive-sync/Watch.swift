import ArchiveLocking
import ArchiveStore
import ArchiveSync
import ArchiveWatch
import ArgumentParser
import Dispatch
import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#endif

struct Watch: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Record every change to a store as it happens, and print one line per change.",
        discussion: """
            Scans the store first (to catch up with what changed while nothing watched), then records each change other programs make, through inotify, within milliseconds, and prints it: created/modified/deleted, the object, its new version, who made it. A full scan runs every --rescan-interval seconds as a safety net, and after the kernel's event queue overflows.

            Other processes' saves are printed coalesced: each object's latest version since the watcher last looked, as `created` when the object is new since then.

            While it runs it holds the store's watch lease and answers the probes that `status`, `diff` and `sync` send through its event queue, so they trust the manifest as current without a scan (a stopped watcher does not answer, and they scan); a second watcher on the same store is refused. It stops on SIGINT or SIGTERM within two seconds, during the first scan too, and exits 0. Logs go to stderr; changes go to stdout.

            Examples:
              archive-sync watch ./store
              archive-sync watch ./store --json >> changes.jsonl &
              nohup archive-sync watch ./store > watch.log 2>&1 &

            With --sync-with PEER (a directory or [user@]host:path; repeat it for several), it also keeps each peer in step with the store, as `sync STORE PEER --watch` does, and prints one line per object carried and per connection change instead of the changes (see `sync --help`). A peer whose safety valve trips stops with a message; the others keep running.
              archive-sync watch ./hub --sync-with ./spoke1 --sync-with user@host:/srv/spoke2

            A PEER may be a bucket replica, s3://BUCKET/PREFIX (docs/bucket.md): changes here are pushed after --debounce, and the bucket's logs are listed every --poll seconds (default 2; one request when nothing is new: object storage has no push). A server that fails is retried after 1 s, doubling to 60 s, and writes here keep working; `status` shows the session.
              archive-sync watch ./store --sync-with s3://team-data/archive --poll 5
            """
    )

    @OptionGroup var store: StoreArgument

    @Flag(help: "Print each change as one line of JSON.")
    var json = false

    @Option(help: ArgumentHelp("Milliseconds to gather events before recording them (0 records each at once).", valueName: "ms"))
    var debounce = 50

    @Option(help: ArgumentHelp("Seconds between full safety scans (0: never).", valueName: "seconds"))
    var rescanInterval = 3600

    @Option(name: .customLong("sync-with"), help: ArgumentHelp("Keep this store in step with the store as well (repeatable).", valueName: "peer"))
    var syncWith: [String] = []

    @Option(help: ArgumentHelp("With --sync-with: seconds of silence on a link before a ping (as `sync --watch`).", valueName: "seconds"))
    var keepalive: Double?

    @Option(
        help: ArgumentHelp(
            "With --sync-with: decide conflicts as `sync --prefer` does: a (this store), b (the peer), newer or older.", valueName: "side"))
    var prefer: SyncPreference?

    @Option(help: ArgumentHelp("With --sync-with: fields or none, as `sync --merge`.", valueName: "mode"))
    var merge: SyncMerge = .fields

    @Flag(help: "With --sync-with: as `sync --force`.")
    var force = false

    @Option(help: ArgumentHelp("With --sync-with s3://...: seconds between listings of the bucket's logs (default 2).", valueName: "seconds"))
    var poll: Double?

    @OptionGroup var remote: RemoteOptions

    func validate() throws {
        if let poll {
            guard syncWith.contains(where: isBucketURL) else { throw ValidationError("--poll goes with --sync-with s3://BUCKET/PREFIX") }
            guard (0.1...3600).contains(poll) else { throw ValidationError("--poll must be from 0.1 to 3600 seconds, not \(poll)") }
        }
        guard (0...60_000).contains(debounce) else { throw ValidationError("--debounce must be from 0 to 60000 milliseconds, not \(debounce)") }
        guard rescanInterval >= 0 else { throw ValidationError("--rescan-interval must be 0 (never) or a number of seconds, not \(rescanInterval)") }
        if syncWith.isEmpty && (keepalive != nil || prefer != nil || force) {
            throw ValidationError("--keepalive, --prefer and --force go with --sync-with")
        }
        try LiveArguments.validate(debounce: debounce, keepalive: keepalive)
    }

    func run() throws {
        LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
        var logger = Logger(label: "archive-sync")
        logger.logLevel = .info
        if !syncWith.isEmpty {
            let store = try self.store.open()
            var options = LiveArguments.options(
                debounce: debounce, keepalive: keepalive, sync: SyncOptions(preference: prefer, merge: merge, force: force), create: force)
            options.fullCompareInterval = rescanInterval == 0 ? nil : .seconds(rescanInterval)
            if let poll { options.poll = .milliseconds(Int(poll * 1_000)) }
            let sessions = try syncWith.map { peer in
                try isBucketURL(peer) ? bucketLiveSession(store, peer, options: options) : LiveSession(store, remote.location(peer), options: options)
            }
            return try runLive(sessions, json: json)
        }

        // Stop requests may come before the watcher exists (during the first scan).
        let stop = StopRequest()
        let signals = stop.onSignals()
        defer { signals.forEach { $0.cancel() } }

        let store = try self.store.open()
        let changes = store.changes  // subscribed before the first scan: its changes are printed too
        let json = self.json
        let printed = DispatchSemaphore(value: 0)
        Task {
            for await change in changes {
                FileHandle.standardOutput.write(Data((Self.line(for: change, json: json) + "\n").utf8))
            }
            printed.signal()
        }

        let options = WatchOptions(
            debounce: .milliseconds(debounce), rescanInterval: rescanInterval == 0 ? nil : .seconds(rescanInterval), logger: logger,
            trimsHeapAfterFullScans: true)
        // Started in a task that a stop cancels: the first scan of a large store takes long.
        let starting = Task.detached { try store.startWatching(options) }
        stop.whenRequested { starting.cancel() }
        let watcher: StoreWatcher
        switch Self.outcome(of: starting) {
        case .success(let started): watcher = started
        case .failure(is CancellationError):
            store.finishChanges()
            printed.wait()
            logger.info("stopped watching \(store.path) before it caught up; the next watch or scan records the rest")
            return
        case .failure(let error): throw error
        }
        let scan = watcher.initialScan
        logger.info(
            "watching \(store.path): caught up (\(scan.created) created, \(scan.modified) modified, \(scan.deleted) deleted, \(scan.unchanged) unchanged)"
        )
        stop.whenRequested { watcher.stop() }

        let ended = Self.outcome(of: Task { try await watcher.wait() })
        // Print every change recorded before the stop, then end.
        store.finishChanges()
        printed.wait()
        if case .failure(let error) = ended {
            throw WatchFailed(message: String(describing: error))
        }
        logger.info("stopped watching \(store.path)")
    }

    /// Blocks this thread until `task` ends, and returns how it ended.
    private static func outcome<T: Sendable>(of task: Task<T, any Error>) -> Result<T, any Error> {
        let result = TracedMutex<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            let value = await task.result
            result.withLock { $0 = value }
            done.signal()
        }
        done.wait()
        return result.withLock { $0! }
    }

    private static func line(for change: StoreChange, json: Bool) -> String {
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            return (try? String(decoding: encoder.encode(change), as: UTF8.self)) ?? ""
        }
        return terminalSafe("\(change.kind.rawValue) \(change.id) version \(change.version) (\(change.origin.rawValue))")
    }
}

/// SIGINT or SIGTERM: runs every action registered, whether it came before or after.
final class StopRequest: Sendable {
    private let state = TracedMutex<(requested: Bool, actions: [@Sendable () -> Void])>((false, []))

    func request() {
        let actions = state.withLock { state in
            state.requested = true
            defer { state.actions = [] }
            return state.actions
        }
        for action in actions { action() }
    }

    /// Requests the stop on SIGINT or SIGTERM from now on (instead of their default action).
    /// - Returns: the signal sources, to cancel when done.
    func onSignals() -> [any DispatchSourceSignal] {
        [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { self.request() }
            source.resume()
            return source
        }
    }

    /// Runs `action` when a stop is requested, or now if one was.
    func whenRequested(_ action: @escaping @Sendable () -> Void) {
        let requested = state.withLock { state in
            if !state.requested { state.actions.append(action) }
            return state.requested
        }
        if requested { action() }
    }
}

/// The watcher stopped on its own: printed as one line, exit status 1.
struct WatchFailed: ExitStatusError {
    let message: String
    var exitStatus: Int32 { ExitStatus.failure }
    var description: String { message }
}
