import ArchiveStore
import Foundation
import TestSupport
import Testing

/// `scan(paths:)`, the watcher's targeted scan, against `scan()`, without a watcher.
@Suite("Targeted scan") struct ScanPathsTests {
    /// One version's record, without what differs between two stores (replica, date, vector).
    private static func summary(_ version: ObjectVersion) -> String {
        "v\(version.version) \(version.hash.map(String.init(describing:)) ?? "-") \(version.size) \(version.file) \(version.isDeleted)"
    }

    private static func summary(_ change: StoreChange) -> String {
        "\(change.kind) \(change.id) v\(change.version) \(change.origin)"
    }

    @Test func aFilePathIsRecordedAsAFullScanRecordsIt() throws {
        try withTemporaryDirectory { directory in
            let targeted = try ArchiveStore(directory: directory + "/targeted")
            let full = try ArchiveStore(directory: directory + "/full")
            let a = try json(Person(name: "A", age: 1))
            let b = try json(Person(name: "B", age: 2))
            for store in [targeted, full] {
                try makeDirectory(store.path + "/Person")
                try writeFile(store.path + "/Person/a.json", a)
                try writeFile(store.path + "/Person/b.json", b)
            }
            let id = try ObjectID(parsing: "Person/a")

            let targetedReport = try targeted.scan(paths: ["Person/a.json"])
            let fullReport = try full.scan()
            #expect(targetedReport.changes.map(Self.summary) == ["created Person/a v1 external"])
            #expect(targetedReport.changes.map(Self.summary) == fullReport.changes.filter { $0.id == id }.map(Self.summary))
            #expect(try targeted.history(id).map(Self.summary) == full.history(id).map(Self.summary))
            #expect(try targeted.data(for: id) == a)
            // Only the path asked for: b is not recorded until its path (or its directory) is scanned.
            #expect(try targeted.objects(in: "Person").map(\.id) == [id])
            let b2 = try targeted.scan(paths: ["Person"])
            #expect(b2.changes.map(Self.summary) == ["created Person/b v1 external"])
            #expect(try targeted.objects(in: "Person").map(\.id.key) == ["a", "b"])

            // Scanning again finds nothing, either way.
            #expect(try targeted.scan(paths: ["Person/a.json", "Person/b.json", "Person"]).changes.isEmpty)
            #expect(try full.scan().changes.isEmpty)
        }
    }

    @Test func aMissingFileWithARowIsRecordedDeleted() throws {
        try withTemporaryDirectory { directory in
            let store = try ArchiveStore(directory: directory + "/store")
            try store.save(Person(name: "A", age: 1), forKey: "a")
            try store.save(Person(name: "B", age: 1), forKey: "b")
            try removeFile(store.path + "/Person/a.json")

            let report = try store.scan(paths: ["Person/a.json"])
            #expect(report.changes.map(Self.summary) == ["deleted Person/a v2 external"])
            #expect(try store.history(ObjectID(parsing: "Person/a")).map(\.isDeleted) == [false, true])
            #expect(try store.keys(of: Person.self) == ["b"])
            // A missing file that no row knows is nothing.
            #expect(try store.scan(paths: ["Person/never.json"]).changes.isEmpty)
        }
    }

    @Test func aSecondFileForAKeyIsIgnored() throws {
        try withTemporaryDirectory { directory in
            let store = try ArchiveStore(directory: directory + "/store")
            try store.save(Person(name: "A", age: 1), forKey: "a")
            try writeFile(store.path + "/Person/a.plist", ArchiveCodec.propertyList.encode(Person(name: "A", age: 2)))

            let report = try store.scan(paths: ["Person/a.plist"])
            #expect(report.changes.isEmpty)
            #expect(report.ignored.map(\.path) == ["Person/a.plist"])
            #expect(report.ignored.first?.reason.contains("Person/a.json") == true)
            let id = try ObjectID(parsing: "Person/a")
            #expect(try store.history(id).map(\.file) == ["a.json"])
            #expect(try store.load(Person.self, forKey: "a") == Person(name: "A", age: 1))
            // A full scan agrees.
            let full = try store.scan()
            #expect(full.changes.isEmpty)
            #expect(full.ignored.map(\.path) == ["Person/a.plist"])
        }
    }

    @Test func reservedPathsAreSkipped() throws {
        try withTemporaryDirectory { directory in
            let store = try ArchiveStore(directory: directory + "/store")
            try makeDirectory(store.path + "/Person")
            try writeFile(store.path + "/Person/.hidden.json", "{}")
            try writeFile(store.path + "/Person/.archive-sync-tmp.1.2.3", "{}")
            try writeFile(store.path + "/.archive-sync/x.json", "{}")
            let report = try store.scan(paths: ["Person/.hidden.json", "Person/.archive-sync-tmp.1.2.3", ".archive-sync/x.json", ".archive-sync"])
            #expect(report.changes.isEmpty)
            #expect(try store.status().objects == 0)
        }
    }

    @Test func aRemovedFileLeavesItsKeyToASiblingAsAFullScanDoes() throws {
        try withTemporaryDirectory { directory in
            let targeted = try ArchiveStore(directory: directory + "/targeted")
            let full = try ArchiveStore(directory: directory + "/full")
            let plist = try PropertyListEncoder().encode(Person(name: "A", age: 2))
            for store in [targeted, full] {
                try store.save(Person(name: "A", age: 1), forKey: "a")
                try writeFile(store.path + "/Person/a.plist", plist)  // ignored while a.json holds the key
                try removeFile(store.path + "/Person/a.json")
            }
            let id = try ObjectID(parsing: "Person/a")
            let targetedReport = try targeted.scan(paths: ["Person/a.json"])
            let fullReport = try full.scan()
            #expect(targetedReport.changes.map(Self.summary) == fullReport.changes.map(Self.summary))
            #expect(try targeted.history(id).map(Self.summary) == full.history(id).map(Self.summary))
            #expect(try targeted.data(for: id) == plist)
        }
    }

    @Test func aCollectionReplacedByASymlinkLosesItsObjects() throws {
        try withTemporaryDirectory { directory in
            let store = try ArchiveStore(directory: directory + "/store")
            try store.save(Person(name: "A", age: 1), forKey: "a")
            try makeDirectory(directory + "/elsewhere")
            try FileManager.default.removeItem(atPath: store.path + "/Person")
            try FileManager.default.createSymbolicLink(atPath: store.path + "/Person", withDestinationPath: directory + "/elsewhere")

            let report = try store.scan(paths: ["Person"])
            #expect(report.changes.map(Self.summary) == ["deleted Person/a v2 external"])
            #expect(report.ignored.map(\.path) == ["Person"])
            #expect(try store.keys(of: Person.self).isEmpty)
        }
    }
}
