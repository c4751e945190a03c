import Foundation
import Testing

@testable import ArchiveStore

private let badKeys = ["", ".", "..", "a/../b", "../escape", "a/..", "./a", "a/./b", "/abs", "/", "a\u{0}b", "\u{0}"]
private let badCollections = ["", ".", "..", "a/b", "/abs", "Person/..", "a\u{0}b"]

struct KeyTests {
    @Test(arguments: badKeys)
    func badKeyIsRefusedAndWritesNothing(key: String) throws {
        try withStore { store, path throws in
            try store.save(Person(name: "kept", age: 1), forKey: "good")
            let before = filesInStore(path)
            let sequence = try store.status().sequence

            let error = archiveError { try store.save(Person(name: "bad", age: 2), forKey: key) }
            guard case .invalidKey(let refused, _)? = error else {
                Issue.record("expected invalidKey, got \(String(describing: error))")
                return
            }
            #expect(refused == key)
            #expect(error?.isBadInput == true)

            #expect(filesInStore(path) == before)
            #expect(try store.status().sequence == sequence)
            #expect(try store.load(Person.self, forKey: "good") == Person(name: "kept", age: 1))
            #expect(try store.history(of: Person.self, forKey: "good").count == 1)
        }
    }

    @Test(arguments: badKeys)
    func badKeyIsRefusedByEveryOperation(key: String) throws {
        try withStore { store, path throws in
            let before = filesInStore(path)
            for attempt: () throws -> Void in [
                { _ = try store.load(Person.self, forKey: key) },
                { try store.remove(Person.self, forKey: key) },
                { _ = try store.history(of: Person.self, forKey: key) },
                { _ = try store.restore(Person.self, forKey: key, version: 1) },
                { try store.batch { try $0.save(Person(name: "b", age: 0), forKey: key) } },
            ] {
                let error = archiveError(attempt)
                guard case .invalidKey? = error else {
                    Issue.record("expected invalidKey, got \(String(describing: error))")
                    continue
                }
            }
            #expect(filesInStore(path) == before)
            #expect(try store.status().sequence == 0)
        }
    }

    @Test(arguments: badCollections)
    func badCollectionIsRefusedAndWritesNothing(collection: String) throws {
        try withStore { store, path throws in
            try store.save(Person(name: "kept", age: 1), forKey: "good")
            let before = filesInStore(path)
            let sequence = try store.status().sequence

            for attempt: () throws -> Void in [
                { try store.save(Person(name: "bad", age: 2), forKey: "k", in: collection) },
                { _ = try store.load(Person.self, forKey: "k", in: collection) },
                { _ = try store.keys(of: Person.self, in: collection) },
                { try store.removeAll(of: Person.self, in: collection) },
            ] {
                let error = archiveError(attempt)
                guard case .invalidCollection(let refused, _)? = error else {
                    Issue.record("expected invalidCollection, got \(String(describing: error))")
                    continue
                }
                #expect(refused == collection)
            }

            #expect(filesInStore(path) == before)
            #expect(try store.status().sequence == sequence)
            #expect(try store.load(Person.self, forKey: "good") == Person(name: "kept", age: 1))
        }
    }

    @Test func keyTooLongIsRefused() throws {
        try withStore { store, path throws in
            let key = String(repeating: "x", count: ObjectID.maximumLength + 1)
            let error = archiveError { try store.save(Person(name: "x", age: 1), forKey: key) }
            guard case .invalidKey? = error else {
                Issue.record("expected invalidKey, got \(String(describing: error))")
                return
            }
            #expect(filesInStore(path).isEmpty)
        }
    }

    @Test func keysThatOnlyLookLikePathsAreAccepted() throws {
        try withStore { store, path throws in
            // Only whole `.`/`..` components climb; these stay inside the collection as one file each.
            let keys = ["a/b/c", "..a", "a..", "a/...", "a/", ".hidden", "%2E%2E"]
            for key in keys { try store.save(Person(name: key, age: 0), forKey: key) }
            for key in keys { #expect(try store.load(Person.self, forKey: key)?.name == key) }
            let files = filesInStore(path)
            #expect(files.count == keys.count + 1)
            #expect(files.allSatisfy { $0 == "Person" || ($0.hasPrefix("Person/") && !$0.dropFirst("Person/".count).contains("/")) })
        }
    }

    @Test func parsingAnIDKeepsSlashesInTheKey() throws {
        let id = try ObjectID(parsing: "Person/a/b")
        #expect(id.collection == "Person")
        #expect(id.key == "a/b")
        #expect(throws: ArchiveError.self) { try ObjectID(parsing: "no-slash") }
        #expect(throws: ArchiveError.self) { try ObjectID(parsing: "Person/../x") }
    }
}
