import ArchiveStore
import Foundation

/// What the cache keeps of snapshots: which it has read, and the fold a compaction writes into one.
extension BucketCache {
    /// The key of the last snapshot folded; nil before any.
    package func snapshotRead() throws -> String? {
        try db.withLock { try $0.first("SELECT value FROM meta WHERE name = 'snapshot'") { $0.text(0) } }
    }

    /// Folds `snapshot` (read from `key`) and moves each log's position up to the snapshot's
    /// where it was behind, in one transaction. Folding is order-free, so a cache ahead of the
    /// snapshot on some logs only drops the versions it has already seen.
    /// - Returns: whether any log's position moved.
    package func fold(_ snapshot: Snapshot, key: String) throws -> Bool {
        try transaction { sql in
            _ = try Self.fold(snapshot.entries, sql)
            var moved = false
            for (replica, position) in snapshot.positions {
                let last = try sql.first("SELECT last FROM logs WHERE replica = ?", [.text(replica.rawValue)]) { Int($0.int(0)) }
                guard (last ?? 0) < position.last else { continue }
                try sql.run(
                    "INSERT OR REPLACE INTO logs(replica, last, key) VALUES(?, ?, ?)",
                    [.text(replica.rawValue), .integer(Int64(position.last)), .text(position.key)])
                moved = true
            }
            try sql.run("INSERT OR REPLACE INTO meta(name, value) VALUES('snapshot', ?)", [.text(key)])
            return moved
        }
    }

    /// Every version of the fold no other has seen, deletes included: a snapshot's entries.
    package func antichain() throws -> [BucketEntry] {
        try db.withLock { sql in
            var entries: [BucketEntry] = []
            try sql.query("SELECT \(Self.columns) FROM versions ORDER BY collection, key, rowid") { entries.append(try Self.entry(from: $0, at: 0)) }
            return entries
        }
    }

    /// The blobs the fold's versions reference.
    package func referencedBlobs() throws -> Set<ContentHash> {
        try db.withLock { sql in
            var hashes: Set<ContentHash> = []
            try sql.query("SELECT DISTINCT hash FROM versions WHERE hash IS NOT NULL") { row in
                if let hash = ContentHash(digest: row.blob(0)) { hashes.insert(hash) }
            }
            return hashes
        }
    }
}
