import Foundation
import Testing

@testable import ArchiveStore

private struct Stop: Error {}

/// Encodes fine until `failing` is set, then throws: a model whose encoding fails.
private struct Fragile: Codable {
    var failing: Bool

    func encode(to encoder: any Encoder) throws {
        if failing { throw EncodingError.invalidValue(self, .init(codingPath: [], debugDescription: "refuses to encode")) }
        var container = encoder.singleValueContainer()
        try container.encode(failing)
    }
}

struct BatchTests {
    @Test func batchOf500SavesLandsAllAtVersionOne() throws {
        try withStore { store, path throws in
            try store.batch { tx in
                for index in 0..<500 { try tx.save(Person(name: "p\(index)", age: index), forKey: String(format: "k%03d", index)) }
            }
            let keys = (0..<500).map { String(format: "k%03d", $0) }
            #expect(try store.keys(of: Person.self) == keys)
            let objects = try store.objects(in: "Person")
            #expect(objects.count == 500)
            #expect(objects.allSatisfy { $0.version == 1 })
            for index in [0, 1, 250, 499] {
                #expect(try store.load(Person.self, forKey: keys[index]) == Person(name: "p\(index)", age: index))
            }
            #expect(filesInStore(path).count == 501)
            #expect(filesInStore(path).allSatisfy { !$0.contains(FileName.tempPrefix) })
            #expect(try store.status().sequence == 500)
            // Only the settle period's intent, until the `syncfs` that settles it.
            #expect(try store.manifest.read { try $0.intents() }.allSatisfy { $0.after != nil })
            try store.settleCommittedWrites()
            #expect(try store.manifest.read { try $0.intents() }.isEmpty)
        }
    }

    @Test func batchWhoseBodyThrowsWritesNothing() throws {
        try withStore { store, path throws in
            #expect(throws: Stop.self) {
                try store.batch { tx in
                    for index in 0..<100 {
                        if index == 50 { throw Stop() }
                        try tx.save(Person(name: "p", age: index), forKey: "k\(index)")
                    }
                }
            }
            #expect(filesInStore(path).isEmpty)
            #expect(try store.keys(of: Person.self).isEmpty)
            #expect(try store.status().sequence == 0)
            #expect(try store.manifest.read { try $0.intents() }.isEmpty)
        }
    }

    @Test func batchWhoseBodyThrowsLeavesEarlierObjectsAsTheyWere() throws {
        try withStore { store, path throws in
            try store.save(Person(name: "old", age: 1), forKey: "a")
            let before = filesInStore(path)
            let bytes = try contents(of: path + "/Person/a.json")
            #expect(throws: Stop.self) {
                try store.batch { tx in
                    try tx.save(Person(name: "new", age: 2), forKey: "a")
                    try tx.remove(Person.self, forKey: "a")
                    try tx.save(Person(name: "b", age: 3), forKey: "b")
                    throw Stop()
                }
            }
            #expect(filesInStore(path) == before)
            #expect(try contents(of: path + "/Person/a.json") == bytes)
            #expect(try store.history(of: Person.self, forKey: "a").count == 1)
        }
    }

    @Test func batchWithAnUnencodableModelWritesNothing() throws {
        try withStore { store, path throws in
            let error = archiveError {
                try store.batch { tx in
                    try tx.save(Fragile(failing: false), forKey: "fine")
                    try tx.save(Fragile(failing: true), forKey: "broken")
                }
            }
            guard case .unencodable(let id, _, _)? = error else {
                Issue.record("expected unencodable, got \(String(describing: error))")
                return
            }
            #expect(id.key == "broken")
            #expect(filesInStore(path).isEmpty)
            #expect(try store.keys(of: Fragile.self).isEmpty)
        }
    }

    @Test func batchMixesSavesAndRemoves() throws {
        try withStore { store, path throws in
            try store.save(Person(name: "A", age: 1), forKey: "a")
            try store.save(Person(name: "B", age: 2), forKey: "b")
            try store.save(PersonModel(title: "m"), forKey: "m")

            try store.batch { tx in
                try tx.remove(Person.self, forKey: "a")
                try tx.save(Person(name: "B2", age: 20), forKey: "b")
                try tx.save(Person(name: "C", age: 3), forKey: "c")
                try tx.remove(PersonModel.self, forKey: "m")
                try tx.remove(Person.self, forKey: "never-existed")
            }

            #expect(try store.keys(of: Person.self) == ["b", "c"])
            #expect(try store.keys(of: PersonModel.self).isEmpty)
            #expect(try store.load(Person.self, forKey: "a") == nil)
            #expect(try store.load(Person.self, forKey: "b") == Person(name: "B2", age: 20))
            #expect(try store.load(Person.self, forKey: "c") == Person(name: "C", age: 3))
            #expect(try store.history(of: Person.self, forKey: "a").map(\.isDeleted) == [false, true])
            #expect(try store.history(of: Person.self, forKey: "b").map(\.version) == [1, 2])
            #expect(filesInStore(path) == ["Person", "PersonModel", "Person/b.json", "Person/c.json"])
            #expect(try store.status().sequence == 7)
            #expect(try store.verify().isClean)
        }
    }

    @Test func batchSavingAndRemovingOneKeyAppliesInOrder() throws {
        try withStore { store, _ throws in
            try store.batch { tx in
                try tx.save(Person(name: "first", age: 1), forKey: "k")
                try tx.save(Person(name: "second", age: 2), forKey: "k")
                try tx.remove(Person.self, forKey: "k")
                try tx.save(Person(name: "last", age: 3), forKey: "k")
            }
            #expect(try store.load(Person.self, forKey: "k") == Person(name: "last", age: 3))
            #expect(try store.history(of: Person.self, forKey: "k").map(\.isDeleted) == [false, false, true, false])
            #expect(try store.verify().isClean)
        }
    }

    @Test func batchThatSavesThenRemovesANewKeyLeavesItAbsent() throws {
        try withStore { store, path throws in
            try store.batch { tx in
                try tx.save(Person(name: "brief", age: 1), forKey: "k")
                try tx.remove(Person.self, forKey: "k")
            }
            #expect(try store.load(Person.self, forKey: "k") == nil)
            #expect(try store.keys(of: Person.self).isEmpty)
            #expect(!FileManager.default.fileExists(atPath: path + "/Person/k.json"))
        }
    }

    @Test func batchThatRemovesThenSavesTheSameContentKeepsTheObject() throws {
        try withStore { store, path throws in
            let value = Person(name: "kept", age: 1)
            try store.save(value, forKey: "k")
            try store.batch { tx in
                try tx.remove(Person.self, forKey: "k")
                try tx.save(value, forKey: "k")
            }
            #expect(try store.load(Person.self, forKey: "k") == value)
            #expect(try store.keys(of: Person.self) == ["k"])
            #expect(FileManager.default.fileExists(atPath: path + "/Person/k.json"))
        }
    }

    @Test func emptyBatchRecordsNothing() throws {
        try withStore { store, path throws in
            try store.batch { _ in }
            #expect(filesInStore(path).isEmpty)
            #expect(try store.status().sequence == 0)
        }
    }

    /// A batch that takes the WAL past SQLite's default checkpoint (1,000 pages) leaves the
    /// checkpoint (writing the database file, and one more flush) to the settle after its
    /// `syncfs`, off its caller's time.
    @Test func aLargeBatchLeavesItsCheckpointToTheSettle() throws {
        try withStore { store, path throws in
            store.durability.withLock { $0.scheduled = true }  // no settle but the one below
            let database = path + "/" + FileName.metadataDirectory + "/manifest.sqlite"
            func size() throws -> Int { try FileManager.default.attributesOfItem(atPath: database)[.size] as! Int }
            let before = try size()
            let name = String(repeating: "x", count: 3_000)
            try store.batch { tx in
                for index in 0..<1_500 { try tx.save(Person(name: name, age: index), forKey: "k\(index)") }
            }
            #expect(try size() == before)
            try store.settleCommittedWrites()
            #expect(try size() > before + 1_500 * 3_000)
        }
    }
}
