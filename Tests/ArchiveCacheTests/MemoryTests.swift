import ArchiveCache
import ArchiveStore
import ArchiveWatch
import Foundation
import TestSupport
import Testing

/// The memory layer: least recently used out first, by count and by cost; one load per key.
@Suite("Cache: memory") struct MemoryTests {
    @Test func countLimitEvictsTheLeastRecentlyUsed() async throws {
        try await withStore { store in
            let cache = ModelCache<Person>(store: store, countLimit: 3, costLimit: 1 << 20)
            for key in ["a", "b", "c"] { try await cache.set(Person(name: key, age: 1), forKey: key) }
            _ = try await cache.value(forKey: "a")  // a is now the most recent: b is the least
            try await cache.set(Person(name: "d", age: 1), forKey: "d")
            #expect(cache.keysInMemory == ["c", "a", "d"])
            #expect(cache.statistics.memoryEvictions == 1)
            // b left memory, not the disk: reading it loads its file.
            let loadsBefore = cache.statistics.loads
            #expect(try await cache.value(forKey: "b") == Person(name: "b", age: 1))
            #expect(cache.statistics.loads == loadsBefore + 1)
        }
    }

    @Test func costLimitEvictsTheLeastRecentlyUsed() async throws {
        try await withStore { store in
            let note = String(repeating: "x", count: 200)
            // Each archive is a little over 200 bytes: 500 bytes hold two.
            let cache = ModelCache<Person>(store: store, countLimit: 100, costLimit: 500)
            for key in ["a", "b"] { try await cache.set(Person(name: key, age: 1, note: note), forKey: key) }
            _ = try await cache.value(forKey: "a")
            try await cache.set(Person(name: "c", age: 1, note: note), forKey: "c")
            #expect(cache.keysInMemory == ["a", "c"])
            #expect(cache.memoryUsage.cost <= 500)
            #expect(cache.memoryUsage.count == 2)
        }
    }

    /// Without a watcher each hit checks the file's stamp (the files are aged past the window
    /// in which a stamp is not trusted, or every read would load again); with one, the watcher
    /// keeps entries current. Either way a hit moves its entry at most once per recency window
    /// (100 ms), under the shard's write lock, and otherwise only reads.
    @Test(arguments: [false, true]) func aLargeCacheKeepsItsLimitAndEvictsTheOldestUseAcrossShards(watched: Bool) async throws {
        try await withStore { store in
            // 300 entries: memory is split into shards, each with its own LRU list.
            try store.batch { tx in for n in 0...300 { try tx.save(Person(name: "p\(n)", age: n), forKey: "p\(n)") } }
            for n in 0...300 { try age(personFile(store, "p\(n)")) }
            let watcher = watched ? try store.startWatching(WatchOptions(debounce: .milliseconds(10))) : nil
            defer { watcher?.stop() }
            let cache = ModelCache<Person>(store: store, countLimit: 300, costLimit: 1 << 20)
            for n in 0..<300 { _ = try await cache.value(forKey: "p\(n)") }
            try await Task.sleep(for: .milliseconds(150))  // past the recency window
            for n in 0..<150 { _ = try await cache.value(forKey: "p\(n)") }  // used again: newer
            #expect(cache.statistics.loads == 300, "hits, not loads")
            try await Task.sleep(for: .milliseconds(150))
            _ = try await cache.value(forKey: "p300")
            let inMemory = Set(cache.keysInMemory)
            #expect(cache.memoryUsage.count == 300)
            #expect(inMemory.count == 300)
            #expect((0..<150).allSatisfy { inMemory.contains("p\($0)") })  // none of the recently used went
            #expect(inMemory.contains("p300"))
        }
    }

    @Test func aHitIsServedFromMemory() async throws {
        try await withStore { store in
            let cache = ModelCache<Person>(store: store)
            try store.save(Person(name: "Ada", age: 36), forKey: "ada")
            try age(personFile(store, "ada"))
            #expect(try await cache.value(forKey: "ada") == Person(name: "Ada", age: 36))
            for _ in 0..<10 { #expect(try await cache.value(forKey: "ada") == Person(name: "Ada", age: 36)) }
            #expect(cache.statistics.loads == 1)
            #expect(cache.statistics.hits == 10)
        }
    }

    @Test func concurrentReadersOfAMissingKeyCallTheFetchOnce() async throws {
        try await withStore { store in
            let cache = ModelCache<Person>(store: store)
            let fetches = Counter()
            let results = try await withThrowingTaskGroup(of: Person.self) { group in
                for _ in 0..<32 {
                    group.addTask {
                        try await cache.value(forKey: "grace") {
                            fetches.increment()
                            try await Task.sleep(for: .milliseconds(100))
                            return Person(name: "Grace", age: 85)
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(fetches.count == 1)
            #expect(results.count == 32)
            #expect(results.allSatisfy { $0 == Person(name: "Grace", age: 85) })
            // Read-through saved it: a new cache over the same store finds it on disk.
            #expect(try store.load(Person.self, forKey: "grace") == Person(name: "Grace", age: 85))
        }
    }

    @Test(.timeLimit(.minutes(1))) func readersWithAndWithoutAFetchShareOneFetch() async throws {
        try await withStore { store in
            let cache = ModelCache<Person>(store: store)
            let fetches = Counter()
            let results = try await withThrowingTaskGroup(of: Person?.self) { group in
                for n in 0..<32 {
                    group.addTask {
                        if n % 2 == 0 { return try await cache.value(forKey: "grace") }
                        return try await cache.value(forKey: "grace") {
                            fetches.increment()
                            try await Task.sleep(for: .milliseconds(100))
                            return Person(name: "Grace", age: 85)
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(fetches.count == 1)
            // Readers with a fetch all get the fetched model; those without get it or nil (absent when they looked).
            #expect(results.allSatisfy { $0 == nil || $0 == Person(name: "Grace", age: 85) })
            #expect(results.filter { $0 != nil }.count >= 16)
        }
    }

    @Test func concurrentReadersOfAKeyOnDiskShareOneRead() async throws {
        try await withStore { store in
            try store.save(Person(name: "Ada", age: 36), forKey: "ada")
            try age(personFile(store, "ada"))
            let cache = ModelCache<Person>(store: store)
            try await withThrowingTaskGroup(of: Person?.self) { group in
                for _ in 0..<32 { group.addTask { try await cache.value(forKey: "ada") } }
                for try await person in group { #expect(person == Person(name: "Ada", age: 36)) }
            }
            #expect(cache.statistics.loads == 1)
        }
    }

    @Test func aFetchThatThrowsCachesNothing() async throws {
        struct Offline: Error {}
        try await withStore { store in
            let cache = ModelCache<Person>(store: store)
            await #expect(throws: Offline.self) { try await cache.value(forKey: "ada") { throw Offline() } }
            #expect(try store.keys(of: Person.self).isEmpty)
            let person = try await cache.value(forKey: "ada") { Person(name: "Ada", age: 36) }
            #expect(person == Person(name: "Ada", age: 36))
        }
    }
}
