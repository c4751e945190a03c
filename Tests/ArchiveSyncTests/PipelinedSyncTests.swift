import ArchiveLocking
import ArchiveStore
import Foundation
import TestSupport
import Testing

@testable import ArchiveSync

#if canImport(Glibc)
    import Glibc
#endif

extension RemoteSyncTests {
    /// A sync into a far side keeps several pages of writes on their way at once (issue 19,
    /// benchmark 5: with one at a time, the far side idled for a round trip and a page's
    /// transfer between its commits, and the first sync over ssh took 1.57x of rsync's).
    @Suite("Pages of writes pipelined into a far side")
    struct PipelinedSyncTests {
        /// The far side stopped (SIGSTOP) once a page has landed: the next pages still go out
        /// (a window of them), where one at a time would wait for the stopped side's reply.
        @Test func aFirstSyncKeepsMoreThanOnePageOnItsWayToTheFarSide() async throws {
            try await withTemporaryDirectory { dir in
                let a = try ArchiveStore(directory: dir + "/a")
                let b = try ArchiveStore(directory: dir + "/b")
                let count = 6 * Sync.pageSize
                try await offPool { try fill(a, count: count, size: 20, tag: "a") }
                let acknowledged = TracedMutex(0)
                var options = SyncOptions()
                options.progress = { done, _ in acknowledged.withLock { $0 = done } }
                let far = try pipeReplica(b.path)
                let servers = farSides(of: b.path)
                #expect(servers.count == 1, "no far side to stop")
                let sync = InBackground { [options] in try Sync(a: LocalReplica(a), b: far, options: options).runNow() }
                try await waitUntil(acknowledged, reaches: Sync.pageSize)
                for pid in servers { kill(pid, SIGSTOP) }
                let deadline = ContinuousClock.now + .seconds(20)
                while far.mostRequestsInFlight < 2 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
                for pid in servers { kill(pid, SIGCONT) }
                let report = try await offPool { try sync.value() }
                #expect(report.copiedToB == count, "\(report)")
                #expect(far.mostRequestsInFlight >= 2, "at most \(far.mostRequestsInFlight) request on its way at once")
                #expect(far.mostRequestsInFlight <= Sync.remoteWindow)
                #expect(try a.liveHashes() == b.liveHashes())
            }
        }

        /// The far side killed while pages are on their way: every page it acknowledged is in
        /// its store, nothing is half-written, neither checkpoint moved, and the next sync
        /// completes the work.
        @Test func aFarSideKilledMidWindowLosesNothingAcknowledgedAndMovesNoCheckpoint() async throws {
            try await withTemporaryDirectory { dir in
                let a = try ArchiveStore(directory: dir + "/a")
                _ = try ArchiveStore(directory: dir + "/b")
                let count = 6 * Sync.pageSize
                try await offPool { try fill(a, count: count, size: 20, tag: "a") }
                let acknowledged = TracedMutex(0)
                var options = SyncOptions()
                options.progress = { done, _ in acknowledged.withLock { $0 = done } }
                let far = try pipeReplica(dir + "/b")
                let servers = farSides(of: dir + "/b")
                #expect(servers.count == 1, "no far side to kill")
                let sync = InBackground { [options] in try Sync(a: LocalReplica(a), b: far, options: options).runNow() }
                // Kill the far side once some pages have landed, and before all have.
                try await waitUntil(acknowledged, reaches: 2 * Sync.pageSize)
                for pid in servers { kill(pid, SIGKILL) }
                let outcome = try await offPool { Result { try sync.value() } }
                let landed = acknowledged.withLock { $0 }
                #expect(landed >= 2 * Sync.pageSize && landed < count, "the kill came after \(landed) of \(count) objects landed")
                guard case .failure(let error) = outcome else {
                    Issue.record("the sync went on after its far side was killed")
                    return
                }
                #expect("\(error)".contains("connection to the far side closed"), "\(error)")

                let b = try ArchiveStore(directory: dir + "/b")
                let hashesA = try a.liveHashes()
                let hashesB = try b.liveHashes()
                #expect(hashesB.count >= landed, "\(hashesB.count) objects in the far store, \(landed) acknowledged")
                for (id, hash) in hashesB { #expect(hashesA[id] == hash, "\(id) in B is not A's") }
                #expect(try a.checkpoint(for: b.replica) == nil && b.checkpoint(for: a.replica) == nil)

                let rerun = try await offPool { try Sync(a: LocalReplica(a), b: try pipeReplica(dir + "/b"), options: SyncOptions()).runNow() }
                #expect(rerun.copiedToB == count - hashesB.count, "\(rerun)")
                #expect(try a.liveHashes() == b.liveHashes())
                #expect(filesOnDisk(dir + "/a") == filesOnDisk(dir + "/b"))
            }
        }
    }
}

/// The `serve --stdio` children of this process that serve `store`.
private func farSides(of store: String) -> [Int32] {
    children(of: getpid(), named: "archive-sync").filter { pid in
        let command = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline"))) ?? Data()
        return String(decoding: command, as: UTF8.self).contains(store)
    }
}

/// Waits (two minutes at most) until a sync's progress says `objects` have landed.
private func waitUntil(_ acknowledged: borrowing TracedMutex<Int>, reaches objects: Int) async throws {
    let deadline = ContinuousClock.now + .seconds(120)
    while acknowledged.withLock({ $0 }) < objects && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(2)) }
}
