import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// Helpers for end-to-end tests of `archive-sync watch` (WatchCommandTests, WatchTrustTests).

/// How soon a watcher must exit after SIGINT or SIGTERM: 2 s, or 8 s when these tests run
/// under the thread sanitizer (`make test-tsan`, found by its runtime's symbol), which makes
/// the binary 5-15x slower: a run took 3.6 s to stop while recording a burst.
let signalExitBound: Duration = dlsym(nil, "__tsan_init") == nil ? .seconds(2) : .seconds(8)

/// A background `archive-sync watch` (or a wrapper that goes on to exec it), read while it runs.
final class WatchProcess {
    let command: RunningCommand

    /// Starts `archive-sync watch STORE OPTIONS...`.
    init(_ store: TestStore, _ options: [String] = ["--json", "--debounce", "0"]) throws {
        command = try RunningCommand(["watch", store.path] + options)
    }

    /// Starts `executable arguments...`, which runs the watcher.
    init(executable: String, _ arguments: [String]) throws {
        command = try RunningCommand(arguments, executable: executable)
    }

    var pid: Int32 { command.pid }
    var stdout: String { command.outputSoFar }
    var stderr: String { command.errorOutputSoFar }

    /// Kills the watcher (meant for `defer`).
    func kill() { command.kill() }

    /// Sends a signal.
    func send(_ signal: Int32) { command.send(signal) }

    /// Waits until the first log line, "watching STORE: caught up (...)", is on stderr.
    func waitUntilCaughtUp(timeout: Duration = .seconds(60), sourceLocation: SourceLocation = #_sourceLocation) throws {
        let caughtUp = poll(timeout: timeout) { self.stderr.contains("caught up") || !self.command.isRunning }
        try #require(
            caughtUp && command.isRunning && stderr.contains("watching "),
            "the watcher did not report that it caught up\n--- stdout ---\n\(stdout)\n--- stderr ---\n\(stderr)",
            sourceLocation: sourceLocation)
    }

    /// The changes printed so far with `--json`: one object per complete line.
    func changes(sourceLocation: SourceLocation = #_sourceLocation) -> [[String: Any]] {
        var complete = stdout.split(separator: "\n", omittingEmptySubsequences: false)
        complete.removeLast()  // what follows the last newline: empty, or a line still being written
        return complete.compactMap { line in
            guard let change = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                Issue.record("not a JSON object: \(line)", sourceLocation: sourceLocation)
                return nil
            }
            return change
        }
    }

    /// Waits until a change of `kind` to `id` is printed, and returns it.
    @discardableResult
    func waitForChange(
        _ id: String, _ kind: String, timeout: Duration = .seconds(10), sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> [String: Any] {
        var found: [String: Any]?
        _ = poll(timeout: timeout) {
            found = self.changes(sourceLocation: sourceLocation).first { $0["id"] as? String == id && $0["kind"] as? String == kind }
            return found != nil || !self.command.isRunning
        }
        return try #require(
            found, "no \(kind) \(id) within \(timeout)\n--- stdout ---\n\(stdout)\n--- stderr ---\n\(stderr)", sourceLocation: sourceLocation)
    }

    /// Sends `signal` and waits up to `timeout` for the watcher to exit: what it did (nil if it
    /// still runs) and how long after the signal it exited.
    func stop(with signal: Int32, timeout: Duration = .seconds(10)) -> (result: CommandResult?, elapsed: Duration) {
        let clock = ContinuousClock()
        let start = clock.now
        command.send(signal)
        let result = command.wait(timeout: timeout)
        return (result, clock.now - start)
    }

    /// Waits up to `timeout` for the watcher to exit on its own.
    func waitForExit(timeout: Duration) -> (result: CommandResult?, elapsed: Duration) {
        let clock = ContinuousClock()
        let start = clock.now
        let result = command.wait(timeout: timeout)
        return (result, clock.now - start)
    }
}

/// Calls `condition` every 20 ms until it is true or `timeout` passes; returns its last answer.
func poll(timeout: Duration, interval: Duration = .milliseconds(20), _ condition: () throws -> Bool) rethrows -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while true {
        if try condition() { return true }
        if clock.now >= deadline { return false }
        let (seconds, attoseconds) = interval.components
        usleep(UInt32(seconds * 1_000_000 + attoseconds / 1_000_000_000_000))
    }
}

/// Runs `archive-sync ARGUMENTS` that must exit on its own within `timeout` (a `watch` that
/// should be refused must not hang the suite when it is not); kills it otherwise.
func runToExit(_ arguments: [String], timeout: Duration = .seconds(30), sourceLocation: SourceLocation = #_sourceLocation) throws -> (
    result: CommandResult, elapsed: Duration
) {
    let command = try RunningCommand(arguments)
    defer { command.kill() }
    let clock = ContinuousClock()
    let start = clock.now
    let result = command.wait(timeout: timeout)
    let elapsed = clock.now - start
    let finished = try #require(
        result, "archive-sync \(arguments.joined(separator: " ")) still ran after \(timeout)\n\(command.errorOutputSoFar)",
        sourceLocation: sourceLocation)
    return (finished, elapsed)
}

/// Writes `text` to `path` with Foundation, as another program would.
func writeText(_ path: String, _ text: String) throws {
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
}

/// Writes `text` to `path` with open, write and close, as fast as this process can: no
/// Foundation in between. Returns false when any of them fails.
func writeQuickly(_ path: String, _ text: String) -> Bool {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { return false }
    let bytes = Array(text.utf8)
    let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    return close(fd) == 0 && written == bytes.count
}

/// The `watcher` object of `status --json`, or nil when none is reported.
func reportedWatcher(_ store: TestStore) throws -> [String: Any]? {
    let status = try store.status()
    guard let watcher = status["watcher"], !(watcher is NSNull) else { return nil }
    return try #require(watcher as? [String: Any], "watcher is not an object: \(status)")
}

/// The run state letter of a process, from /proc/PID/stat (`T` when stopped).
func processState(_ pid: Int32) -> Character? {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return nil }
    return stat[close...].dropFirst().first { $0 != " " }
}

/// Runs `/bin/rm -rf path`.
func removeRecursively(_ path: String) throws {
    let rm = try run("/bin/rm", ["-rf", path])
    try #require(rm.status == 0, "rm -rf \(path) failed")
}
