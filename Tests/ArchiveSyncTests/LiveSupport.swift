import ArchiveStore
import Foundation
import TestSupport
import Testing

@testable import ArchiveSync

#if canImport(Glibc)
    import Glibc
#endif

/// Checks `condition` every 20 ms until it holds or `timeout` passes: whether it held.
func eventually(within timeout: Duration = .seconds(30), _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
        if try condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        usleep(20_000)
    }
}

/// ``eventually(within:_:)`` for async tests: sleeps without holding one of the few
/// cooperative threads (a session's events are delivered on them).
func eventually(within timeout: Duration = .seconds(30), _ condition: () throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
        if try condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(20))
    }
}

/// `{"n":…}` as an object's bytes.
func json(_ text: String) -> Data { Data(text.utf8) }

func id(_ text: String) -> ObjectID { try! ObjectID(parsing: text) }

/// A live session run by the command line (`sync A B --watch --json`, `watch --sync-with`),
/// with short debounce and keepalive; stopped with SIGTERM at the end of the test.
final class LiveCommand {
    let command: RunningCommand

    init(_ arguments: [String]) throws {
        // Reconnections after 100 ms, not 1 s, so that fault tests stay short.
        setenv("ARCHIVE_SYNC_RECONNECT_MS", "100", 1)
        command = try RunningCommand(arguments)
    }

    /// The JSON lines printed so far.
    var lines: [[String: Any]] {
        command.outputSoFar.split(separator: "\n").compactMap { line in
            try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        }
    }

    func count(event: String) -> Int { lines.count { $0["event"] as? String == event } }

    /// Waits until the session's first cycle has ended (its status file says so).
    func firstCycleDone(_ store: ArchiveStore) -> Bool {
        eventually(within: .seconds(60)) { store.liveSessions().contains { $0.pid == command.pid && $0.peers.first?.lastCycle != nil } }
    }

    /// Sends SIGTERM and returns what it did; it must exit within 2 s (3 s allowed for a slow machine).
    func stop() throws -> CommandResult {
        command.send(SIGTERM)
        guard let result = command.wait(timeout: .seconds(3)) else {
            let tree = describeProcessTree(command.pid)
            command.kill()
            throw TestSupportError("the live session did not stop within 3 s of SIGTERM: \(tree)")
        }
        return result
    }

    deinit { command.kill() }
}

extension ArchiveStore {
    /// The live objects' bytes, by id.
    func liveContents() throws -> [String: String] {
        var result: [String: String] = [:]
        for id in try liveHashes().keys { result[id.description] = String(decoding: try data(for: id), as: UTF8.self) }
        return result
    }
}
