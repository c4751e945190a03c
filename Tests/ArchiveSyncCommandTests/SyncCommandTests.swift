import ArchiveStore
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Parses a command's stdout as one JSON object.
private func json(_ result: CommandResult, sourceLocation: SourceLocation = #_sourceLocation) throws -> [String: Any] {
    try #require(
        JSONSerialization.jsonObject(with: result.stdout) as? [String: Any], "not one JSON object: \(result)", sourceLocation: sourceLocation)
}

/// Two stores made by `archive-sync init`, in one temp directory.
private struct StorePair {
    let a: TestStore
    let b: TestStore

    init() throws {
        a = try TestStore()
        b = try TestStore()
    }

    func delete() {
        a.delete()
        b.delete()
    }

    func put(_ store: TestStore, _ id: String, _ text: String) throws {
        let result = try store.run("put", id, stdin: Data(text.utf8))
        try #require(result.status == 0, "\(result)")
    }

    @discardableResult
    func sync(_ options: String...) throws -> CommandResult {
        try runArchiveSync(["sync", a.path, b.path] + options)
    }
}

@Suite("archive-sync diff, sync and conflicts")
struct SyncCommandTests {
    @Test func syncCopiesBothWaysKeepsBothSidesOfAConflictAndThenSaysZero() throws {
        let pair = try StorePair()
        defer { pair.delete() }
        try pair.put(pair.a, "Person/p1", #"{"name":"ann"}"#)
        try pair.put(pair.b, "Person/p2", #"{"name":"bob"}"#)
        let first = try pair.sync()
        #expect(first.status == 0 && first.output.contains("1 copied to B, 1 copied to A"), "\(first)")

        try pair.put(pair.a, "Person/p1", #"{"name":"ann (edited in a)"}"#)
        try pair.put(pair.b, "Person/p1", #"{"name":"ann (edited in b)"}"#)
        let diff = try runArchiveSync(["diff", pair.a.path, pair.b.path, "--json"])
        #expect(diff.status == 0, "\(diff)")
        let actions = try #require(try json(diff)["actions"] as? [[String: Any]], "\(diff)")
        #expect(actions.count == 1 && actions[0]["kind"] as? String == "conflict" && actions[0]["id"] as? String == "Person/p1", "\(diff)")
        // diff changed nothing.
        #expect(try pair.a.run("get", "Person/p1").output.contains("edited in a"))

        let synced = try pair.sync("--json")
        #expect(synced.status == 0, "\(synced)")
        let conflicts = try #require(try json(synced)["conflicts"] as? [[String: Any]])
        let copy = try #require(conflicts.first?["copy"] as? String, "\(synced)")
        #expect(
            copy.hasPrefix("Person/p1.conflict-\(pair.a.replica.prefix(8))-") || copy.hasPrefix("Person/p1.conflict-\(pair.b.replica.prefix(8))-"))
        for store in [pair.a, pair.b] {
            let listed = try store.run("conflicts", "--json")
            let copies = try #require(try JSONSerialization.jsonObject(with: listed.stdout) as? [[String: Any]], "\(listed)")
            #expect(copies.count == 1 && copies[0]["id"] as? String == copy, "\(listed)")
            let texts = [try store.run("get", "Person/p1").output, try store.run("get", copy).output]
            #expect(Set(texts.map { $0.contains("edited in a") ? "a" : $0.contains("edited in b") ? "b" : "?" }) == ["a", "b"], "\(texts)")
        }
        let again = try pair.sync()
        #expect(again.status == 0 && again.output.hasSuffix(": 0 changes\n"), "\(again)")
    }

    @Test func aDirectoryThatIsNotAStoreIsRefusedUnlessForced() throws {
        let pair = try StorePair()
        defer { pair.delete() }
        try pair.put(pair.a, "Person/p1", "{}")
        let empty = pair.b.directory + "/unmounted"
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: false)
        let refused = try runArchiveSync(["sync", pair.a.path, empty])
        #expect(refused.status == 2 && refused.errorOutput.contains("unmounted disk") && refused.errorOutput.contains("--force"), "\(refused)")
        #expect(filesInDirectory(empty).isEmpty)
        let forced = try runArchiveSync(["sync", pair.a.path, empty, "--force"])
        #expect(forced.status == 0 && forced.output.contains("1 copied to B"), "\(forced)")
        #expect(FileManager.default.fileExists(atPath: empty + "/Person/p1.json"))
    }

    @Test func deletingMoreThanHalfOfASideStopsWithAMessageUnlessForced() throws {
        let pair = try StorePair()
        defer { pair.delete() }
        for n in 0..<4 { try pair.put(pair.a, "Person/p\(n)", "{\"n\":\(n)}") }
        #expect(try pair.sync().status == 0)
        for n in 0..<3 { #expect(try pair.a.run("rm", "Person/p\(n)").status == 0) }
        let stopped = try pair.sync()
        #expect(
            stopped.status == 1 && stopped.errorOutput.contains("delete 3 of the 4 objects") && stopped.errorOutput.contains("--force"), "\(stopped)")
        #expect(FileManager.default.fileExists(atPath: pair.b.path + "/Person/p0.json"))
        let forced = try pair.sync("--force")
        #expect(forced.status == 0 && forced.output.contains("3 deleted on B"), "\(forced)")
    }

    @Test func preferDecidesAConflictAndTheLoserStaysInHistory() throws {
        let pair = try StorePair()
        defer { pair.delete() }
        try pair.put(pair.a, "Person/p1", #"{"v":0}"#)
        #expect(try pair.sync().status == 0)
        try pair.put(pair.a, "Person/p1", #"{"v":"a"}"#)
        try pair.put(pair.b, "Person/p1", #"{"v":"b"}"#)
        let synced = try pair.sync("--prefer", "a")
        #expect(synced.status == 0 && synced.output.contains("1 conflict"), "\(synced)")
        #expect(try pair.b.run("get", "Person/p1").output == #"{"v":"a"}"#)
        #expect(try pair.b.run("conflicts").output == "no conflicts\n")
        let history = try pair.b.run("history", "Person/p1", "--json")
        #expect(history.output.contains(ContentHash(of: Data(#"{"v":"b"}"#.utf8)).description), "\(history)")
    }

    @Test(arguments: [
        (["sync", "/nonexistent-a"], "Missing expected argument"),
        (["sync", "A", "B", "--prefer", "left"], "--prefer"),
    ])
    func badUsageExits2NamingIt(arguments: [String], message: String) throws {
        let result = try runArchiveSync(arguments)
        #expect(result.status == 2 && result.errorOutput.contains(message), "\(result)")
    }

    /// With a watcher keeping each store current, a sync scans neither.
    @Test func watchedStoresAreNotScanned() throws {
        let pair = try StorePair()
        defer { pair.delete() }
        try pair.put(pair.a, "Person/p1", "{}")
        let watchers = try [pair.a, pair.b].map { try RunningCommand(["watch", $0.path]) }
        defer { for watcher in watchers { watcher.kill() } }
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline, !watchers.allSatisfy({ $0.errorOutputSoFar.contains("caught up") }) { usleep(20_000) }
        let synced = try pair.sync("--json")
        let report = try json(synced)
        #expect(report["scannedA"] as? Bool == false && report["scannedB"] as? Bool == false, "\(synced)")
        #expect(report["copiedToB"] as? Int == 1, "\(synced)")
    }

    /// A sync run as a child process is killed with SIGKILL at random moments, again and
    /// again. After each kill every file holds contents one side had before (old or new,
    /// never half) and verify finds both stores clean; a last run completes the sync, after
    /// which the stores are equal, nothing either side held is lost, and a sync says 0.
    @Test func aSyncKilledAtRandomMomentsConvergesWhenRunAgain() throws {
        let pair = try StorePair()
        defer { pair.delete() }
        var rng = SystemRandomNumberGenerator()
        var before: Set<Data> = []
        do {
            let a = try ArchiveStore(directory: pair.a.path)
            let b = try ArchiveStore(directory: pair.b.path)
            try a.batch { batch in
                for n in 0..<3_000 { try batch.save(["n": n, "side": 0], forKey: "k\(n)", in: "Item") }
            }
            try b.batch { batch in
                for n in 1_500..<4_000 { try batch.save(["n": n, "side": 1], forKey: "k\(n)", in: "Item") }
            }
            for store in [a, b] {
                for key in try store.keys(of: Data.self, in: "Item") { before.insert(try store.data(for: ObjectID(collection: "Item", key: key))) }
            }
        }
        var killedWhileRunning = 0
        for round in 0..<8 {
            // New work each round (a fresh slice of A's objects edited), so that a sync faster
            // than the kills still has something to do when the next one comes.
            do {
                let a = try ArchiveStore(directory: pair.a.path)
                let slice = round * 375..<(round + 1) * 375
                try a.batch { batch in
                    for n in slice { try batch.save(["n": n, "side": 0, "round": round + 1], forKey: "k\(n)", in: "Item") }
                }
                for n in slice { before.insert(try a.data(for: ObjectID(collection: "Item", key: "k\(n)"))) }
            }
            let child = try RunningCommand(["sync", pair.a.path, pair.b.path, "--force"])
            usleep(UInt32.random(in: 20_000...400_000, using: &rng))
            if child.isRunning { killedWhileRunning += 1 }
            child.kill()
            for store in [pair.a, pair.b] {
                for (path, data) in filesInDirectory(store.path + "/Item") {
                    #expect(before.contains(data), "round \(round): \(path) holds contents no side had")
                }
                let verify = try store.run("verify")
                #expect(verify.status == 0, "round \(round): \(verify)")
            }
        }
        #expect(killedWhileRunning >= 4, "most kills must land while the sync runs")
        let finished = try pair.sync("--force")
        #expect(finished.status == 0, "\(finished)")
        #expect(filesInDirectory(pair.a.path) == filesInDirectory(pair.b.path))
        let after = Set(filesInDirectory(pair.a.path + "/Item").values)
        let history = try ArchiveStore(directory: pair.a.path)
        let historyB = try ArchiveStore(directory: pair.b.path)
        for data in before where !after.contains(data) {
            // Only conflicting objects (held by both sides) may have a version in history alone.
            let n = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Int])["n"]!
            let id = try ObjectID(collection: "Item", key: "k\(n)")
            let kept = try (history.history(id) + historyB.history(id)).compactMap(\.hash)
            #expect(kept.contains(ContentHash(of: data)), "k\(n)'s contents are lost")
        }
        let again = try pair.sync()
        #expect(again.output.hasSuffix(": 0 changes\n"), "\(again)")
    }
}

/// Every regular file under `directory` (the manifest's directory left out), by relative path.
private func filesInDirectory(_ directory: String) -> [String: Data] {
    var files: [String: Data] = [:]
    for path in (try? FileManager.default.subpathsOfDirectory(atPath: directory)) ?? [] where !path.hasPrefix(".archive-sync") {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory + "/" + path, isDirectory: &isDirectory), !isDirectory.boolValue {
            files[path] = FileManager.default.contents(atPath: directory + "/" + path)
        }
    }
    return files
}
