import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("archive-sync watch stops at once, even in its first scan", .serialized)
struct WatchStopTests {
    /// A first scan of 30,000 new files takes several seconds: a SIGTERM half a second in
    /// stops it within two seconds with status 0. What it recorded stays recorded (each line
    /// it printed is in the manifest), and the next start records the rest.
    @Test(.timeLimit(.minutes(10)))
    func aSignalDuringTheFirstScanStopsWithinTwoSecondsAndTheNextStartRecordsTheRest() throws {
        let count = 30_000
        let store = try TestStore()
        defer { store.delete() }
        try FileManager.default.createDirectory(atPath: store.path + "/Bulk", withIntermediateDirectories: false)
        var failed = 0
        for n in 0..<count where !writeQuickly(store.file("Bulk", "item\(n).json"), "{\"n\": \(n)}") { failed += 1 }
        try #require(failed == 0, "could not write \(failed) files")

        let watcher = try WatchProcess(store)
        defer { watcher.kill() }
        usleep(500_000)
        try #require(
            watcher.command.isRunning && !watcher.stderr.contains("caught up"),
            "the first scan was over within 0.5 s: the test needs more files\n\(watcher.stderr)")
        let (stopped, elapsed) = watcher.stop(with: SIGTERM)
        print("archive-sync watch exited \(elapsed) after SIGTERM during its first scan")
        let result = try #require(stopped, "still running 10 s after SIGTERM\n\(watcher.stderr)")
        #expect(result.status == 0, "\(result)")
        #expect(elapsed < signalExitBound, "exited \(elapsed) after SIGTERM")
        #expect(result.errorOutput.contains("stopped watching \(store.path) before it caught up"), "\(result)")
        #expect(try reportedWatcher(store) == nil)

        let recorded = try #require(try store.status()["objects"] as? Int)
        #expect(recorded < count, "the first scan finished before the signal")
        #expect(lines(result.output).count == recorded, "every change recorded is printed, and only those")

        let again = try WatchProcess(store)
        defer { again.kill() }
        try again.waitUntilCaughtUp(timeout: .seconds(300))
        #expect(again.stderr.contains("caught up (\(count - recorded) created, 0 modified, 0 deleted, \(recorded) unchanged"), "\(again.stderr)")
        #expect(try store.status()["objects"] as? Int == count)
        #expect(try store.run("verify").status == 0)
        #expect(try #require(again.stop(with: SIGTERM).result).status == 0)
    }
}
