import ArchiveLocking
import ArchiveStore
import Synchronization

/// restarts, and never a stale model after another process changed the file.
///
/// ```swift
/// let cache = ModelCache<Person>(store: store, countLimit: 1_000, costLimit: 50 << 20)
/// let p = try await cache.value(forKey: "person1")                          // memory, else disk, else nil
/// let q = try await cache.value(forKey: "person2") { try await api.fetchPerson("person2") }   // loads, saves, returns
/// try await cache.set(p, forKey: "person1", expiresAfter: .seconds(3600))
/// ```
///
/// - **Memory**: least recently used entries go first when there are more than `countLimit`
///   or they cost more than `costLimit` bytes (an entry costs its archive's size). Readers of
///   a key that is not in memory share one disk read, or one fetch.
/// - **Freshness**: every write made through the cache's `ArchiveStore` object (the cache's,
///   or `store.save`, `remove`, `restore`, a `scan`) drops the entry before the write returns.
///   While a watcher runs in this process (`store.startWatching()`), other processes' and
///   programs' writes drop it as the watcher records them (milliseconds), and a hit costs a
///   lock and a dictionary lookup. Without a watcher, each hit checks the file's stamp (one
///   `fstatat`): a file whose size, modification time or inode changed is read again; a file
///   changed within 2 s of being read is read again on every hit until it is older, since a
///   same-size rewrite within one clock tick keeps the stamp.
/// - **Expiry**: ``set(_:forKey:expiresAfter:)`` records an expiry in the manifest for the
///   version it saves; an expired object reads as absent and is removed from disk.
/// - **Disk limit**: with `diskLimit`, every write through the cache removes the least
///   recently used objects (by the later of their last change and their last read through a
///   cache, in any process) until the collection or store fits.
public final class ModelCache<Value: Codable & Sendable>: Sendable {
    /// The store the models persist in.
    public let store: ArchiveStore
    /// The collection the models live in: `Value`'s type name unless given.
    public let collection: String
    /// The disk limit enforced on each write, if any.
    public let diskLimit: DiskLimit?

    @usableFromInline
    struct Entry: Sendable {
        @usableFromInline var value: Value
        /// The file read (relative to the store), and its stamp before the read; nil stamp: read
        /// again before trusting.
        @usableFromInline var path: String
        @usableFromInline var stamp: ObjectFileStamp?
        /// The stamp was taken within ``racyWindow`` of the file's modification.
        @usableFromInline var racy: Bool
        @usableFromInline var expires: Int64?
        /// The follow generation (odd: a watcher follows) in which the entry was last known current.
        @usableFromInline var current: Int

        @usableFromInline
        init(value: Value, path: String, stamp: ObjectFileStamp?, racy: Bool, expires: Int64?, current: Int) {
            self.value = value
            self.path = path
            self.stamp = stamp
            self.racy = racy
            self.expires = expires
            self.current = current
        }
    }

    /// One part of memory, with its own LRU order (the limits are the cache's). Hits that
    /// change nothing read it under their CPU's stripe of its lock, so that threads on other
    /// cores reading the same shard write no memory in common (see ``ReadMostlyLock``).
    @usableFromInline typealias Shard = ReadMostlyLock<ShardState>

    @usableFromInline
    struct ShardState: Sendable {
        @usableFromInline var memory: MemoryLRU<Entry>
        /// Hits that wrote to the shard (the others count in their stripe).
        @usableFromInline var hits = 0
    }

    /// Bookkeeping for a key while a load or a save of it is in flight.
    @usableFromInline
    struct Pending {
        @usableFromInline var users = 0
        /// Invalidations of the key seen while any user was in flight.
        @usableFromInline var invalidations = 0
        @usableFromInline var latestVersion = 0

        @usableFromInline init() {}
    }

    /// A load in flight, and the readers waiting for its outcome.
    @usableFromInline
    struct Inflight {
        @usableFromInline let id: Int
        @usableFromInline var waiters: [CheckedContinuation<Value??, any Error>] = []

        @usableFromInline init(id: Int) { self.id = id }
    }

    /// What a load learnt of a key's current version: its file (which the manifest named),
    /// that file's stamp, and the version's expiry. While the file keeps that stamp, a miss
    /// reads it without asking the manifest either, unless the stamp was taken so soon after
    /// the file's mtime that a rewrite within the same clock tick could keep it (`racy`).
    @usableFromInline
    struct KnownExpiry {
        @usableFromInline var file: String
        @usableFromInline var stamp: ObjectFileStamp
        @usableFromInline var racy: Bool
        @usableFromInline var expires: Int64?

        @usableFromInline init(file: String, stamp: ObjectFileStamp, racy: Bool, expires: Int64?) {
            self.file = file
            self.stamp = stamp
            self.racy = racy
            self.expires = expires
        }
    }

    @usableFromInline
    struct State {
        @usableFromInline var pending: [String: Pending] = [:]
        @usableFromInline var inflight: [String: Inflight] = [:]
        @usableFromInline var nextInflight = 0
        /// Evicted keys whose last use is not yet in the manifest.
        @usableFromInline var unrecordedAccesses: [(key: String, time: Int64)] = []
        @usableFromInline var statistics = ModelCacheStatistics()
        /// What all shards hold: kept here, under this lock, by every insertion and removal.
        @usableFromInline var count = 0
        @usableFromInline var cost = 0

        @usableFromInline init() {}
    }

    @usableFromInline
    enum Lookup: Sendable {
        case hit(Value)
        /// A hit that must be marked used first (a write).
        case touch
        case check(path: String, stamp: ObjectFileStamp)
        case miss
    }

    /// Memory, split by key hash from ``shardingThreshold`` entries (so that threads reading
    /// different keys rarely wait for each other), each shard with its own lock and LRU list.
    /// The limits hold for the total. Below the threshold one list keeps the exact order; above
    /// it, the entry evicted is the one last used longest ago, to within ``recencyWindow``
    /// (100 ms: a key's uses that close together count as one).
    @usableFromInline let shards: [Shard]
    /// The same shards, reached without a reference count (`shards` keeps them alive): a hit
    /// that retained its shard would write the shard's first cache line, which every core reads.
    @usableFromInline let unretainedShards: [Unmanaged<Shard>]
    // TracedMutex rather than Mutex throughout: the thread sanitizer sees its locking (TracedMutex.swift).
    @usableFromInline let state = TracedMutex(State())
    private let observer = TracedMutex<Int?>(nil)
    @usableFromInline let tablePrepared = Atomic<Bool>(false)
    /// The expiries the manifest gave for files as they were (see ``expiry(of:stamp:)``).
    @usableFromInline let knownExpiries = TracedMutex<[String: KnownExpiry]>([:])
    @usableFromInline let memoryCountLimit: Int
    @usableFromInline let memoryCostLimit: Int
    /// Made with the table (``ensureTable()``).
    let reader = TracedMutex<CacheMetadataReader?>(nil)
    /// `collection`'s directory name in the store, with a trailing `/`.
    @usableFromInline let directory: String

    /// Files modified less than this long before they were read may hide a rewrite behind an
    /// unchanged stamp (the store's scan uses the same window).
    @inlinable static var racyWindow: Int64 { 2_000_000_000 }
    /// How exact a sharded cache's LRU order is, in nanoseconds: a key read again within this
    /// long of its last marked use is not moved in its list (memcached, for one, moves an item
    /// at most once a minute). Each move is a write under every stripe of the shard's lock,
    /// which readers on other cores then fetch back.
    @inlinable static var recencyWindow: Int64 { 100_000_000 }
    /// A count limit from which memory is split into ``shardCount`` shards.
    static var shardingThreshold: Int { 256 }
    static var shardCount: Int { 16 }

    /// Makes a cache of `Value`s stored in `collection` (default: the type's name).
    ///
    /// - Parameters:
    ///   - countLimit: how many models memory keeps at most.
    ///   - costLimit: how many bytes of archives memory keeps at most.
    ///   - diskLimit: a byte limit on disk, for the collection or the whole store, enforced
    ///     on every write through this cache. nil: none.
    public init(
        store: ArchiveStore, collection: String? = nil, countLimit: Int = 1_000, costLimit: Int = 50 << 20, diskLimit: DiskLimit? = nil
    ) {
        self.store = store
        self.collection = collection ?? ArchiveStore.collectionName(of: Value.self)
        self.diskLimit = diskLimit
        memoryCountLimit = max(countLimit, 0)
        memoryCostLimit = max(costLimit, 0)
        directory = store.directoryName(ofCollection: self.collection) + "/"
        // Unsharded, every hit moves its entry in the one exact LRU list (a write): one stripe.
        let sharded = countLimit >= Self.shardingThreshold
        shards = (0..<(sharded ? Self.shardCount : 1)).map { _ in
            Shard(ShardState(memory: MemoryLRU()), stripes: sharded ? Shard.stripesForThisMachine : 1)
        }
        unretainedShards = shards.map { Unmanaged.passUnretained($0) }
        let collectionName = self.collection
        let token = store.observeChanges { [weak self] changes in
            self?.invalidate(changes.filter { $0.id.collection == collectionName })
        }
        observer.withLock { $0 = token }
    }

    deinit {
        if let token = observer.withLock({ $0 }) { store.stopObservingChanges(token) }
    }

    // MARK: - Reading

    /// The model stored as `key`: from memory when current, else from disk, else nil.
    ///
    /// An expired object reads as nil and is removed from disk. A file that is not a `Value`
    /// (another shape, corrupt bytes) throws the store's `ArchiveError` and is left as it is.
    @inlinable
    public func value(forKey key: String) async throws -> Value? {
        if let value = try cachedValue(forKey: key) { return value }
        return try await load(key, fetch: nil, expiresAfter: nil)
    }

    /// The model stored as `key`; when there is none, the result of `fetch`, which is saved
    /// (with `expiresAfter`, if given) before it is returned. Concurrent callers for one key
    /// share one disk read, and one call of `fetch` (and its outcome: its error too).
    @inlinable
    public func value(
        forKey key: String, expiresAfter: Duration? = nil, fetch: @escaping @Sendable () async throws -> Value
    ) async throws -> Value {
        if let value = try cachedValue(forKey: key) { return value }
        while true {
            if let value = try await load(key, fetch: fetch, expiresAfter: expiresAfter) { return value }
        }
    }

    /// The model in memory for `key` if it is current (see the type's notes on freshness),
    /// without reading the file; nil when memory has no current model.
    @inlinable
    public func cachedValue(forKey key: String) throws -> Value? {
        let now = ModelCacheClock.now()
        let generation = followGeneration()
        let sharded = shards.count > 1
        let index = sharded ? Self.shardIndex(key, shards.count) : 0
        // Sharded, the order is exact only to the recency window: a hit within the entry's
        // window writes nothing to the list, and needs only a read lock (one stripe of it).
        var lookup =
            sharded
            ? unretainedShards[index]._withUnsafeGuaranteedRef { shard in
                shard.read { state, hits in
                    let lookup = Self.lookup(key, in: state.memory, now: now, generation: generation, readOnly: true)
                    if case .hit = lookup { hits += 1 }
                    return lookup
                }
            } : .touch
        if case .touch = lookup {
            lookup = shards[index].write { state -> Lookup in
                let lookup = Self.lookup(key, in: state.memory, now: now, generation: generation, readOnly: false)
                guard case .hit = lookup, let slot = state.memory.slot(of: key) else { return lookup }
                if sharded { state.memory.touch(slot, at: now, unlessUsedWithin: Self.recencyWindow) } else { state.memory.touch(slot, at: now) }
                state.hits += 1
                return lookup
            }
        }
        switch lookup {
        case .hit(let value): return value
        case .miss, .touch: return nil  // (never .touch after the write: it is not read-only)
        case .check(let path, let stamp): return validate(key, in: shards[index], path: path, stamp: stamp, generation: generation, now: now)
        }
    }

    // MARK: - Writing

    /// Saves `value` as `key` (a new version on disk, durable when this returns) and keeps it
    /// in memory. With `expiresAfter`, it reads as absent (and is removed) once that has passed;
    /// without, any earlier expiry of the key is cleared. Then enforces the disk limit.
    public func set(_ value: Value, forKey key: String, expiresAfter: Duration? = nil) async throws {
        let id = try ObjectID(collection: collection, key: key)
        try ensureTable()
        let seen = beginPending(key)
        defer { endPending(key) }
        _ = knownExpiries.withLock { $0.removeValue(forKey: key) }
        let version = try store.save(value, forKey: key, in: collection)
        let expires = expiresAfter.map { ModelCacheClock.now() + Self.nanoseconds($0) }
        try store.setCacheExpiry(of: id, version: version, expires: expires)
        let path = directory + store.objectFileName(of: id)
        // No stamp: a stat now could see a later writer's file. Without a watcher, the next
        // hit reads the file once and stamps it before reading.
        let entry = Entry(value: value, path: path, stamp: nil, racy: true, expires: expires, current: store.followGeneration)
        let size = store.fileStamp(atPath: path)?.size ?? 1
        insert(entry, forKey: key, cost: Int(size), ifUnchangedSince: seen, savedVersion: version)
        try enforceDiskLimit(keeping: id)
    }

    /// Removes `key` from memory and disk (its history is kept).
    public func remove(forKey key: String) async throws {
        let id = try ObjectID(collection: collection, key: key)
        try store.remove(id)
        forget([key])
    }

    /// Drops every model from memory; disk is untouched.
    public func removeAllFromMemory() {
        state.withLock { state in
            for shard in shards { shard.write { $0.memory.removeAll() } }
            state.count = 0
            state.cost = 0
        }
    }

    // MARK: - Listing and housekeeping

    /// The keys stored on disk in the collection, sorted, leaving out expired ones.
    public func keys() throws -> [String] {
        try ensureTable()
        let expired = Set(try store.expiredObjects(in: collection, now: ModelCacheClock.now()).map(\.key))
        return try store.keys(of: Value.self, in: collection).filter { !expired.contains($0) }
    }

    /// Removes every expired object of the collection from disk (and memory); returns their keys.
    /// Reads do this for the object they read; this does it for all.
    @discardableResult
    public func removeExpired() throws -> [String] {
        try ensureTable()
        let now = ModelCacheClock.now()
        var removed: [String] = []
        for id in try store.expiredObjects(in: collection, now: now) where try store.removeIfExpired(id, now: now) {
            removed.append(id.key)
        }
        forget(removed)
        state.withLock { $0.statistics.expired += removed.count }
        return removed
    }

    /// Writes when models were last read to the manifest now, rather than with the next write
    /// (the disk limit evicts by them, in every process).
    public func recordAccessTimes() throws {
        try ensureTable()
        var accesses = state.withLock { state -> [(key: String, time: Int64)] in
            defer { state.unrecordedAccesses = [] }
            return state.unrecordedAccesses
        }
        for shard in shards { accesses += shard.write { $0.memory.takeUnrecordedAccesses() } }
        try store.recordCacheAccess(accesses.map { (try ObjectID(collection: collection, key: $0.key), $0.time) })
    }

    /// What the cache has done so far.
    public var statistics: ModelCacheStatistics {
        var statistics = state.withLock { $0.statistics }
        for shard in shards { statistics.hits += shard.read { state, _ in state.hits } + shard.counted }
        return statistics
    }

    /// How many models memory holds, and their total cost in bytes.
    public var memoryUsage: (count: Int, cost: Int) { state.withLock { ($0.count, $0.cost) } }

    /// The keys in memory, least recently used first (shard by shard, when memory is sharded).
    public var keysInMemory: [String] { shards.flatMap { shard in shard.read { state, _ in state.memory.keysByRecency } } }

}
