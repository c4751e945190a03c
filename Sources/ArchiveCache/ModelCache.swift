import ArchiveStore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A byte limit on what a store keeps on disk, enforced by ``ModelCache`` on each of its writes.
public struct DiskLimit: Sendable, Equatable {
    /// Whose objects count: the cache's collection, or every collection in the store.
    public enum Scope: Sendable, Equatable {
        case collection
        case store
    }

    public var bytes: Int
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
/// - **Freshness**: every write this process makes through the store (the cache's, or
///   `store.save`, `remove`, `restore`, a `scan`) drops the entry before the write returns.
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

    private struct Entry {
        var value: Value
        /// The file read, and its stamp before the read; nil stamp: read again before trusting.
        var file: String
        var stamp: ObjectFileStamp?
        /// The stamp was taken within ``racyWindow`` of the file's modification.
        var racy: Bool
        var expires: Int64?
        /// The follow generation (odd: a watcher follows) in which the entry was last known current.
        var current: Int
    }

    /// Bookkeeping for a key while a load or a save of it is in flight.
    private struct Pending {
        var users = 0
        /// Invalidations of the key seen while any user was in flight.
        var invalidations = 0
        var latestVersion = 0
    }

    private struct Inflight {
        let id: Int
        let task: Task<Value?, any Error>
        let fetches: Bool
    }

    private struct State {
        var memory: MemoryLRU<Entry>
        var pending: [String: Pending] = [:]
        var inflight: [String: Inflight] = [:]
        var nextInflight = 0
        /// Evicted keys whose last use is not yet in the manifest.
        var unrecordedAccesses: [(key: String, time: Int64)] = []
        var statistics = ModelCacheStatistics()
    }

    private enum Lookup {
        case hit(Value)
        case check(file: String, stamp: ObjectFileStamp)
        case miss
    }

    private let state: Mutex<State>
    private let observer = Mutex<Int?>(nil)
    private let tablePrepared = Atomic<Bool>(false)

    /// Files modified less than this long before they were read may hide a rewrite behind an
    /// unchanged stamp (the store's scan uses the same window).
    static var racyWindow: Int64 { 2_000_000_000 }

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
        state = Mutex(State(memory: MemoryLRU(countLimit: countLimit, costLimit: costLimit)))
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
    public func value(forKey key: String) async throws -> Value? {
        if let value = try cachedValue(forKey: key) { return value }
        return try await load(key, fetch: nil, expiresAfter: nil)
    }

    /// The model stored as `key`; when there is none, the result of `fetch`, which is saved
    /// (with `expiresAfter`, if given) before it is returned. Concurrent callers for one key
    /// share one disk read, and one call of `fetch`.
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
    public func cachedValue(forKey key: String) throws -> Value? {
        let now = Self.now()
        let generation = store.followGeneration
        let lookup = state.withLock { state -> Lookup in
            guard let slot = state.memory.slot(of: key) else { return .miss }
            let entry = state.memory.entry(at: slot)
            if let expires = entry.expires, expires <= now { return .miss }
            if generation & 1 == 1, entry.current == generation {
                state.memory.touch(slot, at: now)
                state.statistics.hits += 1
                return .hit(entry.value)
            }
            guard let stamp = entry.stamp, !entry.racy else { return .miss }
            return .check(file: entry.file, stamp: stamp)
        }
        switch lookup {
        case .hit(let value): return value
        case .miss: return nil
        case .check(let file, let stamp):
            let id = try ObjectID(collection: collection, key: key)
            guard store.fileStamp(of: id, file: file) == stamp else { return nil }
            return state.withLock { state -> Value? in
                guard let slot = state.memory.slot(of: key), state.memory.entry(at: slot).stamp == stamp else { return nil }
                state.memory.update(at: slot) { $0.current = generation }
                state.memory.touch(slot, at: now)
                state.statistics.hits += 1
                return state.memory.entry(at: slot).value
            }
        }
    }

    /// Loads `key` from disk (or fetches it), sharing the work with concurrent callers.
    /// Returns nil when it is absent and there is no fetch, or when a fetch-less load that this
    /// call joined found nothing (the caller with a fetch then tries again).
    private func load(_ key: String, fetch: (@Sendable () async throws -> Value)?, expiresAfter: Duration?) async throws -> Value? {
        let id = try ObjectID(collection: collection, key: key)
        let inflight = state.withLock { state -> Inflight in
            state.statistics.misses += 1
            if let running = state.inflight[key], running.fetches || fetch == nil { return running }
            let number = state.nextInflight
            state.nextInflight += 1
            let task = Task { try await self.loadOrFetch(id, fetch: fetch, expiresAfter: expiresAfter, inflight: number) }
            let inflight = Inflight(id: number, task: task, fetches: fetch != nil)
            state.inflight[key] = inflight
            return inflight
        }
        return try await inflight.task.value
    }

    private func loadOrFetch(_ id: ObjectID, fetch: (@Sendable () async throws -> Value)?, expiresAfter: Duration?, inflight: Int) async throws
        -> Value?
    {
        let key = id.key
        defer {
            state.withLock { state in
                if state.inflight[key]?.id == inflight { state.inflight[key] = nil }
            }
        }
        let seen = beginPending(key)
        defer { endPending(key) }
        let generation = store.followGeneration
        let readAt = Self.now()
        if let loaded = try store.loadStamped(Value.self, id: id) {
            try ensureTable()
            let expires = try store.cacheExpiry(of: id)
            if let expires, expires <= Self.now() {
                if try store.removeIfExpired(id, now: Self.now()) { state.withLock { $0.statistics.expired += 1 } }
            } else {
                let racy = loaded.stamp.map { readAt - $0.mtimeNanoseconds < Self.racyWindow } ?? true
                let entry = Entry(value: loaded.value, file: loaded.file, stamp: loaded.stamp, racy: racy, expires: expires, current: generation)
                insert(entry, forKey: key, cost: Int(loaded.stamp?.size ?? 1), ifUnchangedSince: seen)
                state.withLock { $0.statistics.loads += 1 }
                return loaded.value
            }
        }
        guard let fetch else { return nil }
        state.withLock { $0.statistics.fetches += 1 }
        let value = try await fetch()
        try await set(value, forKey: key, expiresAfter: expiresAfter)
        return value
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
        let version = try store.save(value, forKey: key, in: collection)
        let expires = expiresAfter.map { Self.now() + Self.nanoseconds($0) }
        try store.setCacheExpiry(of: id, version: version, expires: expires)
        let file = try fileName(of: id)
        // No stamp: a stat now could see a later writer's file. Without a watcher, the next
        // hit reads the file once and stamps it before reading.
        let entry = Entry(value: value, file: file, stamp: nil, racy: true, expires: expires, current: store.followGeneration)
        let size = store.fileStamp(of: id, file: file)?.size ?? 1
        insert(entry, forKey: key, cost: Int(size), ifUnchangedSince: seen, savedVersion: version)
        try enforceDiskLimit(keeping: id)
    }

    /// Removes `key` from memory and disk (its history is kept).
    public func remove(forKey key: String) async throws {
        let id = try ObjectID(collection: collection, key: key)
        try store.remove(id)
        _ = state.withLock { $0.memory.remove(key) }
    }

    /// Drops every model from memory; disk is untouched.
    public func removeAllFromMemory() {
        state.withLock { $0.memory.removeAll() }
    }

    // MARK: - Listing and housekeeping

    /// The keys stored on disk in the collection, sorted, leaving out expired ones.
    public func keys() throws -> [String] {
        try ensureTable()
        let expired = Set(try store.expiredObjects(in: collection, now: Self.now()).map(\.key))
        return try store.keys(of: Value.self, in: collection).filter { !expired.contains($0) }
    }

    /// Removes every expired object of the collection from disk (and memory); returns their keys.
    /// Reads do this for the object they read; this does it for all.
    @discardableResult
    public func removeExpired() throws -> [String] {
        try ensureTable()
        let now = Self.now()
        var removed: [String] = []
        for id in try store.expiredObjects(in: collection, now: now) where try store.removeIfExpired(id, now: now) {
            removed.append(id.key)
        }
        state.withLock { state in
            for key in removed { state.memory.remove(key) }
            state.statistics.expired += removed.count
        }
        return removed
    }

    /// Writes when models were last read to the manifest now, rather than with the next write
    /// (the disk limit evicts by them, in every process).
    public func recordAccessTimes() throws {
        try ensureTable()
        let accesses = state.withLock { state -> [(key: String, time: Int64)] in
            defer { state.unrecordedAccesses = [] }
            return state.unrecordedAccesses + state.memory.takeUnrecordedAccesses()
        }
        try store.recordCacheAccess(accesses.map { (try ObjectID(collection: collection, key: $0.key), $0.time) })
    }

    /// What the cache has done so far.
    public var statistics: ModelCacheStatistics { state.withLock { $0.statistics } }

    /// How many models memory holds, and their total cost in bytes.
    public var memoryUsage: (count: Int, cost: Int) { state.withLock { ($0.memory.count, $0.memory.totalCost) } }

    /// The keys in memory, least recently used first.
    public var keysInMemory: [String] { state.withLock { $0.memory.keysByRecency } }

    // MARK: - Internals

    private func enforceDiskLimit(keeping id: ObjectID) throws {
        guard let diskLimit else { return }
        try recordAccessTimes()
        let victims = try store.leastRecentlyUsed(
            in: diskLimit.scope == .collection ? collection : nil, over: diskLimit.bytes, keeping: [id])
        guard !victims.isEmpty else { return }
        try store.removeObjects(victims.map(\.id))
        state.withLock { $0.statistics.diskEvictions += victims.count }
    }

    private func insert(_ entry: Entry, forKey key: String, cost: Int, ifUnchangedSince seen: Pending, savedVersion: Int? = nil) {
        let now = Self.now()
        state.withLock { state in
            let pending = state.pending[key] ?? Pending()
            if let savedVersion {
                // Our own save's change is expected; a later version is someone else's.
                if pending.latestVersion > savedVersion { return }
            } else if pending.invalidations != seen.invalidations {
                return
            }
            let evicted = state.memory.insert(key, entry, cost: cost, at: now)
            state.statistics.memoryEvictions += evicted.count
            for (key, time) in evicted { if let time { state.unrecordedAccesses.append((key, time)) } }
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
    /// it takes only this cache's lock.
    private func invalidate(_ changes: [StoreChange]) {
        guard !changes.isEmpty else { return }
        state.withLock { state in
            for change in changes {
                if state.memory.remove(change.id.key) { state.statistics.invalidations += 1 }
                if var pending = state.pending[change.id.key] {
                    pending.invalidations += 1
                    pending.latestVersion = max(pending.latestVersion, change.version)
                    state.pending[change.id.key] = pending
                }
            }
        }
    }

    private func ensureTable() throws {
        if tablePrepared.load(ordering: .acquiring) { return }
        try store.prepareCacheTable()
        tablePrepared.store(true, ordering: .releasing)
    }

    private func fileName(of id: ObjectID) throws -> String {
        store.cacheFileName(of: id)
    }

    static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    /// Nanoseconds since 1970 from the coarse real-time clock (a vDSO read, no system call).
    static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME_COARSE, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }
}
