import ArchiveLocking
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

// What the model cache (`ArchiveCache`) needs from a store, and its table in the manifest.
// Nothing else in the store uses this file.

/// The stamp of an object's file: size, modification time and inode, as `fstatat` gives them.
@usableFromInline
package struct ObjectFileStamp: Equatable, Sendable {
    @usableFromInline package var size: Int64
    @usableFromInline package var mtimeNanoseconds: Int64
    @usableFromInline package var inode: UInt64

    init(_ stamp: FileStamp) {
        size = stamp.size
        mtimeNanoseconds = stamp.mtimeNanoseconds
        inode = stamp.inode
    }
}

/// A loaded object, with the name and stamp its file had *before* it was read: a later
/// change to the file can only make the stamp differ, never hide behind it.
@usableFromInline
package struct StampedObject<Value> {
    @usableFromInline package var value: Value
    @usableFromInline package var file: String
    /// The file's path relative to the store: `Person/person1.json`.
    @usableFromInline package var path: String
    /// nil when the object was found under a file other than its collection's codec's name.
    @usableFromInline package var stamp: ObjectFileStamp?
}

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
package final class CacheMetadataReader: Sendable {
    private let connection: TracedMutex<SQLiteConnection>

    package init(store: ArchiveStore) throws {
        do {
            let path = try FileSystem.resolvedPath(store.path).appendingComponents(FileName.metadataDirectory, "manifest.sqlite")
            connection = TracedMutex(try SQLiteConnection(path: path, mode: store.isReadOnly ? .readOnly : .existing))
        } catch {
            throw ArchiveError.wrap(error)
        }
    }

    /// The expiry (nanoseconds since 1970) set for `id`'s current version, if any.
    package func expiry(of id: ObjectID) throws -> Int64? {
        do {
            return try connection.withLock { db in
                try db.first(
                    """
                    SELECT e.expires FROM cache_entries e JOIN objects o ON o.collection = e.collection AND o.key = e.key
                    WHERE e.collection = ? AND e.key = ? AND e.version = o.version AND o.deleted = 0 AND e.expires IS NOT NULL
                    """, [.text(id.collection), .text(id.key)]
                ) { $0.int(0) }
            }
        } catch {
            throw ArchiveError.wrap(error)
        }
    }
}

extension ArchiveStore {
    /// The cache's table: per object, the expiry a cache set with a save (valid for exactly the
    /// version it was set with) and when a cache last read it (nanoseconds since 1970).
    private static let cacheSchema = """
        CREATE TABLE IF NOT EXISTS cache_entries(
            collection TEXT NOT NULL,
            key TEXT NOT NULL,
            version INTEGER,
            expires INTEGER,
            accessed INTEGER,
            PRIMARY KEY(collection, key)
        ) WITHOUT ROWID;
        """

    /// Creates the cache's table when the store lacks it, as the manifest creates any missing
    /// table: checked with a read, created under the write lock.
    package func prepareCacheTable() throws {
        try withManifest { manifest in
            let present = try manifest.read { try $0.db.hasTable("cache_entries") }
            if !present { try manifest.write { tx in try tx.db.execute(Self.cacheSchema) } }
        }
    }

    /// Calls `body` with every batch of changes this store publishes, synchronously, before the
    /// write that recorded them returns (and as the watcher records other processes' changes).
    /// `body` must not use the store. Returns a token for ``stopObservingChanges(_:)``.
    package func observeChanges(_ body: @escaping @Sendable ([StoreChange]) -> Void) -> Int {
        manifest.feed.observe(body)
    }

    package func stopObservingChanges(_ token: Int) {
        manifest.feed.stopObserving(token)
    }

    /// Odd while a watcher in this process follows other processes' changes; changes each time
    /// one starts or stops. One atomic load.
    package var followGeneration: Int { manifest.feed.followGeneration.load(ordering: .acquiring) }

    /// The name of `collection`'s directory in the store.
    package func directoryName(ofCollection collection: String) -> String {
        FileName.encode(collection)
    }

    /// The stamp of the file at `relativePath` in the store (`Person/person1.json`), or nil
    /// when it is not a regular file, a directory on the way is a symlink, or it cannot be
    /// stat'ed. The corresponding C function is `fstatat` (see ``FileSystem/regularFileStamp(atRelativePath:in:)``).
    @usableFromInline
    package func fileStamp(atPath relativePath: String) -> ObjectFileStamp? {
        FileSystem.regularFileStamp(atRelativePath: relativePath, in: root).map(ObjectFileStamp.init)
    }

    /// The name `id`'s file has in its collection's codec, such as `person1.json`.
    package func cacheFileName(of id: ObjectID) -> String {
        FileName.join(stem: FileName.encode(id.key), extension: codec(for: id.collection).fileExtension)
    }

    /// Loads `id` as a `T` with the stamp its file had before the read (from the same open
    /// file: one `openat2`, `fstat` and `read`), or nil when absent. Reads only the file the
    /// manifest names, as ``load(_:forKey:in:)`` does.
    @usableFromInline
    package func loadStamped<T: Decodable>(_ type: T.Type, id: ObjectID) throws -> StampedObject<T>? {
        guard let file = try withManifest({ try $0.readOne { try $0.liveFile(of: id) } }) else {
            do { try refuseWhatIsThere(instead: id) } catch { throw ArchiveError.wrap(error) }
            return nil
        }
        let relative = FileName.encode(id.collection).appendingComponent(file)
        do {
            guard let (data, stamp) = try FileSystem.readStampedFile(relative, in: root, path: path.appendingComponent(relative)) else { return nil }
            let value = try decode(type, id: id, file: file, data: data, schemaVersion: { try self.recordedSchemaVersion(of: id) })
            return StampedObject(value: value, file: file, path: relative, stamp: ObjectFileStamp(stamp))
        } catch let error as SystemCallError where error.errno == ENOTDIR {
            return nil
        } catch {
            throw ArchiveError.wrap(error)
        }
    }

    /// The expiry (nanoseconds since 1970) set for `id`'s current version, if any.
    package func cacheExpiry(of id: ObjectID) throws -> Int64? {
        try withManifest {
            try $0.read { tx in
                try tx.db.first(
                    """
                    SELECT e.expires FROM cache_entries e JOIN objects o ON o.collection = e.collection AND o.key = e.key
                    WHERE e.collection = ? AND e.key = ? AND e.version = o.version AND o.deleted = 0 AND e.expires IS NOT NULL
                    """, [.text(id.collection), .text(id.key)]
                ) { $0.int(0) }
            }
        }
    }

    /// Sets (or, with nil, clears) the expiry of `version` of `id`.
    package func setCacheExpiry(of id: ObjectID, version: Int, expires: Int64?) throws {
        try withManifest {
            try $0.write { tx in
                try tx.db.run(
                    """
                    INSERT INTO cache_entries(collection, key, version, expires) VALUES(?, ?, ?, ?)
                    ON CONFLICT(collection, key) DO UPDATE SET version = excluded.version, expires = excluded.expires
                    """, [.text(id.collection), .text(id.key), .integer(Int64(version)), expires.map { .integer($0) } ?? .null])
            }
        }
    }

    /// Records when caches last read these objects (nanoseconds since 1970); a later time wins.
    package func recordCacheAccess(_ accesses: [(ObjectID, Int64)]) throws {
        guard !accesses.isEmpty else { return }
        try withManifest {
            try $0.write { tx in
                for (id, time) in accesses {
                    try tx.db.run(
                        """
                        INSERT INTO cache_entries(collection, key, accessed) VALUES(?, ?, ?)
                        ON CONFLICT(collection, key) DO UPDATE SET accessed = max(coalesce(accessed, 0), excluded.accessed)
                        """, [.text(id.collection), .text(id.key), .integer(time)])
                }
            }
        }
    }

    /// The objects to remove so that the live objects of `collection` (or of the whole store,
    /// when nil) take at most `limit` bytes: the least recently used first, by the later of
    /// their last change and their last read through a cache. Objects in `keeping` are never chosen.
    package func leastRecentlyUsed(in collection: String?, over limit: Int, keeping: Set<ObjectID>) throws -> [ObjectUse] {
        try withManifest {
            try $0.read { tx in
                let scope = collection == nil ? "" : "AND o.collection = ?"
                let bindings: [SQLValue] = collection.map { [.text($0)] } ?? []
                var total =
                    try tx.db.first("SELECT coalesce(sum(size), 0) FROM objects o WHERE deleted = 0 \(scope)", bindings) { Int($0.int(0)) } ?? 0
                guard total > limit else { return [] }
                var victims: [ObjectUse] = []
                try tx.db.query(
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
                    victims.append(ObjectUse(id: id, size: size, hash: row.isNull(3) ? nil : ContentHash(bytes: row.blob(3))))
                    total -= size
                }
                return victims
            }
        }
    }

    /// Removes objects as one batch (one durability barrier) and forgets their cache metadata;
    /// an object that no longer holds the contents it had when chosen (another process saved
    /// it meanwhile) is left alone.
    /// - Returns: how many it removed.
    @discardableResult
    package func removeObjects(_ victims: [ObjectUse]) throws -> Int {
        guard !victims.isEmpty else { return 0 }
        let removed = try applyChecked(
            victims.map { victim in
                var write = PendingWrite(id: victim.id, file: "", content: nil)
                write.condition = WriteCondition(liveHash: victim.hash)
                return write
            })
        let ids = zip(victims, removed).compactMap { victim, version in version == nil ? nil : victim.id }
        try forgetCacheMetadata(ids)
        return ids.count
    }

    /// Removes `id` when its current version still has an expiry at or before `now`, unless
    /// another process saves it meanwhile.
    /// - Returns: true when it removed it.
    @discardableResult
    package func removeIfExpired(_ id: ObjectID, now: Int64) throws -> Bool {
        guard let expires = try cacheExpiry(of: id), expires <= now,
            let row = try withManifest({ try $0.read { try $0.object(id) } }), !row.isDeleted
        else { return false }
        return try removeObjects([ObjectUse(id: id, size: row.size, hash: row.hash)]) == 1
    }

    /// The objects of `collection` whose current version has expired by `now`.
    package func expiredObjects(in collection: String, now: Int64) throws -> [ObjectID] {
        try withManifest {
            try $0.read { tx in
                var ids: [ObjectID] = []
                try tx.db.query(
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

    /// Drops the cache's rows for these objects.
    private func forgetCacheMetadata(_ ids: [ObjectID]) throws {
        guard !ids.isEmpty else { return }
        try withManifest {
            try $0.write { tx in
                for id in ids {
                    try tx.db.run("DELETE FROM cache_entries WHERE collection = ? AND key = ?", [.text(id.collection), .text(id.key)])
                }
            }
        }
    }
}
