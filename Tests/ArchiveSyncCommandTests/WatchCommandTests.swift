import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// End-to-end tests of `archive-sync watch`: the built binary runs in the background on a store
// of the test's own while the test writes files, sends signals and reads what it prints. Real
// processes, real inotify, real signals. Every child is killed by a `defer`, whatever happens.

@Suite("archive-sync watch, end to end", .serialized)
struct WatchCommandTests {
    // MARK: - Recording changes as they happen

    /// The collection directory exists before the watcher starts: a directory made while
    /// watched is scanned at once, and the scan can read a file created but not yet written,
    /// a version of its own (the watcher's `aNewCollectionDirectoryFilledAtOnceIsRecordedWhole`
    /// covers that case; under the thread sanitizer this test once saw it).
    @Test func aFileWrittenByAnotherProgramIsPrintedAsJSONAndRecorded() throws {
        let store = try TestStore()
        defer { store.delete() }
        try FileManager.default.createDirectory(atPath: store.path + "/Person", withIntermediateDirectories: false)
        let watcher = try WatchProcess(store)
        defer { watcher.kill() }
        try watcher.waitUntilCaughtUp()

        let text = "{\"name\": \"Ada\", \"born\": 1815}"
        try writeText(store.file("Person", "a.json"), text)
        let created = try watcher.waitForChange("Person/a", "created")
        #expect(created["version"] as? Int == 1, "\(created)")
        #expect(created["origin"] as? String == "external", "\(created)")
        #expect(created["sequence"] as? Int == 1, "\(created)")

        // Recorded in the manifest, not only printed: another process sees it.
        let history = try store.history("Person/a")
        #expect(history.map { $0["version"] as? Int } == [1])
        #expect(history.first?["size"] as? Int == text.utf8.count)
        #expect(try store.get("Person/a") == Data(text.utf8))

        try writeText(store.file("Person", "a.json"), "{\"name\": \"Ada Lovelace\"}")
        let modified = try watcher.waitForChange("Person/a", "modified")
        #expect(modified["version"] as? Int == 2, "\(modified)")
        try FileManager.default.removeItem(atPath: store.file("Person", "a.json"))
        let deleted = try watcher.waitForChange("Person/a", "deleted")
        #expect(deleted["version"] as? Int == 3, "\(deleted)")

        #expect(try store.history("Person/a").map { $0["isDeleted"] as? Bool } == [false, false, true])
        let status = try store.status()
        #expect(status["objects"] as? Int == 0, "\(status)")
        #expect(status["sequence"] as? Int == 3, "\(status)")
        // One line per change, nothing else on stdout.
        #expect(watcher.changes().map { "\($0["kind"] ?? "") \($0["id"] ?? "")" } == ["created Person/a", "modified Person/a", "deleted Person/a"])
    }

    @Test func withoutJSONEachChangeIsOneLineOfText() throws {
        let store = try TestStore()
        defer { store.delete() }
        // Before the watcher, for the reason `aFileWrittenByAnotherProgramIsPrintedAsJSONAndRecorded` gives.
        try FileManager.default.createDirectory(atPath: store.path + "/Pet", withIntermediateDirectories: false)
        let watcher = try WatchProcess(store, [])  // the default debounce, 50 ms
        defer { watcher.kill() }
        try watcher.waitUntilCaughtUp()

        try writeText(store.file("Pet", "rex.json"), "{}")
        let line = "created Pet/rex version 1 (external)\n"
        #expect(poll(timeout: .seconds(10)) { watcher.stdout.contains(line) }, "\(watcher.stdout)\n\(watcher.stderr)")
        #expect(watcher.stdout == line)
    }

    /// A collection directory made while watched is watched from then on, and a file written
    /// into it at once (before the watch can exist) is recorded too.
    @Test func aNewCollectionAndTheFilesWrittenRightAwayIntoItAreRecorded() throws {
        let store = try TestStore()
        defer { store.delete() }
        let watcher = try WatchProcess(store)
        defer { watcher.kill() }
        try watcher.waitUntilCaughtUp()

        try FileManager.default.createDirectory(atPath: store.path + "/Car", withIntermediateDirectories: false)
        try writeText(store.file("Car", "first.json"), "{\"n\": 1}")
        try watcher.waitForChange("Car/first", "created")
        // Written after the directory's watch exists: reported by it.
        try writeText(store.file("Car", "second.json"), "{\"n\": 2}")
        try watcher.waitForChange("Car/second", "created")
        #expect(try store.status()["objects"] as? Int == 2)
    }

    // MARK: - Stopping on a signal

    @Test(arguments: [SIGTERM, SIGINT])
    func aSignalStopsTheWatcherWithStatus0WithinTwoSeconds(signal: Int32) throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("Person/ada", "{\"v\": 1}")
        let watcher = try WatchProcess(store)
        defer { watcher.kill() }
        try watcher.waitUntilCaughtUp()

        try writeText(store.file("Person", "bob.json"), "{\"name\": \"Bob\"}")
        try writeText(store.file("Person", "ada.json"), "{\"v\": 2}")
        try watcher.waitForChange("Person/bob", "created")
        try watcher.waitForChange("Person/ada", "modified")
        #expect(try reportedWatcher(store)?["pid"] as? Int == Int(watcher.pid))

        let (stopped, elapsed) = watcher.stop(with: signal)
        print("archive-sync watch exited \(elapsed) after signal \(signal)")
        let result = try #require(stopped, "still running 10 s after signal \(signal)\n\(watcher.stderr)")
        #expect(result.status == 0, "\(result)")
        #expect(elapsed < signalExitBound, "exited \(elapsed) after signal \(signal)")
        #expect(result.errorOutput.contains("stopped watching \(store.path)"), "\(result)")

        // The manifest is consistent and the lease released.
        let verified = try store.run("verify")
        #expect(verified.status == 0, "\(verified)")
        #expect(try store.history("Person/ada").map { $0["version"] as? Int } == [1, 2])
        #expect(try store.status()["objects"] as? Int == 2)
        #expect(try reportedWatcher(store) == nil)
    }

    /// A signal while the watcher is busy recording a burst: it still stops at once with status
    /// 0, and what it recorded is consistent (the rest is merely not recorded yet).
    @Test(arguments: [SIGTERM, SIGINT])
    func aSignalWhileRecordingABurstStopsQuicklyAndLeavesAConsistentManifest(signal: Int32) throws {
        let store = try TestStore()
        defer { store.delete() }
        try FileManager.default.createDirectory(atPath: store.path + "/Busy", withIntermediateDirectories: false)
        let watcher = try WatchProcess(store)
        defer { watcher.kill() }
        try watcher.waitUntilCaughtUp()

        // A backlog: the watcher is stopped (SIGSTOP) while 10,000 files are written (fewer
        // events than the kernel's queue holds), continued, and sent the signal as soon as it
        // has printed the first of them: while it records the rest.
        let count = 10_000
        watcher.send(SIGSTOP)
        try #require(poll(timeout: .seconds(10)) { processState(watcher.pid) == "T" }, "the watcher did not stop")
        var failed = 0
        for n in 0..<count where !writeQuickly(store.file("Busy", "item\(n).json"), "{\"n\": \(n)}") { failed += 1 }
        try #require(failed == 0, "could not write \(failed) files")
        watcher.send(SIGCONT)
        try #require(
            poll(timeout: .seconds(60), interval: .milliseconds(1)) { watcher.stdout.contains("\"id\":\"Busy/") },
            "the watcher recorded nothing\n\(watcher.stderr)")
        let stopped = watcher.stop(with: signal)
        let result = try #require(stopped.result, "still running 10 s after signal \(signal)\n\(watcher.stderr)")
        let recorded = lines(result.output).count
        print("archive-sync watch exited \(stopped.elapsed) after signal \(signal), sent while recording \(count) files (\(recorded) printed)")
        #expect(result.status == 0, "\(result)")
        #expect(stopped.elapsed < signalExitBound, "exited \(stopped.elapsed) after signal \(signal)")
        #expect(result.errorOutput.contains("stopped watching"), "\(result)")

        // Whatever was recorded is intact: the only problems are files not recorded yet.
        let json = try store.run("verify", "--json")
        let report = try #require(try parseJSON(json) as? [String: Any], "\(json)")
        let problems = try #require(report["problems"] as? [[String: Any]], "\(json)")
        #expect(problems.allSatisfy { $0["kind"] as? String == "untracked" }, "\(json)")
        #expect((report["verified"] as? Int ?? -1) + problems.count == count, "\(json)")
        try #require(try store.run("scan").status == 0)
        let verified = try store.run("verify")
        #expect(verified.status == 0, "\(verified)")
        let listed = try #require(try parseJSON(try store.run("ls", "Busy", "--json")) as? [[String: Any]])
        #expect(listed.count == count)
        #expect(listed.allSatisfy { $0["version"] as? Int == 1 })
    }

    // MARK: - One watcher per store

    @Test func aSecondWatcherIsRefusedNamingTheFirstAndStatusShowsTheWatcher() throws {
        let store = try TestStore()
        defer { store.delete() }
        #expect(try reportedWatcher(store) == nil)
        let first = try WatchProcess(store)
        defer { first.kill() }
        try first.waitUntilCaughtUp()

        let reported = try #require(try reportedWatcher(store), "status shows no watcher while one runs")
        #expect(reported["pid"] as? Int == Int(first.pid), "\(reported)")
        let since = try #require(reported["currentSince"] as? String, "\(reported)")
        let date = try #require(ISO8601DateFormatter().date(from: since), "currentSince is not an ISO 8601 date: \(since)")
        #expect(abs(date.timeIntervalSinceNow) < 300, "currentSince \(since) is not about now")
        let text = try store.run("status")
        #expect(row(text.output, startingWith: "watched")?.prefix(4) == ["watched", "by", "pid", "\(first.pid),"], "\(text)")

        let (second, elapsed) = try runToExit(["watch", store.path, "--json"])
        expectFailure(second, status: 3, mentioning: [store.path, "already watched", "process \(first.pid)"])
        print("the second archive-sync watch was refused after \(elapsed)")
        #expect(elapsed < .seconds(5), "the refusal took \(elapsed)")

        // The refusal took nothing from the first: it still holds the lease and records changes.
        #expect(try reportedWatcher(store)?["pid"] as? Int == Int(first.pid))
        try FileManager.default.createDirectory(atPath: store.path + "/Person", withIntermediateDirectories: false)
        try writeText(store.file("Person", "ada.json"), "{}")
        try first.waitForChange("Person/ada", "created")

        let stopped = try #require(first.stop(with: SIGTERM).result)
        #expect(stopped.status == 0, "\(stopped)")
        #expect(try reportedWatcher(store) == nil)
        #expect(row(try store.run("status").output, startingWith: "watched")?[1] == "no")

        // Once the first stopped, the store can be watched again.
        let again = try WatchProcess(store)
        defer { again.kill() }
        try again.waitUntilCaughtUp()
        #expect(try reportedWatcher(store)?["pid"] as? Int == Int(again.pid))
    }

    @Test func aKilledWatcherLeavesNoLeaseBehind() throws {
        let store = try TestStore()
        defer { store.delete() }
        let watcher = try WatchProcess(store)
        defer { watcher.kill() }
        try watcher.waitUntilCaughtUp()
        #expect(try reportedWatcher(store)?["pid"] as? Int == Int(watcher.pid))

        let killed = try #require(watcher.stop(with: SIGKILL).result)
        #expect(killed.status == 128 + SIGKILL)
        #expect(try reportedWatcher(store) == nil)
        let next = try WatchProcess(store)
        defer { next.kill() }
        try next.waitUntilCaughtUp()
    }

    // MARK: - Catching up at startup

    @Test func changesMadeWhileNothingWatchedArePrintedRightAfterStart() throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("Person/old", "{\"v\": 1}")
        try store.put("Person/gone", "{}")
        // No watcher runs: another program creates, edits and deletes.
        try writeText(store.file("Person", "new.json"), "{\"name\": \"New\"}")
        try writeText(store.file("Person", "old.json"), "{\"v\": 2}")
        try FileManager.default.removeItem(atPath: store.file("Person", "gone.json"))
        try FileManager.default.createDirectory(atPath: store.path + "/Pet", withIntermediateDirectories: false)
        try writeText(store.file("Pet", "rex.json"), "[]")

        let watcher = try WatchProcess(store)
        defer { watcher.kill() }
        try watcher.waitUntilCaughtUp()
        #expect(watcher.stderr.contains("caught up (2 created, 1 modified, 1 deleted"), "\(watcher.stderr)")
        #expect(try watcher.waitForChange("Person/new", "created")["version"] as? Int == 1)
        #expect(try watcher.waitForChange("Pet/rex", "created")["version"] as? Int == 1)
        #expect(try watcher.waitForChange("Person/old", "modified")["version"] as? Int == 2)
        #expect(try watcher.waitForChange("Person/gone", "deleted")["version"] as? Int == 2)
        #expect(watcher.changes().count == 4, "\(watcher.stdout)")
        #expect(try store.get("Person/old") == Data("{\"v\": 2}".utf8))
        #expect(try store.run("verify").status == 0)
    }

    // MARK: - Overflow of the kernel's queue

    /// SIGSTOP keeps the watcher from reading while more files are written than the kernel's
    /// inotify queue holds: the queue overflows, and the full scan that follows records every file.
    @Test(.timeLimit(.minutes(10)))
    func aBurstPastTheKernelQueueOverflowsAndTheFullScanLosesNothing() throws {
        let queueText = try String(contentsOfFile: "/proc/sys/fs/inotify/max_queued_events", encoding: .utf8)
        let queue = try #require(Int(queueText.trimmingCharacters(in: .whitespacesAndNewlines)))
        let count = max(25_000, queue + queue / 2)

        let store = try TestStore()
        defer { store.delete() }
        try store.put("Person/ada", "{}")
        try FileManager.default.createDirectory(atPath: store.path + "/Burst", withIntermediateDirectories: false)
        let watcher = try WatchProcess(store)
        defer { watcher.kill() }
        try watcher.waitUntilCaughtUp()

        watcher.send(SIGSTOP)
        try #require(poll(timeout: .seconds(10)) { processState(watcher.pid) == "T" }, "the watcher did not stop")
        let clock = ContinuousClock()
        let writing = clock.now
        var failed: [Int] = []
        for n in 0..<count where !writeQuickly(store.file("Burst", "f\(n).json"), "{\"n\":\(n)}") { failed.append(n) }
        let wrote = clock.now - writing
        try #require(failed.isEmpty, "could not write \(failed.count) files, errno \(errno)")
        // A collection made while events are being lost: its creation is one of them.
        try FileManager.default.createDirectory(atPath: store.path + "/Late", withIntermediateDirectories: false)
        #expect(processState(watcher.pid) == "T", "the watcher ran while the files were written")
        watcher.send(SIGCONT)

        let caughtUp = clock.now
        var objects = 0
        let done = try poll(timeout: .seconds(180), interval: .milliseconds(500)) {
            objects = try store.status()["objects"] as? Int ?? 0
            return objects == count + 1 || !watcher.command.isRunning
        }
        print("wrote \(count) files in \(wrote); the watcher recorded them \(clock.now - caughtUp) after SIGCONT")
        #expect(done && objects == count + 1, "\(objects) objects recorded of \(count + 1)\n\(watcher.stderr)")
        #expect(watcher.stderr.contains("overflowed"), "\(watcher.stderr)")
        #expect(watcher.stderr.contains("full scan:"), "\(watcher.stderr)")

        let listed = try store.run("ls", "Burst", "--json")
        let objectsListed = try #require(try parseJSON(listed) as? [[String: Any]], "\(listed)")
        #expect(objectsListed.count == count)
        #expect(Set(objectsListed.compactMap { $0["id"] as? String }) == Set((0..<count).map { "Burst/f\($0)" }))
        #expect(objectsListed.filter { $0["version"] as? Int != 1 }.isEmpty, "some files were recorded twice")

        // Each file printed exactly once, as created.
        var printed: [Substring] = []
        _ = poll(timeout: .seconds(60), interval: .milliseconds(250)) {
            printed = watcher.stdout.split(separator: "\n").filter { $0.contains("\"id\":\"Burst/") }
            return printed.count >= count
        }
        #expect(printed.count == count)
        #expect(Set(printed).count == printed.count)
        #expect(printed.allSatisfy { $0.contains("\"kind\":\"created\"") && $0.contains("\"version\":1") })

        // The overflow also re-watched the root: a file written later into the collection whose
        // creation event was lost is recorded at once, not at the next hourly scan.
        try "{}".write(toFile: store.file("Late", "after.json"), atomically: false, encoding: .utf8)
        let late = poll(timeout: .seconds(15), interval: .milliseconds(100)) { watcher.stdout.contains("\"id\":\"Late/after\"") }
        #expect(late, "Late/after.json was not recorded\n\(watcher.stderr)")

        let verified = try store.run("verify")
        #expect(verified.status == 0, "\(verified)")
        let stopped = watcher.stop(with: SIGTERM, timeout: .seconds(30))
        #expect(stopped.result?.status == 0, "\(String(describing: stopped.result))")
    }

    // MARK: - Errors

    @Test func aDirectoryThatIsNotAStoreExits2() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let plain = directory + "/plain"
        try FileManager.default.createDirectory(atPath: plain, withIntermediateDirectories: false)
        let (result, _) = try runToExit(["watch", plain, "--json"])
        expectFailure(result, status: 2, mentioning: [plain, "is not a usable store", "archive-sync init"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: plain).isEmpty, "watch wrote into a directory that is not a store")
    }

    @Test func aMissingPathExits2() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let missing = directory + "/missing"
        let (result, _) = try runToExit(["watch", missing])
        expectFailure(result, status: 2, mentioning: [missing, "does not exist"])
        #expect(!FileManager.default.fileExists(atPath: missing))
    }

    @Test(arguments: [
        (["--debounce", "-1"], "--debounce"), (["--debounce=-1"], "--debounce must be from 0 to 60000"),
        (["--debounce", "60001"], "--debounce must be from 0 to 60000"), (["--debounce", "soon"], "soon"),
        (["--rescan-interval=-5"], "--rescan-interval must be 0"),
    ])
    func aBadOptionExits2NamingIt(options: [String], message: String) throws {
        let store = try TestStore()
        defer { store.delete() }
        let (result, _) = try runToExit(["watch", store.path] + options)
        expectFailure(result, status: 2, mentioning: [message])
        #expect(try reportedWatcher(store) == nil)
    }

    @Test func deletingTheWatchedStoreStopsTheWatcherWithStatus1() throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("Person/ada", "{}")
        let watcher = try WatchProcess(store)
        defer { watcher.kill() }
        try watcher.waitUntilCaughtUp()

        try removeRecursively(store.path)
        let (exited, elapsed) = watcher.waitForExit(timeout: .seconds(10))
        print("archive-sync watch exited \(elapsed) after its store was deleted")
        let result = try #require(
            exited, "still running 10 s after its store was deleted\n--- stdout ---\n\(watcher.stdout)\n--- stderr ---\n\(watcher.stderr)")
        #expect(result.status == 1, "\(result)")
        #expect(elapsed < .seconds(5), "exited \(elapsed) after the store was deleted")
        let last = lines(result.errorOutput).last ?? ""
        #expect(last == "archive-sync: \(store.path) was deleted or moved away while watched; watching stopped", "\(result)")
    }

    @Test func movingTheWatchedStoreAwayStopsTheWatcherWithStatus1() throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("Person/ada", "{}")
        let watcher = try WatchProcess(store)
        defer { watcher.kill() }
        try watcher.waitUntilCaughtUp()

        let moved = store.directory + "/moved"
        try FileManager.default.moveItem(atPath: store.path, toPath: moved)
        let (exited, elapsed) = watcher.waitForExit(timeout: .seconds(10))
        let result = try #require(exited, "still running 10 s after its store was moved\n\(watcher.stderr)")
        #expect(result.status == 1, "\(result)")
        #expect(elapsed < .seconds(5), "exited \(elapsed) after the store was moved")
        #expect(lines(result.errorOutput).last?.hasPrefix("archive-sync: \(store.path) was deleted or moved away") == true, "\(result)")
        // The store itself, where it went, is intact and no longer watched.
        #expect(try runArchiveSync(["verify", moved]).status == 0)
        let status = try #require(try parseJSON(try runArchiveSync(["status", moved, "--json"])) as? [String: Any])
        #expect(status["watcher"] == nil, "\(status)")
    }

    // MARK: - The inotify watch limit

    /// Runs the watcher inside a new user namespace whose own inotify watch limit
    /// (/proc/sys/user/max_inotify_watches, per namespace) is `limit`: the machine's settings
    /// are untouched. Needs util-linux's `unshare` and unprivileged user namespaces.
    private static func watchWithLimit(_ store: TestStore, limit: Int) throws -> WatchProcess {
        let unshare = try #require(
            ["/usr/bin/unshare", "/bin/unshare"].first { FileManager.default.isExecutableFile(atPath: $0) },
            "util-linux's unshare is needed to lower the inotify watch limit in a user namespace")
        let binary = try #require(archiveSyncBinary)
        let script = "echo \(limit) > /proc/sys/user/max_inotify_watches && exec \"$0\" \"$@\""
        return try WatchProcess(
            executable: unshare,
            ["--user", "--map-root-user", "sh", "-c", script, binary, "watch", store.path, "--json", "--debounce", "0"])
    }

    /// A store with `count` collection directories of one object each, recorded.
    private static func storeWithCollections(_ count: Int) throws -> TestStore {
        let store = try TestStore()
        for n in 0..<count {
            try FileManager.default.createDirectory(atPath: store.path + "/C\(n)", withIntermediateDirectories: false)
            try writeText(store.file("C\(n)", "x.json"), "{}")
        }
        try #require(try store.run("scan").status == 0)
        return store
    }

    @Test func moreCollectionsThanTheWatchLimitAtStartExits1NamingTheSetting() throws {
        let store = try Self.storeWithCollections(20)
        defer { store.delete() }

        // The control: the same namespace with room for every watch (root + 20) starts fine.
        let roomy = try Self.watchWithLimit(store, limit: 21)
        defer { roomy.kill() }
        try roomy.waitUntilCaughtUp()
        #expect(try #require(roomy.stop(with: SIGTERM).result).status == 0)

        let watcher = try Self.watchWithLimit(store, limit: 20)
        defer { watcher.kill() }
        let (exited, _) = watcher.waitForExit(timeout: .seconds(30))
        let result = try #require(exited, "the watcher runs with 21 directories and a limit of 20 watches\n\(watcher.stderr)")
        expectFailure(
            result, status: 1, mentioning: ["cannot watch \(store.path)", "/proc/sys/fs/inotify/max_user_watches", "fs.inotify.max_user_watches"])
        #expect(try reportedWatcher(store) == nil)
    }

    @Test func aNewCollectionPastTheWatchLimitStopsTheWatcherNamingTheSetting() throws {
        let store = try Self.storeWithCollections(3)
        defer { store.delete() }
        let watcher = try Self.watchWithLimit(store, limit: 6)  // root + 3 collections + 2 more
        defer { watcher.kill() }
        try watcher.waitUntilCaughtUp()

        for n in 0..<2 {
            try FileManager.default.createDirectory(atPath: store.path + "/New\(n)", withIntermediateDirectories: false)
            try writeText(store.file("New\(n)", "x.json"), "{}")
            try watcher.waitForChange("New\(n)/x", "created")
        }
        #expect(watcher.command.isRunning, "\(watcher.stderr)")
        try FileManager.default.createDirectory(atPath: store.path + "/Over", withIntermediateDirectories: false)
        let (exited, _) = watcher.waitForExit(timeout: .seconds(30))
        let result = try #require(exited, "the watcher runs on past its watch limit\n\(watcher.stderr)")
        #expect(result.status == 1, "\(result)")
        let last = lines(result.errorOutput).last ?? ""
        #expect(last.hasPrefix("archive-sync: cannot watch \(store.path)/Over"), "\(result)")
        #expect(last.contains("/proc/sys/fs/inotify/max_user_watches"), "\(result)")
        #expect(try reportedWatcher(store) == nil)
    }
}
