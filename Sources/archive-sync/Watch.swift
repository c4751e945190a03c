import ArchiveLocking
import ArchiveStore
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

            While it runs it holds the store's watch lease, so `status` reports the manifest as current; a second watcher on the same store is refused. It stops on SIGINT or SIGTERM and exits 0. Logs go to stderr; changes go to stdout.

            Examples:
              archive-sync watch ./store
              archive-sync watch ./store --json >> changes.jsonl &
              nohup archive-sync watch ./store > watch.log 2>&1 &
            """
    )

    @OptionGroup var store: StoreArgument

    @Flag(help: "Print each change as one line of JSON.")
    var json = false

    @Option(help: ArgumentHelp("Milliseconds to gather events before recording them (0 records each at once).", valueName: "ms"))
    var debounce = 50

    @Option(help: ArgumentHelp("Seconds between full safety scans (0: never).", valueName: "seconds"))
    var rescanInterval = 3600

    func validate() throws {
        guard (0...60_000).contains(debounce) else { throw ValidationError("--debounce must be from 0 to 60000 milliseconds, not \(debounce)") }
        guard rescanInterval >= 0 else { throw ValidationError("--rescan-interval must be 0 (never) or a number of seconds, not \(rescanInterval)") }
    }

    func run() throws {
        LoggingSystem.bootstrap { StreamLogHandler.standardError(label: $0) }
        var logger = Logger(label: "archive-sync")
        logger.logLevel = .info

        // Stop requests may come before the watcher exists (during the first scan).
        let stop = StopRequest()
        let signals = [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { stop.request() }
            source.resume()
            return source
        }
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
            debounce: .milliseconds(debounce), rescanInterval: rescanInterval == 0 ? nil : .seconds(rescanInterval), logger: logger)
        let watcher = try store.startWatching(options)
        let scan = watcher.initialScan
        logger.info(
            "watching \(store.path): caught up (\(scan.created) created, \(scan.modified) modified, \(scan.deleted) deleted, \(scan.unchanged) unchanged)"
        )
        stop.attach(watcher)

        let result = TracedMutex<Result<Void, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            do {
                try await watcher.wait()
                result.withLock { $0 = .success(()) }
            } catch {
                result.withLock { $0 = .failure(error) }
            }
            done.signal()
        }
        done.wait()
        // Print every change recorded before the stop, then end.
        store.finishChanges()
        printed.wait()
        if case .failure(let error)? = result.withLock({ $0 }) {
            throw WatchFailed(message: String(describing: error))
        }
        logger.info("stopped watching \(store.path)")
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

/// SIGINT or SIGTERM: stops the watcher, or, when it comes before the watcher has started,
/// stops it as soon as it has.
private final class StopRequest: Sendable {
    private let state = TracedMutex<(requested: Bool, watcher: StoreWatcher?)>((false, nil))

    func request() {
        state.withLock { state in
            state.requested = true
            return state.watcher
        }?.stop()
    }

    func attach(_ watcher: StoreWatcher) {
        let requested = state.withLock { state in
            state.watcher = watcher
            return state.requested
        }
        if requested { watcher.stop() }
    }
}

/// The watcher stopped on its own: printed as one line, exit status 1.
struct WatchFailed: ExitStatusError {
    let message: String
    var exitStatus: Int32 { ExitStatus.failure }
    var description: String { message }
}
