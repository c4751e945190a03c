import ArchiveStore
import Foundation
import TestSupport
import Testing

@testable import ArchiveSync

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Live sessions on the command line: sync --watch, watch --sync-with, status")
struct LiveCommandTests {
    @Test func editsOnBothSidesCrossLiveWithOneJSONLinePerObject() async throws {
        // Off the cooperative threads: it waits on processes and files.
        try await offPool {
            try withTemporaryDirectory { dir in
                let a = try ArchiveStore(directory: dir + "/a")
                let b = try ArchiveStore(directory: dir + "/b")
                let session = try LiveCommand(["sync", a.path, b.path, "--watch", "--json", "--debounce", "10"])
                try makeDirectory(a.path + "/P")
                try writeFile(a.path + "/P/ada.json", "{\"name\":\"Ada\"}")
                _ = try b.put(json("{\"name\":\"Grace\"}"), as: id("P/grace"))
                // B's file, not its manifest: a sync's page commits before it renames its files,
                // and a write into B between the two is an external edit the rename must not
                // overwrite (the crossing is then reported skipped, and B's edit crosses back).
                #expect(
                    eventually {
                        FileManager.default.contents(atPath: b.path + "/P/ada.json") == json("{\"name\":\"Ada\"}")
                            && (try? a.liveContents()["P/grace"]) != nil
                    })
                try writeFile(b.path + "/P/ada.json", "{\"name\":\"Ada Lovelace\"}")
                #expect(
                    eventually { (try? a.liveContents()["P/ada"]) == "{\"name\":\"Ada Lovelace\"}" },
                    "\(session.command.outputSoFar) \(session.command.errorOutputSoFar) \(String(describing: try? b.liveContents())) \(String(describing: try? b.history(id("P/ada"))))"
                )
                #expect(eventually { session.count(event: "object") >= 3 }, "\(session.command.outputSoFar) \(session.command.errorOutputSoFar)")
                let objects = session.lines.filter { $0["event"] as? String == "object" }
                let crossed = objects.first { $0["id"] as? String == "P/ada" && $0["direction"] as? String == "b-to-a" }
                // Version 2 or later: the program's write may be seen half done first (its own version).
                #expect((crossed?["version"] as? Int ?? 0) >= 2 && crossed?["kind"] as? String == "copy", "\(objects)")
                #expect((crossed?["latencyMs"] as? Double).map { $0 >= 0 && $0 < 10_000 } == true, "\(objects)")

                // `status` shows the session from either store; the file goes with the session.
                let status = try runArchiveSync(["status", a.path])
                #expect(status.output.contains("live") && status.output.contains("\(b.path): connected"), "\(status)")
                let result = try session.stop()
                #expect(result.status == 0, "\(result)")
                #expect(a.liveSessions().isEmpty && b.liveSessions().isEmpty)
            }
        }
    }

    @Test func aDirectoryThatIsNoStoreOrABadOptionIsRefusedAtOnce() async throws {
        // Off the cooperative threads: it waits on processes and files.
        try await offPool {
            try withTemporaryDirectory { dir in
                let a = try ArchiveStore(directory: dir + "/a")
                try makeDirectory(dir + "/empty")
                let refused = try runArchiveSync(["sync", a.path, dir + "/empty", "--watch"])
                #expect(refused.status == 2 && refused.errorOutput.contains("is not a usable store"), "\(refused)")
                let dryRun = try runArchiveSync(["sync", a.path, dir + "/empty", "--watch", "--dry-run"])
                #expect(dryRun.status == 2 && dryRun.errorOutput.contains("--dry-run cannot go with --watch"), "\(dryRun)")
                let debounce = try runArchiveSync(["sync", a.path, dir + "/empty", "--debounce", "5"])
                #expect(debounce.status == 2 && debounce.errorOutput.contains("go with --watch"), "\(debounce)")
                #expect(a.liveSessions().isEmpty)
            }
        }
    }

    /// A store another process watches is followed, not watched twice; when that watcher
    /// dies, the session takes its lease over and the store stays watched.
    @Test func aStoreWatchedElsewhereIsFollowedAndTakenOverWhenItsWatcherDies() async throws {
        try await offPool {
            try withTemporaryDirectory { dir in
                let a = try ArchiveStore(directory: dir + "/a")
                let b = try ArchiveStore(directory: dir + "/b")
                try makeDirectory(a.path + "/P")
                let watcher = try RunningCommand(["watch", a.path])
                defer { watcher.kill() }
                #expect(eventually { (try? a.status().watcher?.pid) == watcher.pid })
                let session = try LiveCommand(["sync", a.path, b.path, "--watch", "--json", "--debounce", "10"])
                #expect(session.firstCycleDone(a))
                try writeFile(a.path + "/P/one.json", "{\"n\":1}")  // recorded by `watch`, carried by the session
                #expect(eventually { (try? b.liveContents()["P/one"]) == "{\"n\":1}" })
                #expect((try? a.status().watcher?.pid) == watcher.pid)
                watcher.kill()
                #expect(eventually { (try? a.status().watcher?.pid) == session.command.pid }, "\(String(describing: try? a.status()))")
                try writeFile(a.path + "/P/two.json", "{\"n\":2}")
                #expect(eventually { (try? b.liveContents()["P/two"]) == "{\"n\":2}" })
                #expect(try session.stop().status == 0)
            }
        }
    }

    /// Both sides edit the same objects within one debounce: one cycle makes the conflict
    /// copies a one-shot sync of the same two stores makes, then nothing moves.
    @Test func concurrentEditsGetTheConflictCopiesOfOneShotSyncThenTheSessionIsQuiet() async throws {
        // Off the cooperative threads: it waits on processes and files.
        try await offPool {
            try withTemporaryDirectory { dir in
                let a = try ArchiveStore(directory: dir + "/a")
                let b = try ArchiveStore(directory: dir + "/b")
                let ids = (0..<20).map { id("P/p\($0)") }
                for object in ids { _ = try a.put(json("{\"v\":0}"), as: object) }
                _ = try Sync(local: a, remote: b).runNow()
                // A long debounce: both sides' edits (and the copies below) are made before the cycle.
                let session = try LiveCommand(["sync", a.path, b.path, "--watch", "--json", "--debounce", "4000", "--merge", "none"])
                #expect(session.firstCycleDone(a))  // incremental, with nothing to do
                // The full compare follows the first cycle at once, without the debounce
                // (docs/sync.md, start-up): let it end before the edits, which must wait for
                // the debounce. Twenty equal objects take it milliseconds.
                usleep(2_000_000)
                for (store, side) in [(a, "a"), (b, "b")] {
                    try store.batch { tx in for object in ids { try tx.save(Item(n: 1, text: side), forKey: object.key, in: "P") } }
                }
                // The same two stores, as they are now, synced once.
                for name in ["a", "b"] { _ = try run("/bin/cp", ["-a", dir + "/" + name, dir + "/" + name + "-copy"]) }
                let oneShot = try Sync(
                    local: try ArchiveStore(directory: dir + "/a-copy"), remote: try ArchiveStore(directory: dir + "/b-copy"),
                    options: SyncOptions(merge: .none)
                ).runNow()
                #expect(oneShot.conflicts.count == 20)
                let expected = try ArchiveStore(directory: dir + "/a-copy").liveContents()
                #expect(eventually { (try? a.liveContents()) == expected && (try? b.liveContents()) == expected }, "\(session.command.outputSoFar)")
                // Quiet: no more lines, no more changes.
                usleep(500_000)
                let lines = session.lines.count
                let sequences = (try a.changeSequence(), try b.changeSequence())
                usleep(1_000_000)
                let now = (try a.changeSequence(), try b.changeSequence())
                #expect(session.lines.count == lines && now == sequences)
                #expect(try session.stop().status == 0)
            }
        }
    }

    @Test func aBurstOfTenThousandFilesArrives() async throws {
        // Off the cooperative threads: it waits on processes and files.
        try await offPool {
            try withTemporaryDirectory { dir in
                let a = try ArchiveStore(directory: dir + "/a")
                let b = try ArchiveStore(directory: dir + "/b")
                let session = try LiveCommand(["sync", a.path, b.path, "--watch", "--json"])
                usleep(300_000)
                try makeDirectory(a.path + "/Burst")
                for n in 0..<10_000 { try writeFile(a.path + "/Burst/f\(n).json", "{\"n\":\(n)}") }
                #expect(eventually(within: .seconds(120)) { (try? b.liveObjectCount()) == 10_000 }, "\(session.command.errorOutputSoFar)")
                #expect(try b.liveContents()["Burst/f9999"] == "{\"n\":9999}")
                #expect(try session.stop().status == 0)
            }
        }
    }

    /// Deleting most of a spoke trips that peer's safety valve; the hub's other peer keeps going.
    @Test func aSafetyValveStopsOnePeerAndDeletesNothingWhileTheOtherKeepsRunning() async throws {
        // Off the cooperative threads: it waits on processes and files.
        try await offPool {
            try withTemporaryDirectory { dir in
                let hub = try ArchiveStore(directory: dir + "/hub")
                let one = try ArchiveStore(directory: dir + "/one")
                let two = try ArchiveStore(directory: dir + "/two")
                for n in 0..<10 { _ = try hub.put(json("{\"n\":\(n)}"), as: id("P/p\(n)")) }
                let session = try LiveCommand(["watch", hub.path, "--sync-with", one.path, "--sync-with", two.path, "--json", "--debounce", "10"])
                // The files, not the manifests: a sync's page commits before it renames its files.
                let landed = { (store: ArchiveStore) in (0..<10).allSatisfy { FileManager.default.fileExists(atPath: store.path + "/P/p\($0).json") }
                }
                #expect(eventually { landed(one) && landed(two) })
                // One commit: a program's removals, recorded as they come, could be carried
                // in pieces that each stay under the valve (as they would for a user).
                try one.batch { batch in
                    for n in 0..<8 { try batch.remove(Data.self, forKey: "p\(n)", in: "P") }
                }
                #expect(eventually { session.count(event: "stopped") == 1 }, "\(session.command.outputSoFar)")
                let stopped = session.lines.first { $0["event"] as? String == "stopped" }
                #expect((stopped?["error"] as? String)?.contains("nothing was deleted") == true, "\(String(describing: stopped))")
                #expect(try hub.liveObjectCount() == 10 && two.liveObjectCount() == 10)
                // The other spoke is still in step.
                _ = try hub.put(json("{\"n\":10}"), as: id("P/p10"))
                #expect(eventually { (try? two.liveContents()["P/p10"]) == "{\"n\":10}" })
                #expect(try session.stop().status == 0)
            }
        }
    }

    /// SIGTERM during a long first cycle: exit 0 within 2 s, each object old or new; the next
    /// start completes the work.
    @Test func sigtermMidCycleStopsAtOnceAndARestartCompletesTheWork() async throws {
        // Off the cooperative threads: it waits on processes and files.
        try await offPool {
            try withTemporaryDirectory { dir in
                let a = try ArchiveStore(directory: dir + "/a")
                let b = try ArchiveStore(directory: dir + "/b")
                try a.batch { tx in
                    for n in 0..<5_000 { try tx.save(Item(n: n, text: String(repeating: "x", count: 200)), forKey: "i\(n)", in: "Item") }
                }
                let first = try LiveCommand(["sync", a.path, b.path, "--watch", "--json"])
                #expect(eventually(within: .seconds(60)) { ((try? b.liveObjectCount()) ?? 0) > 0 })
                let stopped = ContinuousClock.now
                let result = try first.stop()
                #expect(result.status == 0 && ContinuousClock.now - stopped < .seconds(3), "\(result)")
                let verify = try runArchiveSync(["verify", b.path])
                #expect(verify.status == 0, "\(verify)")
                let second = try LiveCommand(["sync", a.path, b.path, "--watch", "--json"])
                #expect(eventually(within: .seconds(60)) { (try? b.liveHashes()) == (try? a.liveHashes()) })
                #expect(try second.stop().status == 0)
            }
        }
    }
}
