import ArchiveLocking
import ArchiveStore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

// Memory: the sharded LRU lists behind a ModelCache's hits, and what goes into and out of them.

extension ModelCache {
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
    func forget(_ keys: [String]) {
        state.withLock { state in
            for key in keys {
                if let cost = shard(for: key).write({ $0.memory.remove(key) }) {
                    state.count -= 1
                    state.cost -= cost
                }
            }
        }
    }

    /// Drops changed keys from memory. Runs inside the store's write (see `observeChanges`):
    /// it takes only this cache's locks.
    func invalidate(_ changes: [StoreChange]) {
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
}
