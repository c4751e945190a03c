import ArchiveStore
import ArchiveWatch
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// What other programs do to a watched store's files, with plain system calls, and what the
/// watcher records.
@Suite("Watcher: external changes") struct ExternalChangeTests {
    @Test func createModifyAndDeleteAreOneChangeEach() async throws {
        try await withWatchedStore(prepare: { _, path in try makeDirectory(path + "/Person") }) { watched in
            let id = try watched.id("Person/ada")
            let file = watched.path + "/Person/ada.json"
            let first = Data(#"{"age":36,"name":"Ada"}"#.utf8)
            let second = Data(#"{"age":37,"name":"Ada Lovelace"}"#.utf8)

            try writeFile(file, first)
            let created = try await watched.log.wait(for: .created, of: id)
            #expect(created.version == 1)
            #expect(created.origin == .external)

            try writeFile(file, second)  // in place: same inode
            let modified = try await watched.log.wait(for: .modified, of: id)
            #expect(modified.version == 2)
            #expect(modified.origin == .external)

            try removeFile(file)
            let deleted = try await watched.log.wait(for: .deleted, of: id)
            #expect(deleted.version == 3)
            #expect(deleted.origin == .external)

            let changes = try await watched.settle()
            #expect(changes.map(describe) == [created, modified, deleted].map(describe))
            let history = try watched.store.history(id)
            #expect(history.map(\.version) == [1, 2, 3])
            #expect(history.map(\.isDeleted) == [false, false, true])
            #expect(history.map(\.hash) == [ContentHash(of: first), ContentHash(of: second), nil])
            #expect(history.map(\.replica) == Array(repeating: watched.store.replica, count: 3))
            #expect(try watched.store.objects(in: "Person").isEmpty)
        }
    }

    @Test func renameWithinACollectionDeletesTheOldKeyAndCreatesTheNew() async throws {
        let person = Person(name: "A", age: 1)
        try await withWatchedStore(prepare: { store, _ in try store.save(person, forKey: "a") }) { watched in
            let a = try watched.id("Person/a")
            let b = try watched.id("Person/b")
            try renameFile(watched.path + "/Person/a.json", to: watched.path + "/Person/b.json")  // mv a.json b.json

            let deleted = try await watched.log.wait(for: .deleted, of: a)
            let created = try await watched.log.wait(for: .created, of: b)
            #expect(deleted.version == 2)
            #expect(deleted.origin == .external)
            #expect(created.version == 1)
            #expect(created.origin == .external)

            let changes = try await watched.settle()
            #expect(changes.count == 2, "\(changes.map(describe))")
            #expect(try watched.store.objects(in: "Person").map(\.id) == [b])
            #expect(try watched.store.history(b).map(\.hash) == [ContentHash(of: json(person))])
            #expect(try watched.store.load(Person.self, forKey: "b") == person)
            #expect(try watched.store.history(a).last?.isDeleted == true)
        }
    }

    @Test func aNewCollectionDirectoryFilledAtOnceIsRecordedWhole() async throws {
        try await withWatchedStore { watched in
            let directory = watched.path + "/Note"
            let count = 50
            // As fast as possible: most files land before the watcher has added a watch for the
            // directory, so only its scan of the new directory can find them.
            try makeDirectory(directory)
            for index in 0..<count {
                try writeFile(directory + "/n\(index).json", #"{"index":\#(index)}"#)
            }
            let ids = try Set((0..<count).map { try ObjectID(collection: "Note", key: "n\($0)") })

            try await watched.log.wait(for: "\(count) notes created") { changes in
                ids.isSubset(of: Set(changes.lazy.filter { $0.kind == .created }.map(\.id)))
            }
            let changes = try await watched.settle()
            #expect(Set(changes.map(\.id)) == ids)
            #expect(changes.allSatisfy { $0.origin == .external })
            let objects = try watched.store.objects(in: "Note")
            #expect(Set(objects.map(\.id)) == ids)
            for index in 0..<count {
                let id = try ObjectID(collection: "Note", key: "n\(index)")
                let content = Data(#"{"index":\#(index)}"#.utf8)
                // Each file is created once. The scan of the new directory can read a file the
                // writer has created but not yet written (empty): that is a first version, and
                // the write's IN_CLOSE_WRITE then records the real content as a second one.
                let kinds = changes.filter { $0.id == id }.map(\.kind)
                #expect(kinds == [.created] || kinds == [.created, .modified], "\(id): \(kinds)")
                #expect(try watched.store.history(id).map(\.version) == Array(1...max(kinds.count, 1)))
                #expect(try watched.store.history(id).last?.hash == ContentHash(of: content))
                #expect(try watched.store.data(for: id) == content)
            }
        }
    }

    /// An editor that writes `p.json.tmp` and renames it over `p.json`: with the default
    /// debounce, the two events are one batch and one new version, and the temp name (which
    /// is a valid object file name, key `p.json`) never becomes an object.
    @Test func anEditorsWriteThenRenameIsOneVersion() async throws {
        try await withWatchedStore(prepare: { store, _ in try store.save(Person(name: "P", age: 1), forKey: "p") }) { watched in
            let id = try watched.id("Person/p")
            let edited = try json(Person(name: "P", age: 2))
            try writeFile(watched.path + "/Person/p.json.tmp", edited)
            try renameFile(watched.path + "/Person/p.json.tmp", to: watched.path + "/Person/p.json")

            let modified = try await watched.log.wait(for: .modified, of: id)
            #expect(modified.version == 2)
            #expect(modified.origin == .external)
            let changes = try await watched.settle()
            #expect(changes.map(describe) == [describe(modified)])
            #expect(try watched.store.history(id).map(\.version) == [1, 2])
            #expect(try watched.store.load(Person.self, forKey: "p") == Person(name: "P", age: 2))
            #expect(try watched.store.objects(in: "Person").map(\.id) == [id])
            let temp = try watched.id("Person/p.json")
            #expect(throws: ArchiveError.notFound(temp, version: nil)) { try watched.store.history(temp) }
        }
    }

    /// The same with a hidden temp file (`.goutputstream-…`, as GLib's editors write).
    @Test func anEditorsHiddenTempThenRenameIsOneVersion() async throws {
        try await withWatchedStore(prepare: { store, _ in try store.save(Person(name: "P", age: 1), forKey: "p") }) { watched in
            let id = try watched.id("Person/p")
            let temp = watched.path + "/Person/.goutputstream-X1Y2Z3"
            try writeFile(temp, json(Person(name: "P", age: 2)))
            try renameFile(temp, to: watched.path + "/Person/p.json")

            let modified = try await watched.log.wait(for: .modified, of: id)
            #expect(modified.version == 2)
            let changes = try await watched.settle()
            #expect(changes.map(describe) == [describe(modified)])
            #expect(try watched.store.history(id).map(\.version) == [1, 2])
            #expect(try watched.store.objects(in: "Person").map(\.id) == [id])
        }
    }

    @Test func aDeletedCollectionDirectoryDeletesEveryObjectInIt() async throws {
        let keys = ["a", "b", "c", "d", "e"]
        try await withWatchedStore(prepare: { store, _ in
            for (age, key) in keys.enumerated() { try store.save(Person(name: key, age: age), forKey: key) }
            try store.save(Person(name: "Rex", age: 3), forKey: "rex", in: "Dog")
        }) { watched in
            let ids = try Set(keys.map { try ObjectID(collection: "Person", key: $0) })
            try FileManager.default.removeItem(atPath: watched.path + "/Person")  // rm -rf store/Person

            try await watched.log.wait(for: "every Person deleted") { changes in
                ids.isSubset(of: Set(changes.lazy.filter { $0.kind == .deleted }.map(\.id)))
            }
            let changes = try await watched.settle()
            #expect(changes.count == keys.count, "\(changes.map(describe))")
            #expect(Set(changes.map(\.id)) == ids)
            #expect(changes.allSatisfy { $0.kind == .deleted && $0.version == 2 && $0.origin == .external })
            #expect(try watched.store.objects(in: "Person").isEmpty)
            for id in ids { #expect(try watched.store.history(id).map(\.isDeleted) == [false, true]) }
            #expect(try watched.store.objects(in: "Dog").map(\.id.key) == ["rex"])

            // The directory made again is watched again: a file in it is a new version of its key.
            try makeDirectory(watched.path + "/Person")
            try writeFile(watched.path + "/Person/a.json", json(Person(name: "a", age: 9)))
            let recreated = try await watched.log.wait(for: .created, of: try watched.id("Person/a"))
            #expect(recreated.version == 3)
        }
    }

    /// A collection directory deleted and made again is watched again: a file written into it
    /// once the watcher has seen the new directory is recorded from its event.
    @Test func aRecreatedCollectionDirectoryIsWatchedAgain() async throws {
        try await withWatchedStore(prepare: { store, _ in try store.save(Person(name: "A", age: 1), forKey: "a") }) { watched in
            let directory = watched.path + "/Person"
            try FileManager.default.removeItem(atPath: directory)
            try await watched.log.wait(for: .deleted, of: try watched.id("Person/a"))

            try makeDirectory(directory)
            try writeFile(directory + "/b.json", json(Person(name: "B", age: 1)))
            // The watcher scans the new directory; the watch on it exists before that scan.
            try await watched.log.wait(for: .created, of: try watched.id("Person/b"))

            try writeFile(directory + "/c.json", json(Person(name: "C", age: 1)))
            let created = try await watched.log.wait(for: .created, of: try watched.id("Person/c"))
            #expect(created.origin == .external)
            #expect(try watched.store.objects(in: "Person").map(\.id.key) == ["b", "c"])
        }
    }

    /// Temp files (`.archive-sync-tmp.…`), dot files, dot directories and anything under
    /// `.archive-sync/` are never objects: neither the events nor the periodic full scan
    /// record them.
    @Test func reservedNamesAreIgnored() async throws {
        let options = watchOptions(rescanInterval: .milliseconds(300))
        try await withWatchedStore(options, prepare: { _, path in try makeDirectory(path + "/Person") }) { watched in
            let path = watched.path
            let fullScans = watched.watcher.statistics.fullScans
            try writeFile(path + "/Person/.archive-sync-tmp.999999999.1.1", #"{"temp":1}"#)
            try writeFile(path + "/Person/.archive-sync-tmp.\(getpid()).1.2", #"{"temp":2}"#)
            try renameFile(path + "/Person/.archive-sync-tmp.\(getpid()).1.2", to: path + "/Person/.archive-sync-tmp.\(getpid()).1.3")
            try writeFile(path + "/Person/.hidden.json", #"{"hidden":true}"#)
            try writeFile(path + "/Person/.p.json.swp", "swap")
            try writeFile(path + "/.archive-sync/stray.json", #"{"stray":true}"#)
            try makeDirectory(path + "/.archive-sync/Person")
            try writeFile(path + "/.archive-sync/Person/x.json", #"{"x":1}"#)
            try makeDirectory(path + "/.cache")
            try writeFile(path + "/.cache/c.json", #"{"c":1}"#)

            // Past at least one full scan after the writes, and past every event they caused.
            try await eventually("a full scan after the writes") { watched.watcher.statistics.fullScans > fullScans }
            let changes = try await watched.settle()
            #expect(changes.isEmpty, "\(changes.map(describe))")
            #expect(try watched.store.collections().map(\.name) == [WatchedStore.markerCollection])
            #expect(try watched.store.objects(in: "Person").isEmpty)
            // Other programs' dot files are left where they are.
            #expect(FileManager.default.fileExists(atPath: path + "/Person/.hidden.json"))
            #expect(FileManager.default.fileExists(atPath: path + "/.cache/c.json"))
        }
    }

    /// A hard link made into a collection gives only IN_CREATE, which the watcher does not act
    /// on: the periodic full scan records it.
    @Test func thePeriodicRescanRecordsWhatNoEventReported() async throws {
        let options = watchOptions(rescanInterval: .milliseconds(300))
        try await withWatchedStore(options, prepare: { _, path in try makeDirectory(path + "/Person") }) { watched in
            let outside = watched.directory + "/outside.json"
            try writeFile(outside, #"{"age":1,"name":"Linked"}"#)
            try hardLink(outside, at: watched.path + "/Person/linked.json")

            let id = try watched.id("Person/linked")
            let created = try await watched.log.wait(for: .created, of: id)
            #expect(created.version == 1)
            #expect(created.origin == .external)
            let statistics = watched.watcher.statistics
            #expect(statistics.fullScans >= 1)
            // No event named a path, so only a full scan can have recorded it.
            #expect(statistics.events == 0)
            let changes = try await watched.settle()
            #expect(changes.map(describe) == [describe(created)])
            #expect(try watched.store.history(id).count == 1)
        }
    }
}
