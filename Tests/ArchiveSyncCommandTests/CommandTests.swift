import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// End-to-end tests of init, put, get and the command line's usage: each runs the built
// `archive-sync` binary on a store of its own (TestStore.swift).

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
