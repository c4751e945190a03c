import ArchiveLocking
import ArchiveStore
import ArchiveSync
import ArgumentParser
import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The options of a live session on the command line: `sync --watch` and `watch --sync-with`.
struct LiveArguments: ParsableArguments {
    @Option(help: ArgumentHelp("With --watch: milliseconds to gather changes before a cycle (0: at once).", valueName: "ms"))
    var debounce: Int?

    @Option(
        help: ArgumentHelp(
            "With --watch: seconds of silence on a link to another host before a ping; 2.5 times this without a word gives the link up and reconnects (default 10).",
            valueName: "seconds"))
    var keepalive: Double?

    func validate() throws { try Self.validate(debounce: debounce, keepalive: keepalive) }

    static func validate(debounce: Int?, keepalive: Double?) throws {
        if let debounce, !(0...60_000).contains(debounce) {
            throw ValidationError("--debounce must be from 0 to 60000 milliseconds, not \(debounce)")
        }
        if let keepalive, !(0.01...3600).contains(keepalive) {
            throw ValidationError("--keepalive must be from 0.01 to 3600 seconds, not \(keepalive)")
        }
    }

    var isSet: Bool { debounce != nil || keepalive != nil }

    func options(sync: SyncOptions, create: Bool) -> LiveOptions {
        Self.options(debounce: debounce, keepalive: keepalive, sync: sync, create: create)
    }

    /// The session's options. `ARCHIVE_SYNC_RECONNECT_MS` sets the first reconnection delay
    /// (tests shorten it; the cap stays 60 times it).
    static func options(debounce: Int?, keepalive: Double?, sync: SyncOptions, create: Bool) -> LiveOptions {
        var sync = sync
        // Progress of long cycles (a first sync, a burst) on stderr when it is a terminal;
        // the next line printed clears it.
        sync.progress = { done, total in if total >= 1_000 { liveProgress.update(done, total) } }
        var options = LiveOptions(sync: sync, create: create)
        if let debounce { options.debounce = .milliseconds(debounce) }
        if let keepalive { options.keepalive = .milliseconds(Int(keepalive * 1_000)) }
        if let text = ProcessInfo.processInfo.environment["ARCHIVE_SYNC_RECONNECT_MS"], let ms = Int(text), ms > 0 {
            options.reconnectDelay = .milliseconds(ms)
            options.maximumReconnectDelay = .milliseconds(ms * 60)
        }
        return options
    }
}

/// The progress line of live sessions' long cycles.
private let liveProgress = ProgressLine("syncing")

/// Runs live sessions until SIGINT or SIGTERM (exit 0, within 2 s), printing one line per
/// object carried and per connection change. Ends with exit 1 when every session stopped on
/// its own (a safety valve).
func runLive(_ sessions: [LiveSession], json: Bool) throws {
    // A path that is no store is refused at once, with the one-shot sync's words and status.
    for session in sessions { try session.openStoresHere() }
    let stop = StopRequest()
    let signals = stop.onSignals()
    defer { signals.forEach { $0.cancel() } }
    signal(SIGPIPE, SIG_IGN)
    let printer = LivePrinter(json: json)
    let ended = DispatchGroup()
    let stoppedOnItsOwn = TracedMutex(0)
    for session in sessions {
        ended.enter()
        print(session.events(), of: session, with: printer) { stopped in
            if stopped { stoppedOnItsOwn.withLock { $0 += 1 } }
            ended.leave()
        }
        stop.whenRequested { session.stop() }
    }
    let interrupted = TracedMutex(false)
    stop.whenRequested {
        interrupted.withLock { $0 = true }
        // A cycle stops between pages; one page landing, or a far side not answering, could
        // take longer than the 2 s a stop may. Exiting then leaves each object old or new
        // (every write is atomic), and the next start completes the work.
        DispatchQueue.global().asyncAfter(deadline: .now() + 1.8) { exit(0) }
    }
    ended.wait()
    if !interrupted.withLock({ $0 }) && stoppedOnItsOwn.withLock({ $0 }) > 0 {
        throw LiveStopped()
    }
}

/// Prints `events` as they come, then calls `done` with whether the session stopped on its own.
private func print(
    _ events: AsyncStream<LiveEvent>, of session: LiveSession, with printer: LivePrinter, done: @escaping @Sendable (Bool) -> Void
) {
    Task.detached {
        var stopped = false
        for await event in events {
            printer.print(event, session: session)
            if case .stopped = event { stopped = true }
        }
        done(stopped)
    }
}

/// Every session stopped on its own; each said why.
struct LiveStopped: ExitStatusError {
    var exitStatus: Int32 { ExitStatus.failure }
    var description: String { "every live session stopped; nothing more is synced" }
}

/// Prints a session's events: text or JSON lines on stdout, one at a time whatever the session.
private final class LivePrinter: Sendable {
    private let json: Bool
    private let lock = TracedMutex(())

    init(json: Bool) { self.json = json }

    func print(_ event: LiveEvent, session: LiveSession) {
        let lines: [String]
        switch event {
        case .connected(let peer):
            lines = [json ? encode(["event": "connected", "peer": peer]) : "connected to \(peer)"]
        case .disconnected(let peer, let error, let retry):
            let seconds = Double(retry.components.seconds) + Double(retry.components.attoseconds) / 1e18
            lines = [
                json
                    ? encode(LiveStateLine(event: "disconnected", peer: peer, error: error, retrySeconds: seconds))
                    : "disconnected from \(peer): \(error); retrying in \(String(format: "%g", seconds)) s"
            ]
        case .stopped(let peer, let reason):
            lines = [
                json
                    ? encode(LiveStateLine(event: "stopped", peer: peer, error: reason, retrySeconds: nil))
                    : "stopped syncing with \(peer): \(reason)"
            ]
        case .cycle(let cycle):
            lines = cycle.objects.map { object in
                if json { return encode(LiveObjectLine(object, a: session.names.a, b: session.names.b)) }
                let (from, to) = object.direction == .aToB ? (session.names.a, session.names.b) : (session.names.b, session.names.a)
                return terminalSafe(
                    "\(object.kind.rawValue) \(object.id) version \(object.version) \(from) -> \(to) (\(String(format: "%.0f", object.latencyMilliseconds)) ms)"
                )
            }
        }
        guard !lines.isEmpty else { return }
        lock.withLock { _ in
            liveProgress.finish()
            FileHandle.standardOutput.write(Data((lines.joined(separator: "\n") + "\n").utf8))
        }
    }

    private func encode(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? String(decoding: encoder.encode(value), as: UTF8.self)) ?? ""
    }
}

private struct LiveStateLine: Encodable {
    var event: String
    var peer: String
    var error: String?
    var retrySeconds: Double?
}

/// `{"direction":"a-to-b","from":"./a","id":"Person/ada","kind":"copy","latencyMs":12.5,"to":"./b","version":3}`
private struct LiveObjectLine: Encodable {
    var event = "object"
    var direction: String
    var from: String
    var to: String
    var id: String
    var version: Int
    var kind: String
    var latencyMs: Double

    init(_ object: LiveObject, a: String, b: String) {
        direction = object.direction.rawValue
        (from, to) = object.direction == .aToB ? (a, b) : (b, a)
        id = object.id
        version = object.version
        kind = object.kind.rawValue
        latencyMs = (object.latencyMilliseconds * 10).rounded() / 10
    }
}
