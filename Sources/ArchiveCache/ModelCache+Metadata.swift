import ArchiveLocking
import ArchiveStore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

// The cache's metadata in the manifest: expiries, access times, and the disk limit they drive.

extension ModelCache {

    func enforceDiskLimit(keeping id: ObjectID) throws {
        guard let diskLimit else { return }
        try recordAccessTimes()
        let victims = try store.leastRecentlyUsed(
            in: diskLimit.scope == .collection ? collection : nil, over: diskLimit.bytes, keeping: [id])
        guard !victims.isEmpty else { return }
        let evicted = try store.removeObjects(victims)
        state.withLock { $0.statistics.diskEvictions += evicted }
    }

    @inlinable
    func ensureTable() throws {
        if tablePrepared.load(ordering: .acquiring) { return }
        try prepareTable()
    }

    @usableFromInline
    func prepareTable() throws {
        try store.prepareCacheTable()
        tablePrepared.store(true, ordering: .releasing)
    }

    /// Removes `id` from disk if it is still expired (a reader saw it expired); true when it did.
    @usableFromInline
    func purgeIfExpired(_ id: ObjectID) throws -> Bool {
        guard try store.removeIfExpired(id, now: ModelCacheClock.now()) else { return false }
        state.withLock { $0.statistics.expired += 1 }
        return true
    }

    /// The expiry of `id`'s current version. The manifest's answer is remembered with the
    /// file's stamp: an unchanged file (same stamp) is the same version, whose expiry only a
    /// save changes, so a later miss of it asks no one.
    @inlinable
    func expiry(of id: ObjectID, file: String, stamp: ObjectFileStamp?, racy: Bool) throws -> Int64? {
        if let stamp, let known = knownExpiries.withLock({ $0[id.key] }), known.stamp == stamp, known.file == file {
            // Stamped again, later: once the stamp is no longer racy, later misses may skip the manifest.
            if known.racy && !racy { remember(known.expires, of: id.key, file: file, stamp: stamp, racy: false) }
            return known.expires
        }
        let expires = try manifestExpiry(of: id)
        if let stamp { remember(expires, of: id.key, file: file, stamp: stamp, racy: racy) }
        return expires
    }

    @inlinable
    func remember(_ expires: Int64?, of key: String, file: String, stamp: ObjectFileStamp, racy: Bool) {
        knownExpiries.withLock { known in
            if known.count >= max(memoryCountLimit * 2, 10_000) { known.removeAll() }
            known[key] = KnownExpiry(file: file, stamp: stamp, racy: racy, expires: expires)
        }
    }

    /// The expiry the manifest has for `id`'s current version.
    @usableFromInline
    func manifestExpiry(of id: ObjectID) throws -> Int64? {
        try metadataReader().expiry(of: id)
    }

    func metadataReader() throws -> CacheMetadataReader {
        try ensureTable()
        if let reader = reader.withLock({ $0 }) { return reader }
        let made = try CacheMetadataReader(store: store)
        return reader.withLock { reader in
            if let reader { return reader }
            reader = made
            return made
        }
    }

    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}

/// The clock of expiries and access times.
@usableFromInline
enum ModelCacheClock {
    /// Nanoseconds since 1970 from the coarse real-time clock (a vDSO read, no system call).
    @inlinable
    static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME_COARSE, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }
}
