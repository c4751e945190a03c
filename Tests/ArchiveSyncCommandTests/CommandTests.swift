import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// End-to-end tests: each runs the built `archive-sync` binary as a child process on a store
// of its own in a fresh temp directory, and checks exit status, stdout, stderr and the disk.

/// A fresh store made by `archive-sync init` in its own temp directory.
struct TestStore {
    /// The temp directory holding the store (and any scratch files of the test).
    let directory: String
    /// The store: `directory/store`.
    let path: String
    /// The replica id `init` printed.
    let replica: String

    init(history: Int? = nil) throws {
        directory = try makeTemporaryDirectory()
        path = directory + "/store"
        let made = try runArchiveSync(["init", path] + (history.map { ["--history", String($0)] } ?? []))
        try #require(made.status == 0, "\(made)")
        let match = try #require(made.output.firstMatch(of: /replica ([0-9a-f]{16}),/), "\(made)")
        replica = String(match.1)
    }

    func delete() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs `archive-sync SUBCOMMAND STORE REST...`.
    @discardableResult
    func run(_ subcommand: String, _ rest: String..., stdin: Data? = nil) throws -> CommandResult {
        try runArchiveSync([subcommand, path] + rest, stdin: stdin)
    }

    /// Puts `text` as `id` through stdin and requires success.
    func put(_ id: String, _ text: String) throws {
        let result = try run("put", id, stdin: Data(text.utf8))
        try #require(result.status == 0, "\(result)")
    }

    /// The bytes `get` prints for `id`, requiring success.
    func get(_ id: String, version: Int? = nil) throws -> Data {
        let result = try version.map { try run("get", id, "--version", String($0)) } ?? run("get", id)
        try #require(result.status == 0, "\(result)")
        return result.stdout
    }

    /// `history --json`, parsed.
    func history(_ id: String) throws -> [[String: Any]] {
        let result = try run("history", id, "--json")
        try #require(result.status == 0, "\(result)")
        return try #require(try parseJSON(result) as? [[String: Any]], "\(result)")
    }

    /// `status --json`, parsed.
    func status() throws -> [String: Any] {
        let result = try run("status", "--json")
        try #require(result.status == 0, "\(result)")
        return try #require(try parseJSON(result) as? [String: Any], "\(result)")
    }

    /// The path of an object's file on disk, as the store names it.
    func file(_ collection: String, _ name: String) -> String {
        path + "/" + collection + "/" + name
    }
}

/// stdout of a `--json` command, parsed as one JSON document.
func parseJSON(_ result: CommandResult) throws -> Any {
    try JSONSerialization.jsonObject(with: result.stdout)
}

/// Writes `text` to `path`, replacing the file (a new inode, as an editor's save does).
func writeFile(_ path: String, _ text: String) throws {
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
}

/// The file's size, mtime in nanoseconds and inode: the stamp the store compares.
func stamp(_ path: String) throws -> [Int64] {
    var info = stat()
    try #require(stat(path, &info) == 0, "stat \(path) failed: errno \(errno)")
    #if canImport(Glibc)
        let mtime = info.st_mtim
    #else
        let mtime = info.st_mtimespec
    #endif
    return [Int64(info.st_size), Int64(mtime.tv_sec) * 1_000_000_000 + Int64(mtime.tv_nsec), Int64(truncatingIfNeeded: info.st_ino)]
}

/// Flips one bit of the byte at `offset` in place (same inode, same size) and puts back the
/// file's access and modification times, as bit rot (or a tool restoring the mtime) would.
func flipBitKeepingStamp(_ path: String, at offset: UInt64) throws {
    var before = stat()
    try #require(stat(path, &before) == 0, "stat \(path) failed: errno \(errno)")
    let handle = try #require(FileHandle(forUpdatingAtPath: path))
    try handle.seek(toOffset: offset)
    let byte = try #require(try handle.read(upToCount: 1)?.first)
    try handle.seek(toOffset: offset)
    try handle.write(contentsOf: Data([byte ^ 0x01]))
    try handle.close()
    #if canImport(Glibc)
        var times = [before.st_atim, before.st_mtim]
    #else
        var times = [before.st_atimespec, before.st_mtimespec]
    #endif
    try #require(utimensat(AT_FDCWD, path, &times, 0) == 0, "utimensat \(path) failed: errno \(errno)")
}

/// Checks that `result` failed with `status` and one `archive-sync: ...` line on stderr that
/// contains each of `fragments`, and printed nothing on stdout.
func expectFailure(
    _ result: CommandResult, status: Int32, mentioning fragments: [String], sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(result.status == status, "\(result)", sourceLocation: sourceLocation)
    #expect(result.errorOutput.hasPrefix("archive-sync: "), "\(result)", sourceLocation: sourceLocation)
    for fragment in fragments {
        #expect(result.errorOutput.contains(fragment), "stderr should mention \(fragment): \(result)", sourceLocation: sourceLocation)
    }
    #expect(result.stdout.isEmpty, "\(result)", sourceLocation: sourceLocation)
}

/// The non-empty lines of `text`.
func lines(_ text: String) -> [String] {
    text.split(separator: "\n").map(String.init)
}

/// The whitespace-separated cells of the table row whose first cell is `first`, or nil.
func row(_ text: String, startingWith first: String) -> [String]? {
    lines(text).map { $0.split(whereSeparator: \.isWhitespace).map(String.init) }.first { $0.first == first }
}

@Suite("archive-sync command, end to end")
struct CommandTests {
    static let subcommands = ["init", "put", "get", "ls", "rm", "history", "restore", "scan", "verify", "status"]

    // MARK: - init

    @Test func initCreatesStoreAndMetadataDirectoryAndPrintsTheReplica() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = directory + "/nested/store"

        let made = try runArchiveSync(["init", store])
        #expect(made.status == 0, "\(made)")
        #expect(made.stderr.isEmpty, "\(made)")
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: store + "/.archive-sync", isDirectory: &isDirectory) && isDirectory.boolValue)
        let replica = try #require(made.output.firstMatch(of: /replica ([0-9a-f]{16})/).map { String($0.1) }, "\(made)")

        let status = try runArchiveSync(["status", store, "--json"])
        #expect(status.status == 0, "\(status)")
        let json = try #require(try parseJSON(status) as? [String: Any], "\(status)")
        #expect(json["replica"] as? String == replica)

        // Running init again on the store keeps its identity.
        let again = try runArchiveSync(["init", store])
        #expect(again.status == 0, "\(again)")
        #expect(again.output.contains("replica \(replica)"), "\(again)")
    }

    @Test func initWithHistoryZeroIsRefusedAndCreatesNothing() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try runArchiveSync(["init", directory + "/store", "--history", "0"])
        expectFailure(result, status: 2, mentioning: ["--history"])
        #expect(!FileManager.default.fileExists(atPath: directory + "/store"))
    }

    // MARK: - put and get

    @Test func putFromStdinThenGetReturnsTheExactBytes() throws {
        let store = try TestStore()
        defer { store.delete() }
        // Odd spacing, a tab, non-ASCII text and a trailing newline: nothing may be normalised.
        let text = "{\n  \"name\" : \"Ada Lovelace\",\t\"tags\": [\"é\", \"数学\", 1.50e3],\n\"nested\": {\"x\": null}}\n"

        let put = try store.run("put", "Person/ada", stdin: Data(text.utf8))
        #expect(put.status == 0, "\(put)")
        #expect(put.output == "Person/ada version 1\n", "\(put)")

        #expect(try store.get("Person/ada") == Data(text.utf8))
        #expect(FileManager.default.contents(atPath: store.file("Person", "ada.json")) == Data(text.utf8))
    }

    @Test func putFileStoresTheFilesBytes() throws {
        let store = try TestStore()
        defer { store.delete() }
        let text = "[{\"id\": 1}, {\"id\": 2}]"
        let input = store.directory + "/input.json"
        try writeFile(input, text)

        let put = try store.run("put", "Person/bob", "--file", input)
        #expect(put.status == 0, "\(put)")
        #expect(put.output == "Person/bob version 1\n", "\(put)")
        #expect(try store.get("Person/bob") == Data(text.utf8))
    }

    @Test func putFileOfAMissingFileExits2NamingIt() throws {
        let store = try TestStore()
        defer { store.delete() }
        let missing = store.directory + "/no-such-input.json"
        expectFailure(try store.run("put", "Person/bob", "--file", missing), status: 2, mentioning: [missing])
        expectFailure(try store.run("get", "Person/bob"), status: 2, mentioning: ["Person/bob"])
    }

    @Test func putOfInvalidJSONExits2AndLeavesTheStoredVersionUntouched() throws {
        let store = try TestStore()
        defer { store.delete() }
        let original = "{\"name\": \"Ada\"}"
        try store.put("Person/ada", original)
        let historyBefore = try store.history("Person/ada")

        let refused = try store.run("put", "Person/ada", stdin: Data("{\"name\": ".utf8))
        expectFailure(refused, status: 2, mentioning: ["Person/ada", "not valid JSON"])
        #expect(lines(refused.errorOutput).count == 1, "\(refused)")

        #expect(try store.get("Person/ada") == Data(original.utf8))
        #expect(FileManager.default.contents(atPath: store.file("Person", "ada.json")) == Data(original.utf8))
        let historyAfter = try store.history("Person/ada")
        #expect(historyAfter.map { $0["version"] as? Int } == historyBefore.map { $0["version"] as? Int })
        #expect(historyAfter.map { $0["hash"] as? String } == historyBefore.map { $0["hash"] as? String })

        // Nor is an object created from invalid input.
        expectFailure(try store.run("put", "Person/new", stdin: Data("not json".utf8)), status: 2, mentioning: ["Person/new"])
        expectFailure(try store.run("get", "Person/new"), status: 2, mentioning: ["Person/new"])
        #expect(!FileManager.default.fileExists(atPath: store.file("Person", "new.json")))
    }

    @Test func puttingTheSameBytesAgainRecordsNoNewVersion() throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("Person/ada", "{\"v\": 1}")
        let again = try store.run("put", "Person/ada", stdin: Data("{\"v\": 1}".utf8))
        #expect(again.status == 0, "\(again)")
        #expect(again.output == "Person/ada version 1\n", "\(again)")
        #expect(try store.history("Person/ada").count == 1)
    }

    @Test func putOfEmptyStdinExits2AndCreatesNothing() throws {
        let store = try TestStore()
        defer { store.delete() }
        expectFailure(try store.run("put", "Person/ada", stdin: Data()), status: 2, mentioning: ["Person/ada", "not valid JSON"])
        expectFailure(try store.run("get", "Person/ada"), status: 2, mentioning: ["Person/ada"])
    }

    @Test func aLargeArchiveRoundTripsByteForByte() throws {
        let store = try TestStore()
        defer { store.delete() }
        // About 3 MB, more than any pipe buffer, with every byte value a JSON string may hold.
        let item = "{\"text\": \"" + String(repeating: "abc\\u0000\\\"é€😀 ", count: 40) + "\"}"
        let text = "[" + Array(repeating: item, count: 3_000).joined(separator: ",\n") + "]"
        let data = Data(text.utf8)
        try #require(data.count > 2_000_000)

        let put = try store.run("put", "Big/one", stdin: data)
        #expect(put.status == 0, "exit \(put.status): \(put.errorOutput)")
        let got = try store.run("get", "Big/one")
        #expect(got.status == 0, "exit \(got.status): \(got.errorOutput)")
        #expect(got.stdout.count == data.count)
        #expect(got.stdout == data)
    }

    @Test func putWithAnotherCodecReplacesTheFileAndKeepsBothVersions() throws {
        let store = try TestStore()
        defer { store.delete() }
        let plist = """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0"><dict><key>name</key><string>Ada</string></dict></plist>
            """
        let put = try store.run("put", "Person/ada", "--codec", "plist", stdin: Data(plist.utf8))
        #expect(put.status == 0, "\(put)")
        #expect(FileManager.default.fileExists(atPath: store.file("Person", "ada.plist")))
        expectFailure(
            try store.run("put", "Person/bob", "--codec", "plist", stdin: Data("{\"not\": \"a plist\"}".utf8)), status: 2,
            mentioning: ["Person/bob", "property list"])

        try store.put("Person/ada", "{\"name\": \"Ada\"}")
        #expect(!FileManager.default.fileExists(atPath: store.file("Person", "ada.plist")))
        #expect(try store.get("Person/ada") == Data("{\"name\": \"Ada\"}".utf8))
        #expect(try store.get("Person/ada", version: 1) == Data(plist.utf8))
        #expect(try store.history("Person/ada").map { $0["file"] as? String } == ["ada.plist", "ada.json"])
        #expect(try store.run("verify").status == 0)
    }

    @Test func concurrentPutsFromSeparateProcessesAllBecomeVersions() throws {
        let store = try TestStore()
        defer { store.delete() }
        let inputs = (1...8).map { "{\"writer\": \($0)}" }
        let running = try inputs.map { try RunningCommand(["put", store.path, "Person/ada"], stdin: Data($0.utf8)) }
        let results = running.map { $0.wait() }
        for result in results { #expect(result.status == 0, "\(result)") }

        let history = try store.history("Person/ada")
        #expect(history.map { $0["version"] as? Int } == Array(1...8))
        #expect(Set(history.compactMap { $0["hash"] as? String }).count == 8)
        // Each writer was told a distinct version.
        let told = results.compactMap { $0.output.firstMatch(of: /version (\d+)/).flatMap { Int($0.1) } }
        #expect(told.sorted() == Array(1...8))
        for version in 1...8 {
            #expect(inputs.contains(String(decoding: try store.get("Person/ada", version: version), as: UTF8.self)))
        }
        #expect(try store.run("verify").status == 0)
    }

    @Test func putAfterRmMakesTheNextVersion() throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("Person/ada", "{\"v\": 1}")
        try #require(try store.run("rm", "Person/ada").status == 0)
        let again = try store.run("put", "Person/ada", stdin: Data("{\"v\": 3}".utf8))
        #expect(again.status == 0, "\(again)")
        #expect(again.output == "Person/ada version 3\n", "\(again)")
        #expect(try store.get("Person/ada") == Data("{\"v\": 3}".utf8))
        #expect(try store.history("Person/ada").map { $0["isDeleted"] as? Bool } == [false, true, false])
    }

    @Test func aStorePathRelativeToTheWorkingDirectoryWorks() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(try runArchiveSync(["init", "rel/store"], in: directory).status == 0)
        #expect(FileManager.default.fileExists(atPath: directory + "/rel/store/.archive-sync"))
        #expect(try runArchiveSync(["put", "rel/store", "Person/ada"], stdin: Data("{}".utf8), in: directory).status == 0)
        let got = try runArchiveSync(["get", "rel/store", "Person/ada"], in: directory)
        #expect(got.status == 0, "\(got)")
        #expect(got.stdout == Data("{}".utf8))
        #expect(FileManager.default.contents(atPath: directory + "/rel/store/Person/ada.json") == Data("{}".utf8))
    }

    @Test func getVersionReturnsTheBytesOfThatVersion() throws {
        let store = try TestStore()
        defer { store.delete() }
        let versions = ["{\"v\": 1}", "{\"v\": 2, \"extra\": true}", "{\"v\": 3}"]
        for text in versions { try store.put("Person/ada", text) }

        #expect(try store.get("Person/ada", version: 1) == Data(versions[0].utf8))
        #expect(try store.get("Person/ada", version: 2) == Data(versions[1].utf8))
        #expect(try store.get("Person/ada", version: 3) == Data(versions[2].utf8))
        #expect(try store.get("Person/ada") == Data(versions[2].utf8))
    }

    @Test func getOfAMissingObjectOrVersionExits2NamingIt() throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("Person/ada", "{}")
        expectFailure(try store.run("get", "Person/nobody"), status: 2, mentioning: ["Person/nobody", "does not exist"])
        expectFailure(try store.run("get", "Nothing/ada"), status: 2, mentioning: ["Nothing/ada"])
        expectFailure(try store.run("get", "Person/ada", "--version", "7"), status: 2, mentioning: ["Person/ada", "version 7"])
    }

    @Test func keysWithSlashesAndNonASCIIRoundTripAndAreListed() throws {
        let store = try TestStore()
        defer { store.delete() }
        let id = "Person/team/Zoë .hidden"
        try store.put(id, "{\"ok\": true}")
        #expect(try store.get(id) == Data("{\"ok\": true}".utf8))
        // The `/` inside the key is escaped, so it does not make a subdirectory.
        #expect(FileManager.default.fileExists(atPath: store.file("Person", "team%2FZoë .hidden.json")))
        let listed = try store.run("ls", "Person", "--json")
        let objects = try #require(try parseJSON(listed) as? [[String: Any]], "\(listed)")
        #expect(objects.map { $0["id"] as? String } == [id])
    }

    // MARK: - ids and stores refused

    @Test(arguments: ["Person", "Person/../x", "/abs/x", "Person/", "../Person/x", "Person/./x", "/Person"])
    func badIDsExit2AndWriteNothing(id: String) throws {
        let store = try TestStore()
        defer { store.delete() }
        let results = [
            try store.run("put", id, stdin: Data("{}".utf8)),
            try store.run("get", id),
            try store.run("rm", id),
            try store.run("history", id),
            try store.run("restore", id, "--version", "1"),
        ]
        for result in results {
            expectFailure(result, status: 2, mentioning: ["invalid"])
        }
        // Nothing was written, inside the store or out of it.
        let inStore = try FileManager.default.contentsOfDirectory(atPath: store.path)
        #expect(inStore == [".archive-sync"])
        let beside = try FileManager.default.contentsOfDirectory(atPath: store.directory)
        #expect(beside == ["store"])
        #expect(try store.status()["objects"] as? Int == 0)
    }

    static let storeCommands: [[String]] = [
        ["ls"], ["status"], ["scan"], ["verify"], ["get", "Person/ada"], ["history", "Person/ada"], ["rm", "Person/ada"],
        ["put", "Person/ada"],
    ]

    @Test(arguments: storeCommands)
    func aDirectoryThatIsNotAStoreExits2AndIsLeftAlone(command: [String]) throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let plain = directory + "/plain"
        try FileManager.default.createDirectory(atPath: plain, withIntermediateDirectories: false)

        let result = try runArchiveSync([command[0], plain] + command.dropFirst(), stdin: Data("{}".utf8))
        expectFailure(result, status: 2, mentioning: [plain, "is not a usable store", "archive-sync init"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: plain).isEmpty)
    }

    @Test(arguments: storeCommands)
    func aMissingDirectoryExits2AndIsNotCreated(command: [String]) throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let missing = directory + "/missing"

        let result = try runArchiveSync([command[0], missing] + command.dropFirst(), stdin: Data("{}".utf8))
        expectFailure(result, status: 2, mentioning: [missing, "is not a usable store", "does not exist"])
        #expect(!FileManager.default.fileExists(atPath: missing))
    }

    @Test func aRegularFileAsTheStoreExits2() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/file"
        try writeFile(file, "hello")
        expectFailure(try runArchiveSync(["ls", file]), status: 2, mentioning: [file, "is not a usable store", "not a directory"])
    }

    // MARK: - ls

    @Test func lsListsCollectionsAndTheObjectsOfOne() throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("Person/ada", "{\"name\": \"Ada\"}")
        try store.put("Person/bob", "{\"name\": \"Bob\"}")
        try store.put("Pet/rex", "{\"name\": \"Rex\"}")

        let collections = try store.run("ls")
        #expect(collections.status == 0, "\(collections)")
        #expect(row(collections.output, startingWith: "Person").map { Array($0.prefix(3)) } == ["Person", "2", "30"], "\(collections)")
        #expect(row(collections.output, startingWith: "Pet").map { Array($0.prefix(3)) } == ["Pet", "1", "15"], "\(collections)")

        let people = try store.run("ls", "Person")
        #expect(people.status == 0, "\(people)")
        #expect(row(people.output, startingWith: "Person/ada")?[1] == "1", "\(people)")
        #expect(row(people.output, startingWith: "Person/bob")?[1] == "1", "\(people)")
        #expect(!people.output.contains("Pet/rex"), "\(people)")
    }

    @Test func lsJSONParsesWithTheRightCounts() throws {
        let store = try TestStore()
        defer { store.delete() }
        let ada = "{\"name\": \"Ada\"}"
        let bob = "{\"name\": \"Bob\", \"age\": 36}"
        try store.put("Person/ada", ada)
        try store.put("Person/bob", bob)
        try store.put("Person/bob", "{}")
        try store.put("Pet/rex", "[]")

        let listed = try store.run("ls", "--json")
        #expect(listed.status == 0, "\(listed)")
        let collections = try #require(try parseJSON(listed) as? [[String: Any]], "\(listed)")
        #expect(collections.map { $0["name"] as? String } == ["Person", "Pet"])
        #expect(collections.map { $0["objects"] as? Int } == [2, 1])
        #expect(collections.map { $0["bytes"] as? Int } == [ada.utf8.count + 2, 2])

        let people = try store.run("ls", "Person", "--json")
        #expect(people.status == 0, "\(people)")
        let objects = try #require(try parseJSON(people) as? [[String: Any]], "\(people)")
        #expect(objects.map { $0["id"] as? String } == ["Person/ada", "Person/bob"])
        #expect(objects.map { $0["version"] as? Int } == [1, 2])
        #expect(objects.map { $0["size"] as? Int } == [ada.utf8.count, 2])

        try #require(try store.run("rm", "Person/bob").status == 0)
        let after = try #require(try parseJSON(try store.run("ls", "Person", "--json")) as? [[String: Any]])
        #expect(after.map { $0["id"] as? String } == ["Person/ada"])
    }

    @Test func lsOfAnInvalidCollectionExits2() throws {
        let store = try TestStore()
        defer { store.delete() }
        expectFailure(try store.run("ls", "a/b"), status: 2, mentioning: ["a/b"])
        expectFailure(try store.run("ls", ".."), status: 2, mentioning: ["'..'"])
    }

    // MARK: - rm, history, restore

    @Test func rmThenRestoreBringsBackTheOldBytes() throws {
        let store = try TestStore()
        defer { store.delete() }
        let original = "{\"name\": \"Ada\", \"born\": 1815}"
        try store.put("Person/ada", original)

        let removed = try store.run("rm", "Person/ada")
        #expect(removed.status == 0, "\(removed)")
        #expect(removed.output == "removed Person/ada\n", "\(removed)")
        expectFailure(try store.run("get", "Person/ada"), status: 2, mentioning: ["Person/ada"])
        #expect(!FileManager.default.fileExists(atPath: store.file("Person", "ada.json")))

        let history = try store.history("Person/ada")
        #expect(history.map { $0["version"] as? Int } == [1, 2])
        #expect(history.map { $0["isDeleted"] as? Bool } == [false, true])
        #expect(history.last?["hash"] == nil)
        let text = try store.run("history", "Person/ada")
        #expect(text.status == 0, "\(text)")
        #expect(row(text.output, startingWith: "2")?.last == "deleted", "\(text)")

        let restored = try store.run("restore", "Person/ada", "--version", "1")
        #expect(restored.status == 0, "\(restored)")
        #expect(restored.output == "Person/ada is now version 3, with the contents of version 1\n", "\(restored)")
        #expect(try store.get("Person/ada") == Data(original.utf8))
        #expect(FileManager.default.contents(atPath: store.file("Person", "ada.json")) == Data(original.utf8))
        let restoredHistory = try store.history("Person/ada")
        #expect(restoredHistory.map { $0["version"] as? Int } == [1, 2, 3])
        #expect(restoredHistory[2]["hash"] as? String == history[0]["hash"] as? String)
    }

    @Test func rmOfAMissingObjectExits2NamingIt() throws {
        let store = try TestStore()
        defer { store.delete() }
        expectFailure(try store.run("rm", "Person/ghost"), status: 2, mentioning: ["Person/ghost"])
        try store.put("Person/ada", "{}")
        try #require(try store.run("rm", "Person/ada").status == 0)
        expectFailure(try store.run("rm", "Person/ada"), status: 2, mentioning: ["Person/ada"])
        #expect(try store.history("Person/ada").count == 2)
    }

    @Test func historyJSONListsVersionsOldestFirstWithSHA256OfTheBytes() throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("Person/ada", "{}")
        try store.put("Person/ada", "[1,2,3]")
        try store.put("Person/ada", "{\"a\":1}")

        let history = try store.history("Person/ada")
        #expect(history.map { $0["version"] as? Int } == [1, 2, 3])
        #expect(history.map { $0["size"] as? Int } == [2, 7, 7])
        #expect(history.map { $0["replica"] as? String } == Array(repeating: store.replica, count: 3))
        // Known answers, as `printf '{}' | sha256sum` prints them.
        #expect(history[0]["hash"] as? String == "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a")
        #expect(history[1]["hash"] as? String == "a615eeaee21de5179de080de8c3052c8da901138406ba71c38c032845f7d54f4")
        let hashes = history.compactMap { $0["hash"] as? String }
        #expect(Set(hashes).count == 3)
        #expect(hashes.allSatisfy { $0.count == 64 && $0.allSatisfy { "0123456789abcdef".contains($0) } })

        let restored = try store.run("restore", "Person/ada", "--version", "1")
        #expect(restored.status == 0, "\(restored)")
        let after = try store.history("Person/ada")
        #expect(after.map { $0["version"] as? Int } == [1, 2, 3, 4])
        #expect(after[3]["hash"] as? String == history[0]["hash"] as? String)
        #expect(after[3]["size"] as? Int == 2)
    }

    @Test func historyKeepsOnlyTheConfiguredNumberOfVersions() throws {
        let store = try TestStore(history: 2)
        defer { store.delete() }
        for n in 1...3 { try store.put("Person/ada", "{\"v\": \(n)}") }
        #expect(try store.history("Person/ada").map { $0["version"] as? Int } == [2, 3])
        expectFailure(try store.run("get", "Person/ada", "--version", "1"), status: 2, mentioning: ["version 1", "Person/ada", "no longer kept"])
        #expect(try store.get("Person/ada", version: 2) == Data("{\"v\": 2}".utf8))
    }

    @Test func getOfADeleteVersionExits2() throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("Person/ada", "{}")
        try #require(try store.run("rm", "Person/ada").status == 0)
        expectFailure(try store.run("get", "Person/ada", "--version", "2"), status: 2, mentioning: ["Person/ada", "delete"])
        #expect(try store.get("Person/ada", version: 1) == Data("{}".utf8))
    }

    @Test func historyOfAnUnknownObjectExits2() throws {
        let store = try TestStore()
        defer { store.delete() }
        expectFailure(try store.run("history", "Person/nobody"), status: 2, mentioning: ["Person/nobody"])
    }

    @Test func restoreOfAMissingOrDeletedVersionExits2AndChangesNothing() throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("Person/ada", "{}")
        try #require(try store.run("rm", "Person/ada").status == 0)
        expectFailure(try store.run("restore", "Person/ada", "--version", "99"), status: 2, mentioning: ["Person/ada", "version 99"])
        expectFailure(try store.run("restore", "Person/ada", "--version", "2"), status: 2, mentioning: ["Person/ada", "version 2"])
        #expect(try store.history("Person/ada").count == 2)
    }

    // MARK: - scan

    /// Puts ada and carl, then, behind the store's back, creates bob, rewrites ada and deletes carl.
    func changeBehindTheStoresBack(_ store: TestStore) throws -> (ada: String, bob: String) {
        try store.put("Person/ada", "{\"name\": \"Ada\"}")
        try store.put("Person/carl", "{\"name\": \"Carl\"}")
        let bob = "{\"name\": \"Bob\", \"from\": \"outside\"}"
        let ada = "{\"name\": \"Ada\", \"edited\": \"outside\"}"
        try writeFile(store.file("Person", "bob.json"), bob)
        try writeFile(store.file("Person", "ada.json"), ada)
        try FileManager.default.removeItem(atPath: store.file("Person", "carl.json"))
        return (ada, bob)
    }

    @Test func scanRecordsFilesCreatedModifiedAndDeletedByOtherPrograms() throws {
        let store = try TestStore()
        defer { store.delete() }
        let (ada, bob) = try changeBehindTheStoresBack(store)

        let scanned = try store.run("scan")
        #expect(scanned.status == 0, "\(scanned)")
        let output = lines(scanned.output)
        #expect(output.contains("created Person/bob (version 1)"), "\(scanned)")
        #expect(output.contains("modified Person/ada (version 2)"), "\(scanned)")
        #expect(output.contains("deleted Person/carl (version 2)"), "\(scanned)")
        #expect(output.last?.hasPrefix("1 created, 1 modified, 1 deleted") == true, "\(scanned)")

        #expect(try store.get("Person/bob") == Data(bob.utf8))
        #expect(try store.get("Person/ada") == Data(ada.utf8))
        expectFailure(try store.run("get", "Person/carl"), status: 2, mentioning: ["Person/carl"])
        #expect(try store.history("Person/carl").last?["isDeleted"] as? Bool == true)

        // Everything is recorded: a second scan finds nothing new.
        let again = try store.run("scan")
        #expect(again.status == 0, "\(again)")
        #expect(lines(again.output).last?.hasPrefix("0 created, 0 modified, 0 deleted") == true, "\(again)")
    }

    @Test func scanJSONReportsCreatedModifiedAndDeletedKinds() throws {
        let store = try TestStore()
        defer { store.delete() }
        _ = try changeBehindTheStoresBack(store)

        let scanned = try store.run("scan", "--json")
        #expect(scanned.status == 0, "\(scanned)")
        let report = try #require(try parseJSON(scanned) as? [String: Any], "\(scanned)")
        let changes = try #require(report["changes"] as? [[String: Any]], "\(scanned)")
        var kinds: [String: String] = [:]
        for change in changes {
            if let id = change["id"] as? String, let kind = change["kind"] as? String { kinds[id] = kind }
            #expect(change["origin"] as? String == "external", "\(scanned)")
        }
        #expect(kinds == ["Person/bob": "created", "Person/ada": "modified", "Person/carl": "deleted"], "\(scanned)")
        #expect(changes.count == 3, "\(scanned)")
    }

    @Test func scanReportsNamesItCannotMapAsIgnoredAndRecordsTheRest() throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("Person/ada", "{}")
        try writeFile(store.file("Person", "bad%ZZ.json"), "{}")
        try writeFile(store.path + "/stray.json", "{}")
        try writeFile(store.file("Person", "%2Eodd.json"), "{\"odd\": true}")

        let scanned = try store.run("scan")
        #expect(scanned.status == 0, "\(scanned)")
        #expect(scanned.output.contains("ignored Person/bad%ZZ.json"), "\(scanned)")
        #expect(scanned.output.contains("ignored stray.json"), "\(scanned)")
        #expect(scanned.output.contains("created Person/.odd (version 1)"), "\(scanned)")
        #expect(try store.get("Person/.odd") == Data("{\"odd\": true}".utf8))
        let objects = try #require(try parseJSON(try store.run("ls", "Person", "--json")) as? [[String: Any]])
        #expect(objects.map { $0["id"] as? String } == ["Person/.odd", "Person/ada"])
    }

    // MARK: - verify

    @Test func verifyExits0OnACleanStore() throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("Person/ada", "{\"v\": 1}")
        try store.put("Person/ada", "{\"v\": 2}")
        try store.put("Pet/rex", "{}")

        let verified = try store.run("verify")
        #expect(verified.status == 0, "\(verified)")
        #expect(lines(verified.output).last?.hasSuffix(", 0 problems") == true, "\(verified)")

        let json = try store.run("verify", "--json")
        #expect(json.status == 0, "\(json)")
        let report = try #require(try parseJSON(json) as? [String: Any], "\(json)")
        #expect((report["problems"] as? [Any])?.isEmpty == true, "\(json)")
        #expect(report["verified"] as? Int == 2, "\(json)")
        #expect(report["verifiedHistory"] as? Int == 3, "\(json)")
    }

    @Test func verifyExits1AndNamesAnObjectWhoseBytesRottedUnderAnUnchangedStamp() throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("Person/ada", "{\"name\": \"Ada\"}")
        try store.put("Person/bob", "{\"name\": \"Bob\"}")
        let file = store.file("Person", "ada.json")
        let before = try stamp(file)
        try flipBitKeepingStamp(file, at: 10)
        try #require(try stamp(file) == before, "the test must leave size, mtime and inode as they were")
        try #require(FileManager.default.contents(atPath: file) != Data("{\"name\": \"Ada\"}".utf8))

        let verified = try store.run("verify")
        #expect(verified.status == 1, "\(verified)")
        #expect(lines(verified.output).contains { $0.hasPrefix("corrupt Person/ada: ") }, "\(verified)")
        #expect(!verified.output.contains("Person/bob"), "\(verified)")

        let json = try store.run("verify", "--json")
        #expect(json.status == 1, "\(json)")
        let report = try #require(try parseJSON(json) as? [String: Any], "\(json)")
        let problems = try #require(report["problems"] as? [[String: Any]], "\(json)")
        #expect(problems.map { $0["id"] as? String } == ["Person/ada"], "\(json)")
        #expect(problems.map { $0["kind"] as? String } == ["corrupt"], "\(json)")
    }

    @Test func verifyExits1AndCallsAnUnrecordedEditEditedUntilAScanRecordsIt() throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("Person/ada", "{\"name\": \"Ada\"}")
        try writeFile(store.file("Person", "ada.json"), "{\"name\": \"Ada\", \"edited\": true}")

        let verified = try store.run("verify")
        #expect(verified.status == 1, "\(verified)")
        #expect(lines(verified.output).contains { $0.hasPrefix("edited Person/ada: ") }, "\(verified)")

        let json = try store.run("verify", "--json")
        #expect(json.status == 1, "\(json)")
        let problems = try #require((try parseJSON(json) as? [String: Any])?["problems"] as? [[String: Any]], "\(json)")
        #expect(problems.map { $0["kind"] as? String } == ["edited"], "\(json)")
        #expect(problems.map { $0["id"] as? String } == ["Person/ada"], "\(json)")

        try #require(try store.run("scan").status == 0)
        let clean = try store.run("verify")
        #expect(clean.status == 0, "\(clean)")
    }

    @Test func verifyExits1ForAFileDeletedBehindTheStoresBack() throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("Person/ada", "{}")
        try FileManager.default.removeItem(atPath: store.file("Person", "ada.json"))

        let json = try store.run("verify", "--json")
        #expect(json.status == 1, "\(json)")
        let problems = try #require((try parseJSON(json) as? [String: Any])?["problems"] as? [[String: Any]], "\(json)")
        #expect(problems.map { $0["kind"] as? String } == ["missing"], "\(json)")
        #expect(problems.map { $0["id"] as? String } == ["Person/ada"], "\(json)")
    }

    @Test func verifyExits1ForAFileAddedBehindTheStoresBackUntilAScanRecordsIt() throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("Person/ada", "{}")
        try writeFile(store.file("Person", "new.json"), "{}")

        let json = try store.run("verify", "--json")
        #expect(json.status == 1, "\(json)")
        let problems = try #require((try parseJSON(json) as? [String: Any])?["problems"] as? [[String: Any]], "\(json)")
        #expect(problems.map { $0["kind"] as? String } == ["untracked"], "\(json)")
        #expect(problems.map { $0["id"] as? String } == ["Person/new"], "\(json)")

        try #require(try store.run("scan").status == 0)
        #expect(try store.run("verify").status == 0)
    }

    // MARK: - status

    @Test func statusJSONReportsObjectsBytesSequenceAndReplica() throws {
        let store = try TestStore()
        defer { store.delete() }
        let empty = try store.status()
        #expect(empty["objects"] as? Int == 0)
        #expect(empty["bytes"] as? Int == 0)
        #expect(empty["sequence"] as? Int == 0)

        try store.put("Person/ada", "{\"v\": 1}")
        try store.put("Person/bob", "{\"name\": \"Bob\"}")
        try store.put("Person/ada", "{\"v\": 22}")
        let status = try store.status()
        #expect(status["objects"] as? Int == 2)
        #expect(status["bytes"] as? Int == 15 + 9)
        #expect(status["sequence"] as? Int == 3)
        #expect(status["replica"] as? String == store.replica)
        #expect(status["collections"] as? Int == 1)

        try #require(try store.run("rm", "Person/bob").status == 0)
        let after = try store.status()
        #expect(after["objects"] as? Int == 1)
        #expect(after["bytes"] as? Int == 9)
        #expect(after["sequence"] as? Int == 4)

        let text = try store.run("status")
        #expect(text.status == 0, "\(text)")
        #expect(row(text.output, startingWith: "replica") == ["replica", store.replica], "\(text)")
        #expect(row(text.output, startingWith: "objects") == ["objects", "1"], "\(text)")
    }

    // MARK: - usage

    @Test func rootHelpExits0AndListsEverySubcommand() throws {
        let help = try runArchiveSync(["--help"])
        #expect(help.status == 0, "\(help)")
        #expect(help.stderr.isEmpty, "\(help)")
        #expect(help.output.contains("archive-sync"), "\(help)")
        for subcommand in Self.subcommands {
            #expect(help.output.contains("  \(subcommand) "), "root help should list \(subcommand): \(help)")
        }
    }

    @Test(arguments: subcommands)
    func subcommandHelpExits0AndNamesTheCommand(subcommand: String) throws {
        let help = try runArchiveSync([subcommand, "--help"])
        #expect(help.status == 0, "\(help)")
        #expect(help.stderr.isEmpty, "\(help)")
        #expect(help.output.contains("USAGE: archive-sync \(subcommand)"), "\(help)")
    }

    @Test func rootVersionFlagPrintsTheVersion() throws {
        let result = try runArchiveSync(["--version"])
        #expect(result.status == 0, "\(result)")
        #expect(result.output == "0.1.0\n", "\(result)")
    }

    @Test func anUnknownOptionExits2NamingIt() throws {
        let store = try TestStore()
        defer { store.delete() }
        expectFailure(try store.run("ls", "--bogus"), status: 2, mentioning: ["--bogus"])
        expectFailure(try store.run("put", "Person/ada", "--codec", "yaml", stdin: Data("{}".utf8)), status: 2, mentioning: ["yaml"])
        #expect(try store.status()["objects"] as? Int == 0)
    }

    @Test func anUnknownSubcommandOrMissingArgumentExits2() throws {
        let store = try TestStore()
        defer { store.delete() }
        expectFailure(try runArchiveSync(["frobnicate", store.path]), status: 2, mentioning: ["frobnicate"])
        expectFailure(try runArchiveSync(["get", store.path]), status: 2, mentioning: ["<id>"])
        expectFailure(try runArchiveSync(["restore", store.path, "Person/ada"]), status: 2, mentioning: ["--version"])
    }

    @Test(arguments: ["0", "-1"])
    func versionBelowOneExits2(version: String) throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("Person/ada", "{}")
        expectFailure(try store.run("get", "Person/ada", "--version=\(version)"), status: 2, mentioning: ["--version must be at least 1"])
        expectFailure(
            try store.run("restore", "Person/ada", "--version=\(version)"), status: 2, mentioning: ["--version must be at least 1"])
        #expect(try store.history("Person/ada").count == 1)
    }

    /// The documented error form is one `archive-sync: <sentence>` line, for usage errors too.
    @Test func usageErrorsAreOneLineOnStderr() throws {
        let store = try TestStore()
        defer { store.delete() }
        let result = try store.run("get", "Person/ada", "--version", "0")
        #expect(result.status == 2, "\(result)")
        #expect(lines(result.errorOutput).count == 1, "\(result)")
        #expect(!result.errorOutput.contains("Error: "), "\(result)")
    }
}
