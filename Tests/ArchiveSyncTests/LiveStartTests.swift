import ArchiveLocking
import ArchiveStore
import Foundation
import TestSupport
import Testing

@testable import ArchiveSync

#if canImport(Glibc)
    import Glibc
#endif

/// A shell that runs the far side's command here, as ssh would run it there: `fake-ssh HOST
/// COMMAND` runs `sh -c COMMAND` (the host ignored), with sh's exit statuses (127: not found).
func localShell(in dir: String) throws -> String {
    let path = dir + "/fake-ssh"
    try writeFile(path, "#!/bin/sh\nshift\nexec sh -c \"$1\"\n")
    chmod(path, 0o755)
    return path
}

/// A far store reached through ``localShell(in:)`` with `program` as its archive-sync.
func farStore(_ path: String, shell: String, program: String = archiveSyncProgram) -> StoreLocation {
    .remote(RemoteStore(host: "far", path: path, shell: [shell], program: program))
}

@Suite("Live sessions' start: an incremental first cycle, the full compare after it; a far side that cannot serve")
struct LiveStartTests {
    typealias Collector = LiveSessionTests.Collector

    /// Runs a session between `a` and `b` until `body` returns, collecting its events.
    func withSession(_ a: StoreLocation, _ b: StoreLocation, _ body: (Collector) async throws -> Void) async throws {
        let session = LiveSession(a, b, options: LiveOptions(debounce: .milliseconds(10), reconnectDelay: .milliseconds(50)))
        let collector = Collector()
        let events = session.events()
        let task = collectOffPool(events) { event in collector.events.withLock { $0.append(event) } }
        defer { task.cancel() }
        try await body(collector)
        task.cancel()
        _ = await task.value
    }

    /// Changes made on both sides while no session ran cross in the first cycle, which is
    /// incremental (it reads neither manifest whole); the full compare follows it and finds
    /// nothing more.
    @Test func changesMadeWhileTheSessionWasDownCrossInAnIncrementalFirstCycle() async throws {
        try await withTemporaryDirectory { dir in
            let a = try ArchiveStore(directory: dir + "/a")
            let b = try ArchiveStore(directory: dir + "/b")
            for n in 0..<20 { _ = try a.put(json("{\"n\":\(n)}"), as: id("P/p\(n)")) }
            _ = try await Sync(local: a, remote: b).run()
            // While no session runs: a change on each side.
            _ = try a.put(json("{\"a\":1}"), as: id("P/fromA"))
            _ = try b.put(json("{\"b\":1}"), as: id("P/fromB"))
            try await withSession(.directory(a.path), farStore(b.path, shell: try localShell(in: dir))) { collector in
                #expect(await eventually { collector.cycles.count >= 2 }, "\(collector.events.withLock { $0 })")
                let cycles = collector.cycles
                let first = cycles[0]
                #expect(first.report.incremental && !first.full, "\(first.report)")
                #expect(first.report.copiedToA == 1 && first.report.copiedToB == 1, "\(first.report)")
                #expect(Set(first.objects.map(\.id)) == ["P/fromA", "P/fromB"], "\(first.objects)")
                // The safety net, right after: everything compared, nothing left to do.
                #expect(cycles[1].full && !cycles[1].report.incremental && cycles[1].report.changes == 0, "\(cycles[1].report)")
                let converged = try a.liveHashes() == b.liveHashes()
                #expect(converged)
            }
        }
    }

    /// A checkpoint that lies (A claims to have merged B's change it never got): the first,
    /// incremental cycle cannot see the difference; the full compare after it carries it.
    @Test func aDifferenceOnlyTheFullCompareCanFindIsFound() async throws {
        try await withTemporaryDirectory { dir in
            let a = try ArchiveStore(directory: dir + "/a")
            let b = try ArchiveStore(directory: dir + "/b")
            _ = try a.put(json("{\"n\":0}"), as: id("P/shared"))
            _ = try await Sync(local: a, remote: b).run()
            _ = try b.put(json("{\"hidden\":1}"), as: id("P/hidden"))
            try a.setCheckpoint(for: b.replica, to: try b.changeSequence())
            try await withSession(.directory(a.path), farStore(b.path, shell: try localShell(in: dir))) { collector in
                // A cycle's event comes once its writes have landed: waited for, not the file alone.
                #expect(await eventually { collector.cycles.contains { $0.objects.contains { $0.id == "P/hidden" } } })
                let carried = try a.liveContents()["P/hidden"]
                #expect(carried == "{\"hidden\":1}", "\(collector.events.withLock { $0 })")
                let cycles = collector.cycles
                #expect(cycles.count >= 2 && cycles[0].report.incremental && cycles[0].objects.isEmpty, "\(cycles)")
                #expect(cycles.dropFirst().first.map { $0.full && $0.objects.map(\.id) == ["P/hidden"] } == true, "\(cycles)")
            }
        }
    }

    /// The far program not found (the far shell's exit 127) or not executable (126): the
    /// peer is stopped with one sentence, never retried.
    @Test(arguments: [127, 126])
    func aFarSideWhoseProgramCannotRunIsStoppedNotRetried(status: Int) async throws {
        try await withTemporaryDirectory { dir in
            let a = try ArchiveStore(directory: dir + "/a")
            _ = try ArchiveStore(directory: dir + "/b")
            let program = dir + (status == 127 ? "/no-such/archive-sync" : "/not-executable")
            if status == 126 { try writeFile(program, "not a program\n") }
            try await withSession(.directory(a.path), farStore(dir + "/b", shell: try localShell(in: dir), program: program)) { collector in
                #expect(await eventually { collector.events.withLock { $0.contains { if case .stopped = $0 { true } else { false } } } })
                let events = collector.events.withLock { $0 }
                #expect(!events.contains { if case .disconnected = $0 { true } else { false } }, "\(events)")
                guard case .stopped(_, let reason)? = events.last else { return #expect(Bool(false), "\(events)") }
                #expect(reason.contains("exit \(status)") && reason.contains("trying again would not help"), "\(reason)")
                #expect(!reason.contains("\n"))
                _ = a
            }
        }
    }

    /// A far side of another protocol version refuses the handshake: that cannot be mended by
    /// trying again either.
    @Test func aRefusedHandshakeIsAFarSideThatCannotServe() async throws {
        try await offPool {
            try withTemporaryDirectory { dir in
                _ = try ArchiveStore(directory: dir + "/b")
                #expect {
                    _ = try pipeReplica(dir + "/b", versions: 90...91)
                } throws: { error in
                    guard case SyncError.farSideCannotServe(let message) = error else { return false }
                    return message.contains("install the same release")
                }
            }
        }
    }

    /// ssh's own failure (exit 255: here a refused connection) is a network error: retried
    /// with backoff, never a stop.
    @Test func aNetworkErrorAtTheFirstConnectionIsRetried() async throws {
        try await withTemporaryDirectory { dir in
            let a = try ArchiveStore(directory: dir + "/a")
            let far = StoreLocation.remote(
                RemoteStore(host: "root@127.0.0.1", path: dir + "/b", shell: ["ssh", "-p", "1", "-o", "BatchMode=yes"], program: archiveSyncProgram))
            try await withSession(.directory(a.path), far) { collector in
                let retries = { collector.events.withLock { $0.count { if case .disconnected = $0 { true } else { false } } } }
                #expect(await eventually { retries() >= 2 }, "\(collector.events.withLock { $0 })")
                #expect(!collector.events.withLock { $0.contains { if case .stopped = $0 { true } else { false } } })
            }
        }
    }

    /// The command line: the only peer's far program missing ends the session with exit 1
    /// and one line saying why.
    @Test func theCommandExitsOneWhenItsOnlyPeerCannotServe() async throws {
        try await withTemporaryDirectory { dir in
            let a = try ArchiveStore(directory: dir + "/a")
            _ = try ArchiveStore(directory: dir + "/b")
            let result = try await runArchiveSyncOffPool(
                ["sync", a.path, "far:" + dir + "/b", "--watch", "--rsh", try localShell(in: dir), "--remote-cmd", dir + "/no-such/archive-sync"],
                timeout: .seconds(60))
            #expect(result.status == 1, "\(result)")
            let stopped = result.output.split(separator: "\n").filter { $0.hasPrefix("stopped syncing with far:") }
            #expect(stopped.count == 1 && stopped[0].contains("exit 127"), "\(result)")
            #expect(!result.output.contains("disconnected"), "\(result)")
        }
    }
}
