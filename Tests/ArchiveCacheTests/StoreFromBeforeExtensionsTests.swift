import ArchiveCache
import Foundation
import Testing

@testable import ArchiveStore

/// A store made before the cache's table was an extension of the store (nothing recorded in
/// `extension_steps`, `user_version` 0) keeps its expiries: the table is adopted, not recreated.
@Suite("Cache: stores made before extensions") struct StoreFromBeforeExtensionsTests {
    @Test func aStoreMadeBeforeExtensionsKeepsItsExpiries() async throws {
        try await withStore { store in
            try store.save(Person(name: "Ada", age: 36), forKey: "ada")
            try store.save(Person(name: "Grace", age: 85), forKey: "grace")
            // The manifest as the release before extensions left it: the cache's table, made
            // by the store, with an expiry long past for Ada's version 1.
            let db = try SQLiteConnection(path: store.path + "/.archive-sync/manifest.sqlite")
            try db.execute(
                """
                PRAGMA user_version = 0;
                DROP TABLE IF EXISTS extension_steps;
                CREATE TABLE cache_entries(
                    collection TEXT NOT NULL,
                    key TEXT NOT NULL,
                    version INTEGER,
                    expires INTEGER,
                    accessed INTEGER,
                    PRIMARY KEY(collection, key)
                ) WITHOUT ROWID;
                INSERT INTO cache_entries(collection, key, version, expires) VALUES('Person', 'ada', 1, 1);
                """)

            let cache = ModelCache<Person>(store: try ArchiveStore(directory: store.path))
            #expect(try cache.keys() == ["grace"])
            #expect(try await cache.value(forKey: "ada") == nil)
            #expect(try db.first("SELECT count(*) FROM extension_steps WHERE extension = 'ArchiveCache'") { $0.int(0) } == 1)
        }
    }
}
