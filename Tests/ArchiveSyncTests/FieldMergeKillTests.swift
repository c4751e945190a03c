import ArchiveStore
import Foundation
import TestSupport
import Testing

@testable import ArchiveSync

#if canImport(Glibc)
    import Glibc
#endif

extension RemoteSyncTests {
    @Suite("Field merges: a sync killed mid-merge")
    struct FieldMergeKillTests {
        /// Both stores edit a different field of each of 2,000 objects; `archive-sync sync` is
        /// killed with SIGKILL at random moments while it merges, again and again (a kill between
        /// one side's write of a merged version and the other's included). A last run then
        /// completes it: both stores equal, every object holding both edits, no conflict copy,
        /// and a sync after that does nothing.
        @Test func aSyncKilledWhileMergingConvergesWhenRunAgain() async throws {
            try await withTemporaryDirectory { dir in
                let (pathA, pathB) = (dir + "/a", dir + "/b")
                let count = 2_000
                let ids = try (0..<count).map { try ObjectID(collection: "Item", key: "k\($0)") }
                do {
                    let a = try ArchiveStore(directory: pathA)
                    let b = try ArchiveStore(directory: pathB)
                    try a.batch { batch in
                        for n in 0..<count { try batch.save(["a": 0, "b": 0, "n": n], forKey: "k\(n)", in: "Item") }
                    }
                    _ = try await Sync(local: a, remote: b).run()
                    try a.batch { batch in
                        for n in 0..<count { try batch.save(["a": 1, "b": 0, "n": n], forKey: "k\(n)", in: "Item") }
                    }
                    try b.batch { batch in
                        for n in 0..<count { try batch.save(["a": 0, "b": 1, "n": n], forKey: "k\(n)", in: "Item") }
                    }
                }
                var killedWhileRunning = 0
                for _ in 0..<6 {
                    let child = try RunningCommand(["sync", pathA, pathB])
                    let pid = child.pid
                    let running = try await offPool {
                        usleep(UInt32.random(in: 20_000...300_000))
                        // Signal 0 checks that the child has not exited (a zombie still counts: it is not reaped).
                        let running =
                            kill(pid, 0) == 0 && !((try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? "").contains(") Z ")
                        kill(pid, SIGKILL)
                        return running
                    }
                    if running { killedWhileRunning += 1 }
                    _ = try await offPool { child.wait() }
                }
                #expect(killedWhileRunning >= 3, "most kills must land while the sync runs")
                let finished = try await runArchiveSyncOffPool(["sync", pathA, pathB])
                #expect(finished.status == 0, "\(finished)")
                let a = try ArchiveStore(directory: pathA)
                let b = try ArchiveStore(directory: pathB)
                #expect(try a.liveHashes() == b.liveHashes())
                #expect(try a.conflictCopies().isEmpty && b.conflictCopies().isEmpty)
                for (n, id) in ids.enumerated() {
                    let object = try JSONSerialization.jsonObject(with: a.data(for: id)) as? [String: Int]
                    #expect(object == ["a": 1, "b": 1, "n": n], "\(id)")
                }
                let again = try await Sync(local: a, remote: b).run()
                #expect(again.changes == 0 && again.vectorsMerged == 0, "\(again)")
            }
        }
    }
}
