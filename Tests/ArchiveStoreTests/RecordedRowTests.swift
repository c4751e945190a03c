import Foundation
import TestSupport
import Testing

@testable import ArchiveStore

/// What an object's row keeps when a new version changes it where it stands (an upsert; it
/// was an `INSERT OR REPLACE` that looked up `created_seq` again): where the object's current
/// life began, the version vector and author a sync's page brings, the history of every
/// version, and the row's one `objects_by_seq` entry.
struct RecordedRowTests {
    @Test func aChangedRowKeepsWhereItsLifeBeganAndARecreatedOneBeginsAnew() throws {
        try withStore { store, _ throws in
            try store.save(Person(name: "a", age: 1), forKey: "ada")  // sequence 1: ada's life begins
            try store.save(Person(name: "b", age: 1), forKey: "bob")  // 2
            try store.save(Person(name: "a", age: 2), forKey: "ada")  // 3
            try store.remove(Person.self, forKey: "bob")  // 4
            try store.save(Person(name: "b", age: 2), forKey: "bob")  // 5: bob's new life begins
            // A sync's page brings ada's next version as another replica made it.
            let ada = try ObjectID(collection: "Person", key: "ada")
            let peer = ReplicaID(rawValue: "peer")
            let local = try #require(try store.manifest.read { try $0.object(ada) })
            var vector = local.vector
            vector.increment(peer)
            let bytes = try ArchiveCodec.json.encode(Person(name: "a", age: 3))
            let versions = try store.applyConditional([
                ConditionalWrite(
                    id: ada, content: bytes, expected: local.hash, version: ReplicatedVersion(vector: vector, modified: 7_000, author: peer))
            ])
            #expect(versions == [3])

            let rows = try store.manifest.read { try $0.changes(after: 0) }
            #expect(
                rows.map { "\($0.change.id.key) \($0.change.kind) v\($0.change.version) seq \($0.change.sequence) life \($0.lifeBegan ?? 0)" }
                    == ["bob created v3 seq 5 life 5", "ada modified v3 seq 6 life 1"])
            let row = try #require(try store.manifest.read { try $0.object(ada) })
            #expect(row.vector == vector && row.replica == peer && row.modified == 7_000 && row.hash == ContentHash(of: bytes))
            let history = try store.manifest.read { try $0.history(ada) }
            #expect(history.map(\.version) == [1, 2, 3])
            #expect(history.last?.vector == vector && history.last?.replica == peer)
            #expect(history.first?.vector == VersionVector([store.replica: 1]))
            #expect(try store.data(for: ada, version: 3) == bytes)
            // One index entry per row, at the row's sequence.
            let (check, indexed) = try store.manifest.read { tx in
                (
                    try tx.db.first("PRAGMA integrity_check") { $0.text(0) },
                    try tx.db.first("SELECT group_concat(seq) FROM (SELECT seq FROM objects INDEXED BY objects_by_seq ORDER BY seq)") { $0.text(0) }
                )
            }
            #expect(check == "ok")
            #expect(indexed == "5,6")
        }
    }

    /// History is a rowid table (a `WITHOUT ROWID` one wrote about 6 pages for each version
    /// recorded among older ones); a store made with the old layout has it rebuilt by the
    /// first process that writes it, every version and its bytes kept.
    @Test func historyIsARowidTableAndAnOldStoresIsRebuiltKeepingEveryVersion() throws {
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            let manifest = path + "/.archive-sync/manifest.sqlite"
            let values = (1...3).map { Person(name: "v\($0)", age: $0) }
            do {
                let store = try ArchiveStore(directory: path)
                for value in values { try store.save(value, forKey: "ada") }
                try store.save(Person(name: "b", age: 1), forKey: "bob")
            }
            #expect(try Self.historyIsWithoutRowid(manifest) == false)
            // As releases before this one made it.
            try SQLiteConnection(path: manifest).execute(
                """
                BEGIN;
                CREATE TABLE old(
                    collection TEXT NOT NULL, key TEXT NOT NULL, version INTEGER NOT NULL, file TEXT NOT NULL, hash BLOB,
                    size INTEGER NOT NULL, modified INTEGER NOT NULL, deleted INTEGER NOT NULL, replica TEXT NOT NULL,
                    vector TEXT NOT NULL, schema INTEGER, data BLOB, PRIMARY KEY(collection, key, version)
                ) WITHOUT ROWID;
                INSERT INTO old SELECT * FROM history; DROP TABLE history; ALTER TABLE old RENAME TO history;
                PRAGMA user_version = 4;
                COMMIT;
                """)
            #expect(try Self.historyIsWithoutRowid(manifest) == true)

            let store = try ArchiveStore(directory: path)
            #expect(try Self.historyIsWithoutRowid(manifest) == false)
            let ada = try ObjectID(collection: "Person", key: "ada")
            #expect(try store.history(of: Person.self, forKey: "ada").map(\.version) == [1, 2, 3])
            for (index, value) in values.enumerated() {
                #expect(try store.data(for: ada, version: index + 1) == ArchiveCodec.json.encode(value))
            }
            #expect(try store.history(of: Person.self, forKey: "bob").map(\.version) == [1])
            try store.save(Person(name: "v4", age: 4), forKey: "ada")
            #expect(try store.history(of: Person.self, forKey: "ada").map(\.version) == [1, 2, 3, 4])
            #expect(try store.verify().isClean)
        }
    }

    private static func historyIsWithoutRowid(_ manifest: String) throws -> Bool? {
        try SQLiteConnection(path: manifest).first("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'history'") {
            $0.text(0).uppercased().contains("WITHOUT ROWID")
        }
    }
}
