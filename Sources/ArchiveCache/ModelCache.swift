import ArchiveLocking
import ArchiveStore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

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

    @usableFromInline
    struct KnownExpiry {
        @usableFromInline var stamp: ObjectFileStamp
        @usableFromInline var expires: Int64?

        @usableFromInline init(stamp: ObjectFileStamp, expires: Int64?) {
            self.stamp = stamp
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
    private let reader = TracedMutex<CacheMetadataReader?>(nil)
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

    /// What memory has for `key`: a current hit, a stamp to check, or nothing. `readOnly`
    /// (sharded, under a read lock), a current hit past its recency window is `.touch`
    /// instead: it must be marked used, a write.
    @inlinable
    static func lookup(_ key: String, in memory: borrowing MemoryLRU<Entry>, now: Int64, generation: Int, readOnly: Bool) -> Lookup {
        // Field by field: a copy of the whole entry would retain its path and its value.
        guard let slot = memory.slot(of: key) else { return .miss }
        if let expires = memory.nodes[slot].entry.unsafelyUnwrapped.expires, expires <= now { return .miss }
        if generation & 1 == 1, memory.nodes[slot].entry.unsafelyUnwrapped.current == generation {
            return readOnly && !memory.wasUsed(slot, within: recencyWindow, of: now) ? .touch : .hit(memory.nodes[slot].entry.unsafelyUnwrapped.value)
        }
        guard let stamp = memory.nodes[slot].entry.unsafelyUnwrapped.stamp, !memory.nodes[slot].entry.unsafelyUnwrapped.racy else {
            return .miss
        }
        return .check(path: memory.nodes[slot].entry.unsafelyUnwrapped.path, stamp: stamp)
    }

    @usableFromInline
    func followGeneration() -> Int { store.followGeneration }

    /// The entry's value if its file still has `stamp` (one `fstatat`). Sharded, an entry
    /// already current and used within the recency window is a read; otherwise a write marks
    /// it current and used.
    @inlinable
    func validate(_ key: String, in shard: Shard, path: String, stamp: ObjectFileStamp, generation: Int, now: Int64) -> Value? {
        guard store.fileStamp(atPath: path) == stamp else { return nil }
        if shards.count > 1,
            let value = shard.read({ state, hits -> Value? in
                guard let slot = state.memory.slot(of: key), state.memory.nodes[slot].entry.unsafelyUnwrapped.stamp == stamp,
                    state.memory.nodes[slot].entry.unsafelyUnwrapped.current == generation,
                    state.memory.wasUsed(slot, within: Self.recencyWindow, of: now)
                else { return nil }
                hits += 1
                return state.memory.nodes[slot].entry.unsafelyUnwrapped.value
            })
        {
            return value
        }
        return shard.write { state -> Value? in
            guard let slot = state.memory.slot(of: key), state.memory.entry(at: slot).stamp == stamp else { return nil }
            state.memory.update(at: slot) { $0.current = generation }
            state.memory.touch(slot, at: now)
            state.hits += 1
            return state.memory.entry(at: slot).value
        }
    }

    @inlinable
    func shard(for key: String) -> Shard {
        shards.count == 1 ? shards[0] : shards[Self.shardIndex(key, shards.count)]
    }

    /// FNV-1a of the key's UTF-8 bytes, masked to a shard (`count` is a power of two).
    @inlinable
    static func shardIndex(_ key: String, _ count: Int) -> Int {
        // Over the contiguous bytes: iterating `key.utf8` goes through its index per byte,
        // which cost as much as the rest of the shard's lookup.
        var key = key
        let hash = key.withUTF8 { bytes in
            var hash: UInt32 = 2_166_136_261
            for byte in bytes { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
            return hash
        }
        return Int(hash) & (count - 1)
    }

    /// Loads `key` from disk (or fetches it), sharing the work with concurrent callers: the
    /// first does it, the others wait for its outcome. Returns nil when it is absent and there
    /// is no fetch, or when the load this call joined had no fetch and found nothing (a caller
    /// with a fetch then tries again).
    @inlinable
    func load(_ key: String, fetch: (@Sendable () async throws -> Value)?, expiresAfter: Duration?) async throws -> Value? {
        let id = try ObjectID(collection: collection, key: key)
        while true {
            let role = state.withLock { state -> LoadRole<Pending> in
                state.statistics.misses += 1
                // A load without a fetch that finds nothing ends with nil; a joiner with a
                // fetch then comes round again and leads a load of its own.
                if let running = state.inflight[key] { return .follower(running.id) }
                let number = state.nextInflight
                state.nextInflight += 1
                state.inflight[key] = Inflight(id: number)
                state.pending[key, default: Pending()].users += 1
                return .leader(number, seen: state.pending[key]!)
            }
            switch role {
            case .follower(let number):
                let outcome: Value?? = try await withCheckedThrowingContinuation { continuation in
                    let joined = state.withLock { state in
                        guard state.inflight[key]?.id == number else { return false }
                        state.inflight[key]!.waiters.append(continuation)
                        return true
                    }
                    if !joined { continuation.resume(returning: .none) }  // it finished meanwhile: start over
                }
                if let outcome { return outcome }
            case .leader(let number, let seen):
                let result: Result<Value?, any Error>
                do {
                    if let value = try loadFromDisk(id, seen: seen) {
                        result = .success(value)
                    } else if let fetch {
                        result = .success(try await fetchAndSave(id, fetch: fetch, expiresAfter: expiresAfter))
                    } else {
                        result = .success(nil)
                    }
                } catch {
                    result = .failure(error)
                }
                let waiters = state.withLock { state in
                    state.pending[key]!.users -= 1
                    if state.pending[key]!.users == 0 { state.pending[key] = nil }
                    guard state.inflight[key]?.id == number else { return [CheckedContinuation<Value??, any Error>]() }
                    return state.inflight.removeValue(forKey: key)!.waiters
                }
                for waiter in waiters { waiter.resume(with: result.map { .some($0) }) }
                return try result.get()
            }
        }
    }

    @usableFromInline
    func fetchAndSave(_ id: ObjectID, fetch: @Sendable () async throws -> Value, expiresAfter: Duration?) async throws -> Value {
        state.withLock { $0.statistics.fetches += 1 }
        let value = try await fetch()
        try await set(value, forKey: id.key, expiresAfter: expiresAfter)
        return value
    }

    /// Reads and decodes `id`'s file and keeps it in memory (unless the key changed since
    /// `seen`); nil when absent or expired (an expired object is removed from disk).
    @inlinable
    func loadFromDisk(_ id: ObjectID, seen: Pending) throws -> Value? {
        let key = id.key
        let generation = followGeneration()
        let readAt = ModelCacheClock.now()
        guard let loaded = try store.loadStamped(Value.self, id: id) else { return nil }
        try ensureTable()
        var expires = try expiry(of: id, stamp: loaded.stamp)
        if let expired = expires, expired <= ModelCacheClock.now() {
            if try purgeIfExpired(id) { return nil }
            // The manifest no longer has it expired (another process gave the same bytes a new
            // expiry, which leaves the stamp alone): ask it again.
            expires = try manifestExpiry(of: id)
            if let stamp = loaded.stamp { remember(expires, of: key, stamp: stamp) }
        }
        let racy = loaded.stamp.map { readAt - $0.mtimeNanoseconds < Self.racyWindow } ?? true
        let entry = Entry(value: loaded.value, path: loaded.path, stamp: loaded.stamp, racy: racy, expires: expires, current: generation)
        insert(entry, forKey: key, cost: Int(loaded.stamp?.size ?? 1), ifUnchangedSince: seen, countsLoad: true)
        return loaded.value
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
        let path = directory + store.cacheFileName(of: id)
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

    // MARK: - Internals

    private func enforceDiskLimit(keeping id: ObjectID) throws {
        guard let diskLimit else { return }
        try recordAccessTimes()
        let victims = try store.leastRecentlyUsed(
            in: diskLimit.scope == .collection ? collection : nil, over: diskLimit.bytes, keeping: [id])
        guard !victims.isEmpty else { return }
        let evicted = try store.removeObjects(victims)
        state.withLock { $0.statistics.diskEvictions += evicted }
    }

    /// Keeps `entry` in memory unless the key changed since `seen` was taken (for a save:
    /// unless someone else's later version was seen).
    @inlinable
    func insert(
        _ entry: Entry, forKey key: String, cost: Int, ifUnchangedSince seen: Pending, savedVersion: Int? = nil, countsLoad: Bool = false
    ) {
        let now = ModelCacheClock.now()
        let shard = shard(for: key)
        // Checked and inserted under the cache's lock, so that an invalidation cannot fall between.
        state.withLock { state in
            if countsLoad { state.statistics.loads += 1 }
            let pending = state.pending[key] ?? Pending()
            if let savedVersion {
                // Our own save's change is expected; a later version is someone else's.
                if pending.latestVersion > savedVersion { return }
            } else if pending.invalidations != seen.invalidations {
                return
            }
            let change = shard.write { $0.memory.insert(key, entry, cost: cost, at: now) }
            state.count += change.count
            state.cost += change.cost
            // Over a limit: the least recently used go. Each shard's oldest is the end of its
            // list; the oldest of those is the cache's (to within the recency window).
            while state.count > memoryCountLimit || state.cost > memoryCostLimit {
                var oldest: (shard: Shard, time: Int64)?
                for candidate in shards {
                    if let time = candidate.read({ state, _ in state.memory.oldestUse(sparing: key) }), time < oldest?.time ?? .max {
                        oldest = (candidate, time)
                    }
                }
                guard let victimShard = oldest?.shard,
                    let victim = victimShard.write({ $0.memory.evictLeastRecentlyUsed(sparing: key) })
                else { break }
                state.count -= 1
                state.cost -= victim.cost
                state.statistics.memoryEvictions += 1
                if let time = victim.unrecordedAccess { state.unrecordedAccesses.append((victim.key, time)) }
            }
            if state.count > memoryCountLimit || state.cost > memoryCostLimit, let removed = shard.write({ $0.memory.remove(key) }) {
                // Alone it breaks a limit (a count limit of zero, or a cost above the limit): not kept.
                state.count -= 1
                state.cost -= removed
                state.statistics.memoryEvictions += 1
            }
        }
    }

    /// Drops keys from memory (not from disk).
    private func forget(_ keys: [String]) {
        state.withLock { state in
            for key in keys {
                if let cost = shard(for: key).write({ $0.memory.remove(key) }) {
                    state.count -= 1
                    state.cost -= cost
                }
            }
        }
    }

    private func beginPending(_ key: String) -> Pending {
        state.withLock { state in
            state.pending[key, default: Pending()].users += 1
            return state.pending[key]!
        }
    }

    private func endPending(_ key: String) {
        state.withLock { state in
            state.pending[key]!.users -= 1
            if state.pending[key]!.users == 0 { state.pending[key] = nil }
        }
    }

    /// Drops changed keys from memory. Runs inside the store's write (see `observeChanges`):
    /// it takes only this cache's locks.
    private func invalidate(_ changes: [StoreChange]) {
        guard !changes.isEmpty else { return }
        state.withLock { state in
            for change in changes {
                let key = change.id.key
                if let cost = shard(for: key).write({ $0.memory.remove(key) }) {
                    state.count -= 1
                    state.cost -= cost
                    state.statistics.invalidations += 1
                }
                if var pending = state.pending[key] {
                    pending.invalidations += 1
                    pending.latestVersion = max(pending.latestVersion, change.version)
                    state.pending[key] = pending
                }
            }
        }
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
    func expiry(of id: ObjectID, stamp: ObjectFileStamp?) throws -> Int64? {
        if let stamp, let known = knownExpiries.withLock({ $0[id.key] }), known.stamp == stamp { return known.expires }
        let expires = try manifestExpiry(of: id)
        if let stamp { remember(expires, of: id.key, stamp: stamp) }
        return expires
    }

    @inlinable
    func remember(_ expires: Int64?, of key: String, stamp: ObjectFileStamp) {
        knownExpiries.withLock { known in
            if known.count >= max(memoryCountLimit * 2, 10_000) { known.removeAll() }
            known[key] = KnownExpiry(stamp: stamp, expires: expires)
        }
    }

    /// The expiry the manifest has for `id`'s current version.
    @usableFromInline
    func manifestExpiry(of id: ObjectID) throws -> Int64? {
        try metadataReader().expiry(of: id)
    }

    private func metadataReader() throws -> CacheMetadataReader {
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

/// Who does a load: the first reader of a key (and its number), or one that waits for it.
@usableFromInline
enum LoadRole<Pending> {
    case leader(Int, seen: Pending)
    case follower(Int)
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
