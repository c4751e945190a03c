import Foundation
import Testing

@testable import ArchiveStore

#if canImport(Glibc)
    import Glibc
#endif

/// Scan and verify agree on every entry of a store's directory: an object (recorded, or
/// untracked until a scan records it), or an entry left alone, reported with its reason.
struct IgnoredEntryTests {
    /// Creates a file whose name is the given bytes (which need not be UTF-8) in `directory`.
    private func createFile(named name: [UInt8], in directory: String, contents: String = "{}") throws {
        let parent = open(directory, O_RDONLY | O_DIRECTORY)
        try #require(parent >= 0)
        defer { close(parent) }
        let file = (name + [0]).withUnsafeBufferPointer { name in
            name.withMemoryRebound(to: CChar.self) { openat(parent, $0.baseAddress!, O_WRONLY | O_CREAT | O_EXCL, 0o644) }
        }
        try #require(file >= 0, "creating the file failed: errno \(errno)")
        defer { close(file) }
        _ = contents.withCString { write(file, $0, strlen($0)) }
    }

    @Test func aFileWhoseNameIsNotUTF8IsReportedByScanAndVerifyAndNeverRecorded() throws {
        try withStore { store, path throws in
            try store.save(Person(name: "A", age: 1), forKey: "a")
            try createFile(named: Array("bad".utf8) + [0xFF] + Array("name.json".utf8), in: path + "/Person")
            try createFile(named: Array("dir".utf8) + [0xFE], in: path)

            let scan = try store.scan()
            #expect(scan.changes.isEmpty)
            let expected = ["Person/bad\\xffname.json", "dir\\xfe"]
            #expect(Set(scan.ignored.map(\.path)) == Set(expected), "\(scan.ignored)")
            #expect(scan.ignored.allSatisfy { $0.reason.contains("not valid UTF-8") }, "\(scan.ignored)")
            #expect(scan.counts.ignored == 2)
            #expect(try store.keys(of: Person.self) == ["a"])

            let verify = try store.verify()
            #expect(verify.isClean, "\(verify.problems)")
            #expect(verify.ignored == scan.ignored)
            // Reported again: a directory holding an ignored entry is listed every time.
            #expect(try store.scan().ignored == scan.ignored)
        }
    }

    @Test func verifyReportsAWholeCollectionTheManifestDoesNotKnow() throws {
        try withStore { store, path throws in
            try store.save(Person(name: "A", age: 1), forKey: "a")
            try FileManager.default.createDirectory(atPath: path + "/New", withIntermediateDirectories: false)
            try overwrite(path + "/New/x.json", with: Data("{}".utf8))

            let before = try store.verify()
            #expect(before.problems.map(\.kind) == [.untracked], "\(before.problems)")
            #expect(before.problems.map(\.id) == ["New/x"])
            #expect(try store.scan().created == 1)
            let after = try store.verify()
            #expect(after.isClean, "\(after.problems)")
        }
    }

    @Test func aFileBesideTheOneHoldingItsKeyIsIgnoredByBothAndNeverRead() throws {
        try withStore { store, path throws in
            let id = try ObjectID(collection: "P", key: "pl")
            let plist = Data(#"<?xml version="1.0" encoding="UTF-8"?><plist version="1.0"><dict/></plist>"#.utf8)
            try store.put(plist, as: id, codec: .propertyList)
            try overwrite(path + "/P/pl.json", with: Data(#"{"not":"the object"}"#.utf8))

            let scan = try store.scan()
            #expect(scan.changes.isEmpty)
            #expect(scan.ignored.map(\.path) == ["P/pl.json"])
            let verify = try store.verify()
            #expect(verify.isClean, "verify and scan would loop: \(verify.problems)")
            #expect(verify.ignored == scan.ignored)
            #expect(try store.data(for: id) == plist)
        }
    }

    @Test func aReadReturnsOnlyTheFileTheManifestNames() throws {
        try withStore(.init(codec: .propertyList)) { store, path throws in
            try store.put(Data(#"{"name":"A","age":1}"#.utf8), as: ObjectID(collection: "Person", key: "a"), codec: .json)
            // The collection's codec is plist: a stray `a.plist` is where a read used to look first.
            try store.save(Person(name: "B", age: 2), forKey: "b")
            try FileManager.default.copyItem(atPath: path + "/Person/b.plist", toPath: path + "/Person/a.plist")
            try FileManager.default.copyItem(atPath: path + "/Person/b.plist", toPath: path + "/Person/new.plist")

            #expect(try store.load(Person.self, forKey: "a") == Person(name: "A", age: 1))
            #expect(try store.data(for: ObjectID(collection: "Person", key: "a")) == Data(#"{"name":"A","age":1}"#.utf8))
            // A file no scan has recorded is not an object yet.
            #expect(try store.load(Person.self, forKey: "new") == nil)
            _ = try store.scan()
            #expect(try store.load(Person.self, forKey: "new") == Person(name: "B", age: 2))
        }
    }

    @Test func dotFilesAndTempFilesAreReportedAndVerifyRemovesNone() throws {
        try withStore { store, path throws in
            try store.save(Person(name: "A", age: 1), forKey: "a")
            try overwrite(path + "/Person/.hidden", with: Data())
            let live = ".archive-sync-tmp.\(getpid()).\(ProcessIdentity.current.startTime).7"
            let stale = ".archive-sync-tmp.\(deadProcessID()).1.7"
            try overwrite(path + "/Person/" + live, with: Data())
            try overwrite(path + "/Person/" + stale, with: Data())

            let verify = try store.verify()
            #expect(verify.isClean)
            #expect(Set(verify.ignored.map(\.path)) == ["Person/.hidden", "Person/" + live, "Person/" + stale], "\(verify.ignored)")
            #expect(entryExists(path + "/Person/" + stale), "verify changes nothing")

            let scan = try store.scan()
            #expect(scan.removedTempFiles == 1)
            #expect(Set(scan.ignored.map(\.path)) == ["Person/.hidden", "Person/" + live], "\(scan.ignored)")
        }
    }
}
