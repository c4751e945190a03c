import Foundation
import TestSupport
import Testing

@testable import ArchiveStore

struct HistoryTests {
    private let id = try! ObjectID(collection: "Person", key: "ada")

    @Test func eachChangeIsTheNextVersionWithItsHashAndSize() throws {
        try withStore { store, _ throws in
            let values = [Person(name: "Ada", age: 1), Person(name: "Ada", age: 22), Person(name: "Ada Lovelace", age: 333)]
            for (index, value) in values.enumerated() {
                #expect(try store.save(value, forKey: "ada") == index + 1)
            }
            let history = try store.history(of: Person.self, forKey: "ada")
            #expect(history.map(\.version) == [1, 2, 3])
            for (version, value) in zip(history, values) {
                let bytes = try ArchiveCodec.json.encode(value)
                #expect(version.hash == ContentHash(of: bytes))
                #expect(version.size == bytes.count)
                #expect(!version.isDeleted)
                #expect(version.file == "ada.json")
                #expect(try store.data(for: id, version: version.version) == bytes)
            }
            #expect(Set(history.compactMap(\.hash)).count == 3)
        }
    }

    @Test func restoreMakesANewVersionWithTheOldContent() throws {
        try withStore { store, _ throws in
            try store.save(Person(name: "v1", age: 1), forKey: "ada")
            try store.save(Person(name: "v2", age: 2), forKey: "ada")
            try store.save(Person(name: "v3", age: 3), forKey: "ada")
            let v1 = try store.data(for: id, version: 1)

            #expect(try store.restore(Person.self, forKey: "ada", version: 1) == 4)
            #expect(try store.load(Person.self, forKey: "ada") == Person(name: "v1", age: 1))
            #expect(try store.data(for: id) == v1)
            let history = try store.history(of: Person.self, forKey: "ada")
            #expect(history.map(\.version) == [1, 2, 3, 4])
            #expect(history[3].hash == history[0].hash)
            // Versions 2 and 3 are still there: history is never rewritten.
            #expect(try store.data(for: id, version: 3) == ArchiveCodec.json.encode(Person(name: "v3", age: 3)))
        }
    }

    @Test func restoreChecksTheTypeAndRefusesUnknownVersions() throws {
        try withStore { store, _ throws in
            try store.save(Person(name: "v1", age: 1), forKey: "ada")
            try store.save(Person(name: "v2", age: 2), forKey: "ada")
            guard case .undecodable? = archiveError({ try store.restore(Invoice.self, forKey: "ada", version: 1, in: "Person") }) else {
                Issue.record("restoring as the wrong type should be undecodable")
                return
            }
            guard case .notFound(_, let version)? = archiveError({ try store.restore(Person.self, forKey: "ada", version: 9) }) else {
                Issue.record("restoring a future version should be notFound")
                return
            }
            #expect(version == 9)
            #expect(try store.history(of: Person.self, forKey: "ada").count == 2)
            #expect(try store.load(Person.self, forKey: "ada") == Person(name: "v2", age: 2))
        }
    }

    @Test func retentionKeepsOnlyTheLastVersions() throws {
        try withStore(.init(historyLimit: 3)) { store, _ throws in
            for age in 1...6 { try store.save(Person(name: "p", age: age), forKey: "ada") }
            let history = try store.history(of: Person.self, forKey: "ada")
            #expect(history.map(\.version) == [4, 5, 6])
            #expect(store.historyLimit == 3)

            let error = archiveError { try store.data(for: id, version: 1) }
            guard case .versionNotKept(let failedID, let version, let limit)? = error else {
                Issue.record("expected versionNotKept, got \(String(describing: error))")
                return
            }
            #expect(failedID == id)
            #expect(version == 1)
            #expect(limit == 3)
            guard case .versionNotKept? = archiveError({ try store.restore(Person.self, forKey: "ada", version: 3) }) else {
                Issue.record("restoring a dropped version should be versionNotKept")
                return
            }
            #expect(try store.data(for: id, version: 4) == ArchiveCodec.json.encode(Person(name: "p", age: 4)))
            // Dropped versions' contents are gone from the manifest too, once the saves are
            // settled: until then a power cut may leave any of them on disk.
            try store.settleCommittedWrites()
            #expect(try storedContentCount(store) == 3)
        }
    }

    @Test func historyLimitPersistsAcrossReopen() throws {
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            do { _ = try ArchiveStore(directory: path, options: .init(historyLimit: 2)) }
            let store = try ArchiveStore(directory: path)
            #expect(store.historyLimit == 2)
            for age in 1...4 { try store.save(Person(name: "p", age: age), forKey: "ada") }
            #expect(try store.history(of: Person.self, forKey: "ada").map(\.version) == [3, 4])
        }
    }

    @Test func historyLimitChangedByAnotherInstanceAppliesToLaterWrites() throws {
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            let running = try ArchiveStore(directory: path)  // a long-lived process, limit 10
            _ = try ArchiveStore(directory: path, options: .init(historyLimit: 2))  // `--history-limit 2` from another
            for age in 1...5 { try running.save(Person(name: "p", age: age), forKey: "ada") }
            #expect(try running.history(of: Person.self, forKey: "ada").map(\.version) == [4, 5])
        }
    }

    @Test func historyLimitBelowOneIsRefused() throws {
        try withTemporaryDirectory { dir throws in
            guard case .invalidInput? = archiveError({ try ArchiveStore(directory: dir + "/store", options: .init(historyLimit: 0)) }) else {
                Issue.record("a history limit of 0 should be refused")
                return
            }
            #expect(!entryExists(dir + "/store"))
        }
    }

    @Test func everyKeptVersionKeepsItsOwnContents() throws {
        try withStore { store, _ throws in
            let a = Person(name: "A", age: 1)
            let b = Person(name: "B", age: 2)
            try store.save(a, forKey: "ada")
            try store.save(b, forKey: "ada")
            try store.save(a, forKey: "ada")
            let history = try store.history(of: Person.self, forKey: "ada")
            #expect(history.map(\.version) == [1, 2, 3])
            #expect(history[0].hash == history[2].hash)
            #expect(history[0].hash != history[1].hash)
            // Kept with each version's row, beside the object's other rows, not once per hash.
            #expect(try storedContentCount(store) == 3)
            try store.save(a, forKey: "twin")
            #expect(try storedContentCount(store) == 4)

            #expect(try store.restore(Person.self, forKey: "ada", version: 2) == 4)
            #expect(try store.load(Person.self, forKey: "ada") == b)
            #expect(try store.restore(Person.self, forKey: "ada", version: 1) == 5)
            #expect(try store.load(Person.self, forKey: "ada") == a)
        }
    }

    /// A store made before history kept its bytes in its rows (format 1, a `blobs` table
    /// keyed by hash) opens as format 2 with every kept version still restorable.
    @Test func aFormatOneManifestIsMigratedWithEveryKeptVersion() throws {
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            let v1 = Person(name: "one", age: 1)
            let v2 = Person(name: "two", age: 2)
            do {
                let store = try ArchiveStore(directory: path)
                try store.save(v1, forKey: "ada")
                try store.save(v2, forKey: "ada")
                try store.save(v1, forKey: "twin")
                try store.remove(Person.self, forKey: "twin")
            }
            // Back to format 1's layout, as the previous release left it.
            let db = try SQLiteConnection(path: path + "/.archive-sync/manifest.sqlite")
            try db.execute(
                """
                CREATE TABLE blobs(hash BLOB PRIMARY KEY, refs INTEGER NOT NULL, data BLOB NOT NULL) WITHOUT ROWID;
                INSERT INTO blobs SELECT hash, count(*), data FROM history WHERE data IS NOT NULL GROUP BY hash;
                ALTER TABLE history DROP COLUMN data;
                UPDATE meta SET value = '1' WHERE name = 'format';
                """)
            #expect(try db.first("SELECT count(*) FROM blobs") { $0.int(0) } == 2)

            let store = try ArchiveStore(directory: path)
            #expect(try db.first("SELECT value FROM meta WHERE name = 'format'") { $0.text(0) } == "2")
            #expect(try db.first("SELECT 1 FROM sqlite_master WHERE name = 'blobs'") { _ in true } == nil)
            #expect(try storedContentCount(store) == 3)
            #expect(try store.verify().isClean)
            #expect(try store.restore(Person.self, forKey: "ada", version: 1) == 3)
            #expect(try store.load(Person.self, forKey: "ada") == v1)
            #expect(try store.restore(Person.self, forKey: "twin", version: 1) == 3)
            #expect(try store.load(Person.self, forKey: "twin") == v1)
        }
    }

    /// A store made before a table existed gets it when opened, whatever other tables it has
    /// (the cache adds its own, so counting them is not enough).
    @Test func aMissingTableIsMadeWhenTheStoreOpensBesideOtherTables() throws {
        try withManifestOfOneObject { path, db throws in
            try db.execute("DROP TABLE directories; CREATE TABLE someone_elses(x INTEGER);")
            let store = try ArchiveStore(directory: path)
            #expect(try db.first("SELECT 1 FROM sqlite_master WHERE name = 'directories'") { _ in true } == true)
            #expect(try store.scan().changes.isEmpty)
        }
    }

    /// A store made before rows recorded where each object's life began gets the column when
    /// opened: its old objects count as created long ago (a change to one is a modification),
    /// and each creation from then on is recorded where it happened.
    @Test func aManifestWithoutCreatedSeqGetsItAndKeepsOldObjectsAsCreatedLongAgo() throws {
        try withManifestOfOneObject { path, db throws in
            try db.execute("ALTER TABLE objects DROP COLUMN created_seq")
            let store = try ArchiveStore(directory: path)
            try store.save(Person(name: "p", age: 2), forKey: "ada")
            try store.save(Person(name: "q", age: 1), forKey: "bob")
            try store.save(Person(name: "q", age: 2), forKey: "bob")
            let rows = try store.manifest.read { try $0.changes(after: 0) }
            #expect(
                rows.map { "\($0.change.id.key) \($0.change.kind) \($0.lifeBegan.map(String.init) ?? "-")" } == ["ada modified -", "bob modified 3"])
        }
    }

    @Test func aManifestOfALaterFormatIsRefusedUntouched() throws {
        try withManifestOfOneObject { path, db throws in
            try db.execute("UPDATE meta SET value = '3' WHERE name = 'format'")
            guard case .notAStore(_, let reason)? = archiveError({ try ArchiveStore(directory: path) }) else {
                Issue.record("a manifest of format 3 must not open")
                return
            }
            #expect(reason.contains("format 3"), "\(reason)")
            #expect(try db.first("SELECT value FROM meta WHERE name = 'format'") { $0.text(0) } == "3")
            #expect(try db.first("SELECT count(*) FROM history WHERE data IS NOT NULL") { $0.int(0) } == 1)
        }
    }

    @Test func pruningKeepsContentStillUsedByAnotherObject() throws {
        try withStore(.init(historyLimit: 1)) { store, _ throws in
            let shared = Person(name: "shared", age: 0)
            try store.save(shared, forKey: "ada")
            try store.save(shared, forKey: "twin")
            try store.save(Person(name: "other", age: 1), forKey: "ada")  // drops ada v1
            let twin = try ObjectID(collection: "Person", key: "twin")
            #expect(try store.data(for: twin, version: 1) == ArchiveCodec.json.encode(shared))
            #expect(try store.verify().isClean)
        }
    }

    @Test func removeKeepsHistoryAndRecordsADeletedVersion() throws {
        try withStore { store, path throws in
            try store.save(Person(name: "v1", age: 1), forKey: "ada")
            try store.save(Person(name: "v2", age: 2), forKey: "ada")
            try store.remove(Person.self, forKey: "ada")

            #expect(!FileManager.default.fileExists(atPath: path + "/Person/ada.json"))
            #expect(try store.load(Person.self, forKey: "ada") == nil)
            #expect(try store.keys(of: Person.self).isEmpty)
            let history = try store.history(of: Person.self, forKey: "ada")
            #expect(history.map(\.version) == [1, 2, 3])
            #expect(history.map(\.isDeleted) == [false, false, true])
            #expect(history[2].hash == nil)
            #expect(history[2].size == 0)

            // Removing again changes nothing; restoring brings it back as a new version.
            try store.remove(Person.self, forKey: "ada")
            #expect(try store.history(of: Person.self, forKey: "ada").count == 3)
            #expect(try store.restore(Person.self, forKey: "ada", version: 1) == 4)
            #expect(try store.load(Person.self, forKey: "ada") == Person(name: "v1", age: 1))
            #expect(try store.keys(of: Person.self) == ["ada"])
        }
    }

    @Test func removingAnAbsentObjectRecordsNothing() throws {
        try withStore { store, _ throws in
            try store.remove(Person.self, forKey: "ghost")
            #expect(try store.status().sequence == 0)
            guard case .notFound? = archiveError({ try store.history(of: Person.self, forKey: "ghost") }) else {
                Issue.record("an unknown object's history should be notFound")
                return
            }
        }
    }

    @Test func removeAllClearsExactlyThatCollection() throws {
        try withStore { store, path throws in
            for index in 0..<5 {
                try store.save(Person(name: "p\(index)", age: index), forKey: "k\(index)")
                try store.save(PersonModel(title: "m\(index)"), forKey: "k\(index)")
            }
            try store.save(Person(name: "elsewhere", age: 0), forKey: "k0", in: "Person2")

            try store.removeAll(of: Person.self)

            #expect(try store.keys(of: Person.self).isEmpty)
            #expect(try store.keys(of: PersonModel.self) == (0..<5).map { "k\($0)" })
            #expect(try store.keys(of: Person.self, in: "Person2") == ["k0"])
            for index in 0..<5 {
                #expect(try store.load(PersonModel.self, forKey: "k\(index)") == PersonModel(title: "m\(index)"))
                #expect(try store.history(of: Person.self, forKey: "k\(index)").last?.isDeleted == true)
                #expect(try store.history(of: PersonModel.self, forKey: "k\(index)").map(\.version) == [1])
            }
            let files = filesInStore(path)
            #expect(files.filter { $0.hasPrefix("Person/") }.isEmpty)
            #expect(files.filter { $0.hasPrefix("PersonModel/") }.count == 5)
            #expect(files.contains("Person2/k0.json"))
        }
    }

    @Test func versionVectorCountsThisReplicasChanges() throws {
        try withStore { store, _ throws in
            try store.save(Person(name: "a", age: 1), forKey: "ada")
            try store.save(Person(name: "a", age: 2), forKey: "ada")
            try store.remove(Person.self, forKey: "ada")
            let history = try store.history(of: Person.self, forKey: "ada")
            #expect(history.map { $0.vector[store.replica] } == [1, 2, 3])
            #expect(history.allSatisfy { $0.vector.counters.count == 1 })
            #expect(history.allSatisfy { $0.replica == store.replica })
            #expect(history[2].vector.dominates(history[1].vector))
            #expect(!history[1].vector.dominates(history[2].vector))
        }
    }

    @Test func statusCountsLiveObjectsAndTheirBytes() throws {
        try withStore { store, path throws in
            let empty = try store.status()
            #expect(empty.objects == 0)
            #expect(empty.bytes == 0)

            try store.save(Person(name: "A", age: 1), forKey: "a")
            try store.save(Person(name: "Bee", age: 22), forKey: "b")
            try store.save(PersonModel(title: "t"), forKey: "c")
            try store.save(Person(name: "gone", age: 3), forKey: "d")
            try store.remove(Person.self, forKey: "d")

            let files = ["Person/a.json", "Person/b.json", "PersonModel/c.json"]
            let bytes = try files.reduce(0) { $0 + (try contents(of: path + "/" + $1).count) }
            let status = try store.status()
            #expect(status.objects == 3)
            #expect(status.bytes == bytes)
            #expect(status.collections == 2)
            #expect(status.sequence == 5)
            #expect(status.replica == store.replica)
        }
    }

    @Test func replicaIDPersistsAcrossReopenAndDiffersBetweenStores() throws {
        try withTemporaryDirectory { dir throws in
            let first: ReplicaID
            do {
                let store = try ArchiveStore(directory: dir + "/a")
                first = store.replica
                try store.save(Person(name: "a", age: 1), forKey: "a")
            }
            let reopened = try ArchiveStore(directory: dir + "/a")
            #expect(reopened.replica == first)
            #expect(try reopened.history(of: Person.self, forKey: "a").last?.vector[first] == 1)
            let other = try ArchiveStore(directory: dir + "/b")
            #expect(other.replica != first)
            #expect(!first.rawValue.isEmpty)
        }
    }

    @Test func openingWithoutCreateRefusesADirectoryThatIsNotAStore() throws {
        try withTemporaryDirectory { dir throws in
            guard case .notAStore? = archiveError({ try ArchiveStore(directory: dir + "/missing", options: .init(create: false)) }) else {
                Issue.record("a missing directory is not a store")
                return
            }
            guard case .notAStore? = archiveError({ try ArchiveStore(directory: dir, options: .init(create: false)) }) else {
                Issue.record("a directory without .archive-sync is not a store")
                return
            }
            #expect(!entryExists(dir + "/.archive-sync"))
        }
    }

    /// Calls `body` with the path of a closed store holding one object, and a connection to
    /// its manifest (to change it as an older or newer release would have left it).
    private func withManifestOfOneObject(_ body: (String, SQLiteConnection) throws -> Void) throws {
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            do { try ArchiveStore(directory: path).save(Person(name: "p", age: 1), forKey: "ada") }
            try body(path, try SQLiteConnection(path: path + "/.archive-sync/manifest.sqlite"))
        }
    }

    /// How many versions' contents the manifest keeps.
    private func storedContentCount(_ store: ArchiveStore) throws -> Int {
        try store.manifest.read { tx in
            var count = 0
            try tx.forEachContent { _, _, _, _ in count += 1 }
            return count
        }
    }
}
