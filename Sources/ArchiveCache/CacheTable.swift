import ArchiveStore
import Foundation

// The cache's table in the store's manifest, and every query of it: per object, the expiry a
// cache set with a save (valid for exactly the version it was set with) and when a cache last
// read it. The store knows it only as an extension (see ArchiveStore's StoreExtension.swift).

/// The cache's extension of a store's manifest.
let cacheTables = StoreExtension(
    name: "ArchiveCache",
    steps: [
        // Times are nanoseconds since 1970. The definition stores made before extensions were
        // recorded already have, so that their table is adopted as it is.
        (
            "cache_entries",
            """
            CREATE TABLE IF NOT EXISTS cache_entries(
                collection TEXT NOT NULL,
                key TEXT NOT NULL,
                version INTEGER,
                expires INTEGER,
                accessed INTEGER,
                PRIMARY KEY(collection, key)
            ) WITHOUT ROWID;
            """
        )
    ])

/// The expiry of an object's current version, when set: one statement, for either connection.
private let expirySQL = """
    SELECT e.expires FROM cache_entries e JOIN objects o ON o.collection = e.collection AND o.key = e.key
    WHERE e.collection = ? AND e.key = ? AND e.version = o.version AND o.deleted = 0 AND e.expires IS NOT NULL
    """

/// One object in a least-recently-used order: its size and when it was last used.
package struct ObjectUse: Sendable {
    package var id: ObjectID
    package var size: Int
    /// The contents it held when chosen: it is removed only if it still holds them.
    package var hash: ContentHash?
}

/// A read-only connection of the cache's own to the manifest, for the one query a cache miss
/// makes (an object's expiry): a single statement, outside any explicit transaction, and not
/// behind the store's connection lock.
final class CacheMetadataReader: Sendable {
    private let reader: ManifestReader

    init(store: ArchiveStore) throws { reader = try store.openManifestReader() }

    /// The expiry (nanoseconds since 1970) set for `id`'s current version, if any.
    func expiry(of id: ObjectID) throws -> Int64? {
        try reader.first(expirySQL, [.text(id.collection), .text(id.key)]) { $0.int(0) }
    }
}

extension ArchiveStore {
    /// Creates the cache's table when the store lacks it (checked with a read, created under
    /// the write lock).
    package func prepareCacheTable() throws {
        try install(cacheTables)
    }

    /// The expiry (nanoseconds since 1970) set for `id`'s current version, if any.
    func cacheExpiry(of id: ObjectID) throws -> Int64? {
        try readManifest { sql in try sql.first(expirySQL, [.text(id.collection), .text(id.key)]) { $0.int(0) } }
    }

    /// Sets (or, with nil, clears) the expiry of `version` of `id`.
    func setCacheExpiry(of id: ObjectID, version: Int, expires: Int64?) throws {
        try writeManifest { sql in
            try sql.run(
                """
                INSERT INTO cache_entries(collection, key, version, expires) VALUES(?, ?, ?, ?)
                ON CONFLICT(collection, key) DO UPDATE SET version = excluded.version, expires = excluded.expires
                """, [.text(id.collection), .text(id.key), .integer(Int64(version)), expires.map { .integer($0) } ?? .null])
        }
    }

    /// Records when caches last read these objects (nanoseconds since 1970); a later time wins.
    func recordCacheAccess(_ accesses: [(ObjectID, Int64)]) throws {
        guard !accesses.isEmpty else { return }
        try writeManifest { sql in
            for (id, time) in accesses {
                try sql.run(
                    """
                    INSERT INTO cache_entries(collection, key, accessed) VALUES(?, ?, ?)
                    ON CONFLICT(collection, key) DO UPDATE SET accessed = max(coalesce(accessed, 0), excluded.accessed)
                    """, [.text(id.collection), .text(id.key), .integer(time)])
            }
        }
    }

    /// The objects to remove so that the live objects of `collection` (or of the whole store,
    /// when nil) take at most `limit` bytes: the least recently used first, by the later of
    /// their last change and their last read through a cache. Objects in `keeping` are never chosen.
    package func leastRecentlyUsed(in collection: String?, over limit: Int, keeping: Set<ObjectID>) throws -> [ObjectUse] {
        try readManifest { sql in
            let scope = collection == nil ? "" : "AND o.collection = ?"
            let bindings: [SQLValue] = collection.map { [.text($0)] } ?? []
            var total = try sql.first("SELECT coalesce(sum(size), 0) FROM objects o WHERE deleted = 0 \(scope)", bindings) { Int($0.int(0)) } ?? 0
            guard total > limit else { return [] }
            var victims: [ObjectUse] = []
            try sql.query(
                """
                SELECT o.collection, o.key, o.size, o.hash FROM objects o
                LEFT JOIN cache_entries e ON e.collection = o.collection AND e.key = o.key
                WHERE o.deleted = 0 \(scope)
                ORDER BY max(o.modified, coalesce(e.accessed, 0)), o.collection, o.key
                """, bindings
            ) { row in
                guard total > limit else { return }
                let id = ObjectID(unchecked: row.text(0), key: row.text(1))
                if keeping.contains(id) { return }
                let size = Int(row.int(2))
                victims.append(ObjectUse(id: id, size: size, hash: row.isNull(3) ? nil : ContentHash(digest: row.blob(3))))
                total -= size
            }
            return victims
        }
    }

    /// Removes objects as one batch (one durability barrier) and forgets their cache metadata
    /// in the same transaction; an object that no longer holds the contents it had when chosen
    /// (another process saved it meanwhile) is left alone.
    /// - Returns: how many it removed.
    @discardableResult
    package func removeObjects(_ victims: [ObjectUse]) throws -> Int {
        guard !victims.isEmpty else { return 0 }
        let removed = try applyConditional(victims.map { ConditionalWrite(id: $0.id, content: nil, expected: $0.hash) }) { sql, going in
            for (victim, goes) in zip(victims, going) where goes {
                try sql.run("DELETE FROM cache_entries WHERE collection = ? AND key = ?", [.text(victim.id.collection), .text(victim.id.key)])
            }
        }
        return removed.lazy.filter { $0 != nil }.count
    }

    /// Removes `id` when its current version still has an expiry at or before `now`, unless
    /// another process saves it meanwhile.
    /// - Returns: true when it removed it.
    @discardableResult
    func removeIfExpired(_ id: ObjectID, now: Int64) throws -> Bool {
        guard let expires = try cacheExpiry(of: id), expires <= now, let row = try objectRecords(for: [id]).first ?? nil, !row.isDeleted
        else { return false }
        return try removeObjects([ObjectUse(id: id, size: row.size, hash: row.hash)]) == 1
    }

    /// The objects of `collection` whose current version has expired by `now`.
    func expiredObjects(in collection: String, now: Int64) throws -> [ObjectID] {
        try readManifest { sql in
            var ids: [ObjectID] = []
            try sql.query(
                """
                SELECT e.key FROM cache_entries e JOIN objects o ON o.collection = e.collection AND o.key = e.key
                WHERE e.collection = ? AND e.version = o.version AND o.deleted = 0 AND e.expires <= ?
                ORDER BY e.key
                """, [.text(collection), .integer(now)]
            ) { ids.append(ObjectID(unchecked: collection, key: $0.text(0))) }
            return ids
        }
    }
}
