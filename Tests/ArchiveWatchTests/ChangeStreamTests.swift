import ArchiveStore
import ArchiveWatch
import Foundation
import TestSupport
import Testing

/// What `store.changes` delivers while a watcher runs: this process's own writes, once each,
/// and what another process recorded.
@Suite("Watcher: the change stream") struct ChangeStreamTests {
    /// The watcher sees the store's own renames and unlinks too; they must not become a
    /// second version, nor a second (external) change.
    @Test func theStoresOwnWritesAreOneVersionAndOneLocalChangeEach() async throws {
        try await withWatchedStore { watched in
            let store = watched.store
            let a = try watched.id("Person/a")
            let raw = try watched.id("Note/raw")
            #expect(try store.save(Person(name: "A", age: 1), forKey: "a") == 1)
            #expect(try store.save(Person(name: "A", age: 2), forKey: "a") == 2)
            #expect(try store.put(Data(#"{"raw":true}"#.utf8), as: raw) == 1)
            try store.batch { batch in
                try batch.save(Person(name: "B", age: 1), forKey: "b")
                try batch.save(Person(name: "C", age: 1), forKey: "c")
            }
            try store.remove(Person.self, forKey: "b")

            let changes = try await watched.settle()
            #expect(
                changes.map(describe)
                    == [
                        "created Person/a v1 local", "modified Person/a v2 local", "created Note/raw v1 local",
                        "created Person/b v1 local", "created Person/c v1 local", "deleted Person/b v2 local",
                    ].enumerated().map { "\($0.element) #\(watched.baseline + 1 + $0.offset)" })
            #expect(try store.history(a).map(\.version) == [1, 2])
            #expect(try store.history(raw).map(\.version) == [1])
            #expect(try store.history(watched.id("Person/b")).map(\.version) == [1, 2])
            #expect(try store.history(watched.id("Person/c")).map(\.version) == [1])
            #expect(try store.status().sequence == watched.baseline + 6 + 1)  // and the marker
        }
    }

    /// `archive-sync put` in another process: the watcher in this one delivers its change,
    /// once, as external, with the version the manifest has.
    @Test func anotherProcesssPutIsDeliveredOnceAsExternal() async throws {
        try await withWatchedStore { watched in
            let id = try watched.id("Person/x")
            let first = try json(Person(name: "X", age: 1))
            let second = try json(Person(name: "X", age: 2))

            // The first put also makes the collection's directory.
            let put1 = try runArchiveSync(["put", watched.path, "Person/x"], stdin: first)
            #expect(put1.status == 0, "\(put1)")
            let created = try await watched.log.wait(for: .created, of: id)
            #expect(created.origin == .external)
            #expect(created.version == 1)

            let put2 = try runArchiveSync(["put", watched.path, "Person/x"], stdin: second)
            #expect(put2.status == 0, "\(put2)")
            let modified = try await watched.log.wait(for: .modified, of: id)
            #expect(modified.origin == .external)
            #expect(modified.version == 2)

            let changes = try await watched.settle()
            #expect(changes.map(describe) == [describe(created), describe(modified)])
            let history = try watched.store.history(id)
            #expect(history.map(\.version) == [1, 2])
            #expect(history.map(\.hash) == [ContentHash(of: first), ContentHash(of: second)])
            #expect(try watched.store.objects(in: "Person").map(\.version) == [modified.version])
        }
    }

    /// Another process creates an object and saves it twice more while the watcher gathers
    /// events (2 s): the three versions reach the stream as one change, the latest, and as
    /// `created`, since no subscriber has heard of the object (not `modified` version 3).
    @Test func anObjectCreatedAndModifiedBetweenTwoReadsIsDeliveredAsCreated() async throws {
        try await withWatchedStore(watchOptions(debounce: .seconds(2))) { watched in
            let other = try ArchiveStore(directory: watched.path)  // its own feed: another process's writes
            let id = try watched.id("Person/n")
            for age in 1...3 { try other.save(Person(name: "N", age: age), forKey: "n") }
            let seen = try await watched.log.wait(for: "a change of Person/n") { $0.contains { $0.id == id } }
            #expect(seen.first { $0.id == id }.map(describe)?.hasPrefix("created Person/n v3 external") == true, "\(seen.map(describe))")

            // Once heard of, its next version is a modification; a re-creation after a delete is a creation.
            try other.save(Person(name: "N", age: 4), forKey: "n")
            #expect(try await watched.log.wait(for: .modified, of: id).version == 4)
            try other.remove(Person.self, forKey: "n")
            try other.save(Person(name: "N", age: 5), forKey: "n")
            try other.save(Person(name: "N", age: 6), forKey: "n")
            // (Not `settle()`: it expects every sequence, and coalescing skips the delete's.)
            let seen2 = try await watched.log.wait(for: "Person/n v7") { $0.contains { $0.id == id && $0.version == 7 } }
            #expect(seen2.filter { $0.id == id }.map { "\($0.kind) v\($0.version)" } == ["created v3", "modified v4", "created v7"])
        }
    }
}
