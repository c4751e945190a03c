import Foundation
import TestSupport
import Testing

@testable import ArchiveStore
@testable import ArchiveSync

/// A store made before sync's table was an extension of the store (its `peers` table made by
/// the store itself, nothing recorded in `extension_steps`, `user_version` 0) keeps its
/// checkpoints: the table is adopted, not recreated.
@Suite("Sync: stores made before extensions") struct StoreFromBeforeExtensionsTests {
    @Test func aStoreMadeBeforeExtensionsKeepsItsCheckpoints() async throws {
        try await withTemporaryDirectory { dir in
            do {
                let a = try ArchiveStore(directory: dir + "/a")
                let b = try ArchiveStore(directory: dir + "/b")
                try a.put(Data("{\"v\":1}".utf8), as: ObjectID(collection: "Person", key: "p1"))
                let first = try await Sync(local: a, remote: b).run()
                #expect(!first.incremental && first.copiedToB == 1)
            }
            for side in ["a", "b"] {
                let db = try SQLiteConnection(path: dir + "/\(side)/.archive-sync/manifest.sqlite")
                try db.execute("DROP TABLE extension_steps; PRAGMA user_version = 0;")
                #expect(try db.first("SELECT count(*) FROM peers") { $0.int(0) } == 1)
            }

            let a = try ArchiveStore(directory: dir + "/a")
            let b = try ArchiveStore(directory: dir + "/b")
            #expect(try a.checkpoint(for: b.replica) != nil)
            try b.put(Data("{\"v\":2}".utf8), as: ObjectID(collection: "Person", key: "p2"))
            let second = try await Sync(local: a, remote: b).run()
            #expect(second.incremental && second.copiedToA == 1)
            #expect(try a.liveHashes() == b.liveHashes())
        }
    }
}
