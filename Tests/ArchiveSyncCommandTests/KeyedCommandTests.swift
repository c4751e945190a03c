import ArchiveStore
import Foundation
import TestSupport
import Testing

/// The NSKeyedArchiver fixtures (Tests/KeyedArchiveTests/Fixtures).
private let keyedFixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("KeyedArchiveTests/Fixtures").path

/// Copies the named fixtures (or all, with their hostile/ directory) into a fresh directory of the store's temp directory.
private func copyFixtures(_ store: TestStore, _ names: [String]? = nil, as renamed: [String: String] = [:]) throws -> String {
    let directory = store.directory + "/archives-\(UUID().uuidString.prefix(8))"
    let fileManager = FileManager.default
    if let names {
        try fileManager.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for name in names {
            try fileManager.copyItem(
                atPath: keyedFixtures + "/" + name, toPath: directory + "/" + (renamed[name] ?? URL(fileURLWithPath: name).lastPathComponent))
        }
    } else {
        try fileManager.copyItem(atPath: keyedFixtures, toPath: directory)
    }
    return directory
}

private func object(_ store: TestStore, _ id: String) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: store.get(id)) as? [String: Any])
}

@Suite("archive-sync import and dump, end to end")
struct KeyedCommandTests {
    @Test("import of the fixtures directory: one object per archive, son file folded in, hostile files reported, exit 1")
    func importFixtures() throws {
        let store = try TestStore()
        defer { store.delete() }
        let archives = try copyFixtures(store)
        let result = try runArchiveSync(["import", archives, "--into", store.path])
        #expect(result.status == 1, "\(result)")
        for hostile in ["truncated", "not_a_plist", "no_top", "uid_out_of_range"] {
            #expect(result.errorOutput.contains("skipped \(archives)/hostile/\(hostile).archiver: "), "\(result)")
        }
        #expect(result.errorOutput.contains("points past the end of $objects"), "\(result)")
        #expect(result.output.contains("imported 6 archives as 5 objects (5 new, 0 updated, 0 unchanged); skipped 4 files"), "\(result)")
        let person = try object(store, "PersonModel/person1")
        #expect(person["str"] as? String == "str")
        #expect(person["w_int"] as? Int == 4)
        let man = try #require(person["manModel"] as? [String: Any], "the son file was not folded in: \(person)")
        #expect(man["name"] as? String == "wzx" && man["age"] as? Int == 23)
        #expect(try object(store, "Person/PersonCache")["name"] as? String == "小明")
        #expect(try JSONSerialization.jsonObject(with: store.get("NSArray/MyArray")) as? [String] == ["阳光", "萌新", "正太"])
        #expect(try object(store, "MalePerson/MalePerson")["facialHair"] as? String == "beard")
        let listed = try store.run("ls")
        #expect(!listed.output.contains("ManModel"), "the son file must not be an object of its own: \(listed)")
    }

    @Test("imported objects load straight into Codable models through the library")
    func loadsAsCodable() throws {
        struct MalePerson: Codable, Equatable {
            var name: String
            var age: Int
            var born: Date
            var facialHair: String
        }
        struct ManModel: Codable, Equatable {
            var name: String
            var age: Int
        }
        struct PersonModel: Codable {
            var muData: Data
            var w_float: Float
            var manModel: ManModel
        }
        let store = try TestStore()
        defer { store.delete() }
        let archives = try copyFixtures(
            store, ["MalePerson.archiver", "WZX_PersonModel_person1.archiver", "WZX_PersonModel_person1_ManModel_manModel.archiver"])
        #expect(try runArchiveSync(["import", archives, "--into", store.path]).status == 0)
        let library = try ArchiveStore(directory: store.path, options: .init(create: false))
        let male = try #require(try library.load(MalePerson.self, forKey: "MalePerson"))
        #expect(male == MalePerson(name: "Jason", age: 18, born: Date(timeIntervalSince1970: 725_846_400), facialHair: "beard"))
        let person = try #require(try library.load(PersonModel.self, forKey: "person1"))
        #expect(person.manModel == ManModel(name: "wzx", age: 23))
        #expect(person.muData == Data("str".utf8) && person.w_float == 1.1)
    }

    @Test("importing the same archives again writes nothing: all unchanged, no new versions")
    func idempotent() throws {
        let store = try TestStore()
        defer { store.delete() }
        let archives = try copyFixtures(
            store, ["WZX_PersonModel_person1.archiver", "WZX_PersonModel_person1_ManModel_manModel.archiver", "MalePerson.archiver"])
        let first = try runArchiveSync(["import", archives, "--into", store.path])
        #expect(first.status == 0, "\(first)")
        let before = try store.get("PersonModel/person1")
        let second = try runArchiveSync(["import", archives, "--into", store.path])
        #expect(second.status == 0, "\(second)")
        #expect(second.output.contains("(0 new, 0 updated, 2 unchanged)"), "\(second)")
        #expect(try store.history("PersonModel/person1").count == 1)
        #expect(try store.history("MalePerson/MalePerson").count == 1)
        #expect(try store.get("PersonModel/person1") == before)
    }

    @Test("a changed archive becomes the object's next version")
    func update() throws {
        let store = try TestStore()
        defer { store.delete() }
        let one = try copyFixtures(store, ["PersonCache.archiver"], as: ["PersonCache.archiver": "thing.archiver"])
        let two = try copyFixtures(store, ["HDFArchiveModel.archiver"], as: ["HDFArchiveModel.archiver": "thing.archiver"])
        #expect(try runArchiveSync(["import", one, "--into", store.path, "--collection", "Thing"]).status == 0)
        let result = try runArchiveSync(["import", two + "/thing.archiver", "--into", store.path, "--collection", "Thing"])
        #expect(result.status == 0, "\(result)")
        #expect(result.output.contains("updated  Thing/thing"), "\(result)")
        #expect(try store.history("Thing/thing").count == 2)
        #expect(try object(store, "Thing/thing")["totalCount"] as? Int == 123)
    }

    @Test("an unreadable archive never replaces the stored object")
    func badInputKeepsData() throws {
        let store = try TestStore()
        defer { store.delete() }
        let good = try copyFixtures(store, ["PersonCache.archiver"])
        #expect(try runArchiveSync(["import", good, "--into", store.path]).status == 0)
        let before = try store.get("Person/PersonCache")
        let bad = try copyFixtures(store, ["hostile/truncated.archiver"], as: ["hostile/truncated.archiver": "PersonCache.archiver"])
        let result = try runArchiveSync(["import", bad, "--into", store.path, "--collection", "Person"])
        #expect(result.status == 1, "\(result)")
        #expect(result.errorOutput.contains("skipped \(bad)/PersonCache.archiver: not a readable property list"), "\(result)")
        #expect(try store.get("Person/PersonCache") == before)
        #expect(try store.history("Person/PersonCache").count == 1)
    }

    @Test("--dry-run reads and reports everything and writes nothing")
    func dryRun() throws {
        let store = try TestStore()
        defer { store.delete() }
        let archives = try copyFixtures(store, ["MalePerson.archiver", "MyArray.archiver"])
        let result = try runArchiveSync(["import", archives, "--into", store.path, "--dry-run"])
        #expect(result.status == 0, "\(result)")
        #expect(result.output.contains("would create  MalePerson/MalePerson"), "\(result)")
        #expect(result.output.contains("dry run, nothing written"), "\(result)")
        let history = try store.run("history", "MalePerson/MalePerson")
        #expect(history.status != 0, "the dry run wrote the object: \(history)")
    }

    @Test("--json reports objects and skipped files; a missing source is skipped by name")
    func json() throws {
        let store = try TestStore()
        defer { store.delete() }
        let archives = try copyFixtures(store, ["MyArray.archiver", "hostile/no_top.archiver"])
        let result = try runArchiveSync(["import", archives, archives + "/absent.archiver", "--into", store.path, "--json"])
        #expect(result.status == 1, "\(result)")
        let report = try #require(try parseJSON(result) as? [String: Any], "\(result)")
        let objects = try #require(report["objects"] as? [[String: Any]])
        #expect(objects.map { $0["id"] as? String } == ["NSArray/MyArray"])
        #expect(objects.first?["status"] as? String == "created")
        let skipped = try #require(report["skipped"] as? [[String: Any]])
        #expect(Set(skipped.compactMap { $0["file"] as? String }) == [archives + "/absent.archiver", archives + "/no_top.archiver"])
        #expect(skipped.contains { ($0["reason"] as? String)?.contains("no $top") == true })
    }

    @Test("a son file whose parent cannot be read is skipped, not imported on its own")
    func orphanSon() throws {
        let store = try TestStore()
        defer { store.delete() }
        let archives = try copyFixtures(
            store, ["WZX_PersonModel_person1_ManModel_manModel.archiver", "hostile/truncated.archiver"],
            as: ["hostile/truncated.archiver": "WZX_PersonModel_person1.archiver"])
        let result = try runArchiveSync(["import", archives, "--into", store.path])
        #expect(result.status == 1, "\(result)")
        #expect(result.errorOutput.contains("WZX_PersonModel_person1_ManModel_manModel.archiver: its parent archive"), "\(result)")
        #expect(result.output.contains("as 0 objects"), "\(result)")
    }

    @Test("an archive holding a value JSON cannot hold (NaN) is skipped by name; the others are imported")
    func notRepresentableInJSON() throws {
        let store = try TestStore()
        defer { store.delete() }
        let archives = try copyFixtures(store, ["MyArray.archiver"])
        let nan = try NSKeyedArchiver.archivedData(
            withRootObject: NSDictionary(dictionary: ["x": NSNumber(value: Double.nan)]), requiringSecureCoding: false)
        try nan.write(to: URL(fileURLWithPath: archives + "/nan.archiver"))
        let result = try runArchiveSync(["import", archives, "--into", store.path])
        #expect(result.status == 1, "\(result)")
        #expect(result.errorOutput.contains("skipped \(archives)/nan.archiver: it cannot be saved as JSON"), "\(result)")
        #expect(result.output.contains("created  NSArray/MyArray"), "\(result)")
        #expect(try store.history("NSArray/MyArray").count == 1)
    }

    @Test("in a directory, a symlink to an archive is read; a dangling one is reported; a directory named .plist is walked")
    func symlinks() throws {
        let store = try TestStore()
        defer { store.delete() }
        let archives = try copyFixtures(store, ["MyArray.archiver"])
        let fileManager = FileManager.default
        try fileManager.createSymbolicLink(atPath: archives + "/Male.archiver", withDestinationPath: keyedFixtures + "/MalePerson.archiver")
        try fileManager.createSymbolicLink(atPath: archives + "/gone.archiver", withDestinationPath: store.directory + "/nothing-here")
        try fileManager.createDirectory(atPath: archives + "/inner.plist", withIntermediateDirectories: false)
        try fileManager.copyItem(atPath: keyedFixtures + "/HDFArchiveModel.archiver", toPath: archives + "/inner.plist/HDF.archiver")
        let result = try runArchiveSync(["import", archives, "--into", store.path])
        #expect(result.status == 1, "\(result)")
        #expect(result.output.contains("created  MalePerson/Male "), "\(result)")
        #expect(result.output.contains("created  HDFArchiveModel/HDF "), "\(result)")
        #expect(result.errorOutput.contains("skipped \(archives)/gone.archiver: a symbolic link"), "\(result)")
        #expect(lines(result.errorOutput).count == 1, "\(result)")
    }

    @Test("dump prints the class chain and fields; --json carries $classes")
    func dump() throws {
        let text = try runArchiveSync(["dump", keyedFixtures + "/MalePerson.archiver"])
        #expect(text.status == 0, "\(text)")
        #expect(
            lines(text.output) == [
                "MalePerson : Person : NSObject #6", "  age: 18", "  born: 1993-01-01T00:00:00Z", "  facialHair: \"beard\"", "  name: \"Jason\"",
            ])
        let json = try runArchiveSync(["dump", keyedFixtures + "/PersonCache.archiver", "--json"])
        #expect(json.status == 0, "\(json)")
        let root = try #require(try parseJSON(json) as? [String: Any])
        #expect(root["$classes"] as? [String] == ["Person", "NSObject"])
        let car = try #require(root["car"] as? [String: Any])
        #expect((car["color"] as? [String: Any])?["$classes"] as? [String] == ["UIColor", "NSObject"])
    }

    @Test("dump of a hostile archive fails with exit 2 and names the file and the reason")
    func dumpHostile() throws {
        let file = keyedFixtures + "/hostile/uid_out_of_range.archiver"
        let result = try runArchiveSync(["dump", file])
        expectFailure(result, status: 2, mentioning: [file, "9999"])
        expectFailure(try runArchiveSync(["dump", keyedFixtures + "/absent.archiver"]), status: 2, mentioning: ["cannot read", "absent.archiver"])
    }
}
