import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// End-to-end tests of the commands that list, remove, restore, inspect and check a store's
// objects: each runs the built `archive-sync` binary on a store of its own (TestStore.swift).

@Suite("archive-sync ls, rm, restore, history, scan, verify and status, end to end")
struct InspectionCommandTests {
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
}
