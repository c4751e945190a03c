/// Limits and counters of a ``ModelCache``: its disk limit and what it has done.

/// A byte limit on what a store keeps on disk, enforced by ``ModelCache`` on each of its writes.
public struct DiskLimit: Sendable, Equatable {
    /// Whose objects count: the cache's collection, or every collection in the store.
    public enum Scope: Sendable, Equatable {
        /// The objects of the cache's collection count, and only they are evicted.
        case collection
        /// Every live object in the store counts, and any may be evicted.
        case store
    }

    /// The most bytes of archives the scope may hold after each write through the cache.
    public var bytes: Int
    /// Whose objects count.
    public var scope: Scope

    /// At most `bytes` in the cache's collection.
    public static func collection(bytes: Int) -> DiskLimit { DiskLimit(bytes: bytes, scope: .collection) }
    /// At most `bytes` in the whole store (objects of any collection may be evicted).
    public static func store(bytes: Int) -> DiskLimit { DiskLimit(bytes: bytes, scope: .store) }
}

/// What a ``ModelCache`` has done since it was made.
public struct ModelCacheStatistics: Sendable, Equatable {
    /// Reads answered from memory.
    public var hits = 0
    /// Reads that went to disk (the key was not in memory, or its file had changed).
    public var misses = 0
    /// Files read and decoded.
    public var loads = 0
    /// Calls of a read-through fetch.
    public var fetches = 0
    /// Entries dropped from memory to keep the count and cost limits.
    public var memoryEvictions = 0
    /// Entries dropped from memory because the object changed (anyone's write, seen through the change feed or a stat).
    public var invalidations = 0
    /// Objects removed from disk to keep the disk limit.
    public var diskEvictions = 0
    /// Objects found expired and removed from disk.
    public var expired = 0
}

/// A typed model cache over an ``ArchiveStore``: models in memory for speed, on disk for
