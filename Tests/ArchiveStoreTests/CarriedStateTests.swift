import Foundation
import TestSupport
import Testing

@testable import ArchiveStore

/// A write transaction carries the change sequence and the history limit over from the last
/// one of its connection (``ManifestTransaction/Carried``), only while no other connection
/// has committed since: another store (here a second instance; in life another process) may
/// have taken sequence numbers or changed the limit in between.
@Suite struct CarriedStateTests {
    @Test func aSaveAfterAnotherConnectionsSaveTakesTheNextSequence() throws {
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            let one = try ArchiveStore(directory: path)
            let other = try ArchiveStore(directory: path)
            try one.save(Person(name: "a", age: 1), forKey: "a")
            try other.save(Person(name: "b", age: 1), forKey: "b")
            try one.save(Person(name: "c", age: 1), forKey: "c")
            try other.save(Person(name: "d", age: 1), forKey: "d")
            let sequences = try one.manifest.read { try $0.objects(in: "Person").map(\.sequence) }
            #expect(sequences.sorted() == [1, 2, 3, 4])
            #expect(try one.changeSequence() == 4)
        }
    }

    @Test func aHistoryLimitChangedByAnotherConnectionAppliesToTheNextSave() throws {
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            let running = try ArchiveStore(directory: path)  // limit 10, read by its second save
            for age in 1...2 { try running.save(Person(name: "p", age: age), forKey: "ada") }
            _ = try ArchiveStore(directory: path, options: .init(historyLimit: 2))
            for age in 3...5 { try running.save(Person(name: "p", age: age), forKey: "ada") }
            #expect(try running.history(of: Person.self, forKey: "ada").map(\.version) == [4, 5])
        }
    }

    @Test func consecutiveSavesOfOneConnectionCountOnWithoutGaps() throws {
        try withStore { store, _ in
            for n in 0..<20 { try store.save(Person(name: "p\(n)", age: n), forKey: "k\(n % 7)") }
            try store.remove(Person.self, forKey: "k0")
            let sequences = try store.manifest.read { try $0.objects(in: "Person").map(\.sequence) }
            #expect(sequences.max() == 21)
            #expect(Set(sequences).count == sequences.count)
        }
    }
}
