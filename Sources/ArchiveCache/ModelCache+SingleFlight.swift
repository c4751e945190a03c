import ArchiveLocking
import ArchiveStore

// Single flight: concurrent readers of a key that is not in memory share one disk read or one fetch.

extension ModelCache {
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
        guard let loaded = try loadStamped(id) else { return nil }
        try ensureTable()
        let racy = loaded.stamp.map { readAt - $0.mtimeNanoseconds < Self.racyWindow } ?? true
        var expires = try expiry(of: id, file: loaded.file, stamp: loaded.stamp, racy: racy)
        if let expired = expires, expired <= ModelCacheClock.now() {
            if try purgeIfExpired(id) { return nil }
            // The manifest no longer has it expired (another process gave the same bytes a new
            // expiry, which leaves the stamp alone): ask it again.
            expires = try manifestExpiry(of: id)
            if let stamp = loaded.stamp { remember(expires, of: key, file: loaded.file, stamp: stamp, racy: racy) }
        }
        let entry = Entry(value: loaded.value, path: loaded.path, stamp: loaded.stamp, racy: racy, expires: expires, current: generation)
        insert(entry, forKey: key, cost: Int(loaded.stamp?.size ?? 1), ifUnchangedSince: seen, countsLoad: true)
        return loaded.value
    }

    /// `id` read from disk: from the file a load found it in before, when that file still has
    /// the stamp it had then (the same version; no manifest lookup), else from the file the
    /// manifest names.
    @inlinable
    func loadStamped(_ id: ObjectID) throws -> StampedObject<Value>? {
        if let known = knownExpiries.withLock({ $0[id.key] }), !known.racy,
            let loaded = try store.loadStamped(Value.self, id: id, file: known.file, ifStamp: known.stamp)
        {
            return loaded
        }
        return try store.loadStamped(Value.self, id: id)
    }

    func beginPending(_ key: String) -> Pending {
        state.withLock { state in
            state.pending[key, default: Pending()].users += 1
            return state.pending[key]!
        }
    }

    func endPending(_ key: String) {
        state.withLock { state in
            state.pending[key]!.users -= 1
            if state.pending[key]!.users == 0 { state.pending[key] = nil }
        }
    }
}

/// Who does a load: the first reader of a key (and its number), or one that waits for it.
@usableFromInline
enum LoadRole<Pending> {
    case leader(Int, seen: Pending)
    case follower(Int)
}
