import Foundation
import TestSupport
import Testing

@testable import ArchiveStore

#if canImport(Glibc)
    import Glibc
#endif

struct LoadTests {
    @Test func wrongTypeThrowsUndecodableNamingTheObject() throws {
        try withStore { store, _ throws in
            try store.save(Person(name: "Ada", age: 36), forKey: "ada")
            let error = archiveError { try store.load(Invoice.self, forKey: "ada", in: "Person") }
            guard case .undecodable(let id, let type, let reason)? = error else {
                Issue.record("expected undecodable, got \(String(describing: error))")
                return
            }
            #expect(id == (try ObjectID(collection: "Person", key: "ada")))
            #expect(type.hasSuffix("Invoice"))
            #expect(!reason.isEmpty)
            #expect(error?.description.contains("Person/ada") == true)
            // The object itself is unharmed.
            #expect(try store.load(Person.self, forKey: "ada") == Person(name: "Ada", age: 36))
        }
    }

    @Test(arguments: [Data("garbage \u{0}\u{1} not json".utf8), Data(), Data([0xFF, 0xFE, 0x00, 0x7B]), Data(#"{"name": "trunc"#.utf8)])
    func corruptFileThrowsUndecodableAndOthersStillLoad(garbage: Data) throws {
        try withStore { store, path throws in
            try store.save(Person(name: "X", age: 1), forKey: "x")
            try store.save(Person(name: "Y", age: 2), forKey: "y")
            try store.save(Person(name: "Z", age: 3), forKey: "z")
            try overwrite(path + "/Person/x.json", with: garbage)

            let error = archiveError { try store.load(Person.self, forKey: "x") }
            guard case .undecodable(let id, _, _)? = error else {
                Issue.record("expected undecodable, got \(String(describing: error))")
                return
            }
            #expect(id.key == "x")
            #expect(try store.load(Person.self, forKey: "y") == Person(name: "Y", age: 2))
            #expect(try store.load(Person.self, forKey: "z") == Person(name: "Z", age: 3))
        }
    }

    @Test func corruptPropertyListThrowsUndecodable() throws {
        try withStore(.init(codec: .propertyList)) { store, path throws in
            try store.save(Person(name: "X", age: 1), forKey: "x")
            try store.save(Person(name: "Y", age: 2), forKey: "y")
            try overwrite(path + "/Person/x.plist", with: Data("bplist00 but not really".utf8))
            let error = archiveError { try store.load(Person.self, forKey: "x") }
            guard case .undecodable? = error else {
                Issue.record("expected undecodable, got \(String(describing: error))")
                return
            }
            #expect(try store.load(Person.self, forKey: "y") == Person(name: "Y", age: 2))
        }
    }

    @Test func fileWithUnknownExtensionThrowsUnknownCodec() throws {
        try withStore { store, path throws in
            try store.save(Person(name: "Y", age: 2), forKey: "y")
            try overwrite(path + "/Person/x.xml", with: Data("<person><name>X</name></person>".utf8))
            let report = try store.scan()
            #expect(report.created == 1)
            #expect(try store.keys(of: Person.self) == ["x", "y"])

            let error = archiveError { try store.load(Person.self, forKey: "x") }
            guard case .unknownCodec(let id, let ext)? = error else {
                Issue.record("expected unknownCodec, got \(String(describing: error))")
                return
            }
            #expect(id.key == "x")
            #expect(ext == "xml")
            #expect(try store.load(Person.self, forKey: "y") == Person(name: "Y", age: 2))
        }
    }

    @Test func missingKeyLoadsAsNil() throws {
        try withStore { store, _ throws in
            // No collection directory yet.
            #expect(try store.load(Person.self, forKey: "nobody") == nil)
            try store.save(Person(name: "A", age: 1), forKey: "a")
            // The directory exists, the key does not.
            #expect(try store.load(Person.self, forKey: "nobody") == nil)
            // A removed key is absent too.
            try store.remove(Person.self, forKey: "a")
            #expect(try store.load(Person.self, forKey: "a") == nil)
        }
    }

    @Test func symlinkToAFileOutsideTheStoreIsNotFollowed() throws {
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            let store = try ArchiveStore(directory: path)
            try store.save(Person(name: "A", age: 1), forKey: "a")
            let secret = #"{"age":99,"name":"outside secret"}"#
            try overwrite(dir + "/secret.json", with: Data(secret.utf8))
            try FileManager.default.createSymbolicLink(atPath: path + "/Person/evil.json", withDestinationPath: dir + "/secret.json")

            do {
                let loaded = try store.load(Person.self, forKey: "evil")
                Issue.record("load followed the symlink and returned \(String(describing: loaded))")
            } catch let error as ArchiveError {
                #expect(!error.description.contains("outside secret"))
            }
            #expect(throws: (any Error).self) { try store.data(for: ObjectID(collection: "Person", key: "evil")) }

            let report = try store.scan()
            #expect(report.ignored.contains { $0.path == "Person/evil.json" })
            #expect(report.changes.isEmpty)
            #expect(try store.keys(of: Person.self) == ["a"])
            // The link and its target are left alone.
            #expect(entryExists(path + "/Person/evil.json"))
            #expect(try contents(of: dir + "/secret.json") == Data(secret.utf8))
        }
    }

    @Test func saveDoesNotWriteThroughASymlinkAtTheObjectsName() throws {
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            let store = try ArchiveStore(directory: path)
            try store.save(Person(name: "A", age: 1), forKey: "a")
            let outside = Data("do not touch".utf8)
            try overwrite(dir + "/target", with: outside)
            try FileManager.default.createSymbolicLink(atPath: path + "/Person/evil.json", withDestinationPath: dir + "/target")
            try store.save(Person(name: "E", age: 2), forKey: "evil")
            // The rename replaced the link itself; the file it pointed to is unchanged.
            #expect(try contents(of: dir + "/target") == outside)
            #expect(try store.load(Person.self, forKey: "evil") == Person(name: "E", age: 2))
        }
    }

    @Test func symlinkedCollectionDirectoryIsNotFollowed() throws {
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            let store = try ArchiveStore(directory: path)
            try FileManager.default.createDirectory(atPath: dir + "/elsewhere", withIntermediateDirectories: true)
            try overwrite(dir + "/elsewhere/p.json", with: Data(#"{"age":5,"name":"outside"}"#.utf8))
            try FileManager.default.createSymbolicLink(atPath: path + "/Person", withDestinationPath: dir + "/elsewhere")

            #expect(throws: (any Error).self) { try store.load(Person.self, forKey: "p") }
            #expect(throws: (any Error).self) { try store.save(Person(name: "in", age: 1), forKey: "q") }
            #expect(!FileManager.default.fileExists(atPath: dir + "/elsewhere/q.json"))
            let report = try store.scan()
            #expect(report.ignored.contains { $0.path == "Person" })
            #expect(report.changes.isEmpty)
        }
    }

    @Test func putRefusesMalformedInputAndStoresWellFormedBytesAsGiven() throws {
        try withStore { store, path throws in
            let id = try ObjectID(collection: "Raw", key: "r")
            let error = archiveError { try store.put(Data("{not json".utf8), as: id) }
            guard case .invalidInput? = error else {
                Issue.record("expected invalidInput, got \(String(describing: error))")
                return
            }
            #expect(filesInStore(path).isEmpty)
            let bytes = Data(#"{ "b": 1,   "a": [true] }"#.utf8)
            #expect(try store.put(bytes, as: id) == 1)
            #expect(try store.data(for: id) == bytes)
            #expect(try contents(of: path + "/Raw/r.json") == bytes)
        }
    }
}
