import Foundation
import TestSupport
import Testing

@testable import ArchiveStore

#if canImport(Glibc)
    import Glibc
#endif

/// A store keeps each collection's directory open from one save to the next
/// (``CollectionDirectories``): a save must still land where the collection's name leads now,
/// whatever another program did to the directory in between.
@Suite struct CollectionDirectoryTests {
    @Test func aSaveKeepsItsCollectionsDirectoryOpenForTheNext() throws {
        try withStore { store, _ in
            try store.save(Person(name: "Ada", age: 36), forKey: "ada")
            let kept = try #require(store.collectionDirectories.current("Person", in: store.root))
            try store.save(Person(name: "Bob", age: 40), forKey: "bob")
            #expect(store.collectionDirectories.current("Person", in: store.root) === kept)
        }
    }

    @Test func aStoreOfManyCollectionsKeepsOnlySoManyDirectoriesOpen() throws {
        try withStore { store, _ in
            let collections = (0..<(CollectionDirectories.limit * 3)).map { "C\($0)" }
            for collection in collections { try store.save(Person(name: collection, age: 1), forKey: "k", in: collection) }
            #expect(store.collectionDirectories.count <= CollectionDirectories.limit)
            #expect(store.collectionDirectories.count > 0)
        }
    }

    @Test func aSaveAfterItsDirectoryWasRenamedAwayLandsInTheCollectionsNewDirectory() throws {
        try withStore { store, path in
            try store.save(Person(name: "Ada", age: 36), forKey: "ada")
            #expect(rename(path + "/Person", path + "/Moved") == 0)
            try store.save(Person(name: "Bob", age: 40), forKey: "bob")
            #expect(FileManager.default.fileExists(atPath: path + "/Person/bob.json"))
            #expect(!FileManager.default.fileExists(atPath: path + "/Moved/bob.json"))
            #expect(try store.load(Person.self, forKey: "bob") == Person(name: "Bob", age: 40))
        }
    }

    @Test func aSaveAfterItsDirectoryWasRemovedMakesItAgain() throws {
        try withStore { store, path in
            try store.save(Person(name: "Ada", age: 36), forKey: "ada")
            try FileManager.default.removeItem(atPath: path + "/Person")
            try store.save(Person(name: "Bob", age: 40), forKey: "bob")
            #expect(try store.load(Person.self, forKey: "bob") == Person(name: "Bob", age: 40))
            #expect(FileManager.default.fileExists(atPath: path + "/Person/bob.json"))
        }
    }

    @Test func aSaveAfterItsDirectoryWasReplacedByASymlinkIsRefused() throws {
        try withStore { store, path in
            try store.save(Person(name: "Ada", age: 36), forKey: "ada")
            #expect(rename(path + "/Person", path + "/Elsewhere") == 0)
            #expect(symlink("Elsewhere", path + "/Person") == 0)
            #expect(throws: (any Error).self) { try store.save(Person(name: "Bob", age: 40), forKey: "bob") }
            #expect(!FileManager.default.fileExists(atPath: path + "/Elsewhere/bob.json"))
        }
    }
}
