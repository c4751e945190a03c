import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

// A watcher holding the lease is trusted only when it answers a probe through its own
// inotify queue: a stopped one (SIGSTOP keeps its lock held) must not hide changes.

@Suite("a watcher is trusted only once it has caught up", .serialized)
struct WatchTrustTests {
    /// `archive-sync COMMAND A B --json`, parsed.
    private static func report(_ command: String, _ a: TestStore, _ b: TestStore) throws -> [String: Any] {
        let result = try runArchiveSync([command, a.path, b.path, "--json"])
        try #require(result.status == 0, "\(result)")
        return try #require(try parseJSON(result) as? [String: Any], "\(result)")
    }

    /// Runs `body` with two synced stores holding Person/ada, and a watcher of the first that
    /// has caught up; removes them and kills the watcher afterwards.
    private static func withWatchedPair(_ body: (_ a: TestStore, _ b: TestStore, _ watcher: WatchProcess) throws -> Void) throws {
        let a = try TestStore()
        let b = try TestStore()
        defer {
            a.delete()
            b.delete()
        }
        try a.put("Person/ada", "{\"v\": 1}")
        try #require(try runArchiveSync(["sync", a.path, b.path]).status == 0)
        let watcher = try WatchProcess(a, ["--json"])  // the default debounce, 50 ms
        defer { watcher.kill() }
        try watcher.waitUntilCaughtUp()
        try body(a, b, watcher)
    }

    @Test func aStoppedWatcherIsNotTrustedStatusDiffAndSyncSeeTheEdit() throws {
        try Self.withWatchedPair { a, b, watcher in
            watcher.send(SIGSTOP)
            try #require(poll(timeout: .seconds(10)) { processState(watcher.pid) == "T" }, "the watcher did not stop")
            try writeText(a.file("Person", "ada.json"), "{\"v\": 2}")

            let watched = try #require(try reportedWatcher(a), "status reports no watcher")
            #expect(watched["caughtUp"] as? Bool == false, "\(watched)")
            let text = try a.run("status").output
            #expect(text.contains("by pid \(watcher.pid), not answering"), "\(text)")

            let diff = try Self.report("diff", a, b)
            #expect(diff["scannedA"] as? Bool == true, "\(diff)")
            let actions = try #require(diff["actions"] as? [[String: Any]], "\(diff)")
            #expect(actions.map { $0["id"] as? String } == ["Person/ada"], "\(diff)")

            let synced = try Self.report("sync", a, b)
            #expect(synced["scannedA"] as? Bool == true && synced["copiedToB"] as? Int == 1, "\(synced)")
            #expect(try b.get("Person/ada") == Data("{\"v\": 2}".utf8))
            // No probe is left behind in the store.
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: a.path).filter { $0.hasPrefix(".archive-sync-probe.") }
            #expect(leftovers.isEmpty, "\(leftovers)")
        }
    }

    /// A running watcher answers at once; what it answered for is recorded, so a sync that
    /// trusts it does not scan and still sees an edit made the moment before.
    @Test func aRunningWatcherAnswersAndAnEditJustBeforeIsSynced() throws {
        try Self.withWatchedPair { a, b, _ in
            #expect(try reportedWatcher(a)?["caughtUp"] as? Bool == true)
            for n in 2...4 {
                // No wait for the watcher (its debounce is 50 ms): the probe is what orders them.
                try writeText(a.file("Person", "ada.json"), "{\"v\": \(n)}")
                let synced = try Self.report("sync", a, b)
                #expect(synced["scannedA"] as? Bool == false && synced["copiedToB"] as? Int == 1, "\(synced)")
                #expect(try b.get("Person/ada") == Data("{\"v\": \(n)}".utf8))
            }
        }
    }
}
