import Foundation
import TestSupport
import Testing

@testable import ArchiveStore

#if canImport(Glibc)
    import Glibc
#endif

/// A save that replaces its object's file swaps the staged file with it (`RENAME_EXCHANGE`):
/// the replaced file waits in `.archive-sync/staging` for the settle after the `syncfs`,
/// instead of being freed under the writer lock.
@Suite struct ReplacedFileTests {
    @Test func theReplacedFileWaitsForTheSettleAndAReaderKeepsItsBytes() throws {
        try withStore { store, path throws in
            holdSettles(store)
            try store.save(Person(name: "v1", age: 1), forKey: "ada")
            let first = try Data(contentsOf: URL(fileURLWithPath: path + "/Person/ada.json"))
            let reader = try FileHandle(forReadingFrom: URL(fileURLWithPath: path + "/Person/ada.json"))
            defer { try? reader.close() }
            #expect(stagedEntries(path).isEmpty)

            try store.save(Person(name: "v2", age: 2), forKey: "ada")
            // Swapped out, not freed: the one staged file is the version it replaced.
            let staged = stagedEntries(path)
            #expect(staged.count == 1)
            let held = try staged.first.map { try Data(contentsOf: URL(fileURLWithPath: path + "/.archive-sync/staging/" + $0)) }
            #expect(held == first)
            #expect(try store.load(Person.self, forKey: "ada") == Person(name: "v2", age: 2))

            try store.settleCommittedWrites()
            #expect(stagedEntries(path).isEmpty)
            // A program that had the old file open still reads the old bytes, as after a rename.
            #expect(try reader.readToEnd() == first)
            #expect(try store.verify().isClean)
        }
    }

    @Test func aDirectoryAnotherProgramMadeAtTheFilesNameIsNeverSwappedAway() throws {
        try withStore { store, path throws in
            holdSettles(store)
            try store.save(Person(name: "v1", age: 1), forKey: "ada")
            try FileManager.default.removeItem(atPath: path + "/Person/ada.json")
            try FileManager.default.createDirectory(atPath: path + "/Person/ada.json", withIntermediateDirectories: false)
            try Data("keep me".utf8).write(to: URL(fileURLWithPath: path + "/Person/ada.json/note"))

            #expect(throws: (any Error).self) { try store.save(Person(name: "v2", age: 2), forKey: "ada") }
            try? store.settleCommittedWrites()
            #expect(try Data(contentsOf: URL(fileURLWithPath: path + "/Person/ada.json/note")) == Data("keep me".utf8))
            #expect(stagedEntries(path).isEmpty)
        }
    }

    @Test func aFileWithAnotherLinkKeepsItsBytesThere() throws {
        try withTemporaryDirectory { dir throws in
            let store = try ArchiveStore(directory: dir + "/store")
            holdSettles(store)
            try store.save(Person(name: "v1", age: 1), forKey: "ada")
            let first = try Data(contentsOf: URL(fileURLWithPath: dir + "/store/Person/ada.json"))
            #expect(link(dir + "/store/Person/ada.json", dir + "/backup.json") == 0)

            try store.save(Person(name: "v2", age: 2), forKey: "ada")
            try store.settleCommittedWrites()
            #expect(try Data(contentsOf: URL(fileURLWithPath: dir + "/backup.json")) == first)
            #expect(try store.load(Person.self, forKey: "ada") == Person(name: "v2", age: 2))
        }
    }
}
