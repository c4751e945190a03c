import ArchiveCache
import ArchiveStore
import ArchiveWatch
import Foundation
import TestSupport
import Testing

@Suite("Cache: hits under the read lock, beside saves") struct ShardedReadTests {
    @Test func hitsServedUnderTheReadLockAreCounted() async throws {
        try await withWarmWatchedCache { cache in
            let before = cache.statistics
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<2 {
                    group.addTask {
                        for round in 0..<20 {
                            for n in 0..<300 {
                                let age = try await cache.value(forKey: "p\(n)")?.age
                                #expect(age == n, "round \(round)")
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(cache.statistics.loads == before.loads)
            #expect(cache.statistics.hits - before.hits == 2 * 20 * 300)
        }
    }

    @Test func aSaveIsReadNextWhileOthersRead() async throws {
        try await withWarmWatchedCache { cache in
            let saved = Counter()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    while saved.count == 0 {
                        for n in 0..<300 {
                            let age = try await cache.value(forKey: "p\(n)")?.age
                            // Old or new, never anything else.
                            #expect(age == n || age == n + 1000)
                        }
                    }
                }
                for n in 0..<300 {
                    try await cache.set(Person(name: "p\(n)", age: n + 1000), forKey: "p\(n)")
                    #expect(try await cache.value(forKey: "p\(n)")?.age == n + 1000)
                }
                saved.increment()
                try await group.waitForAll()
            }
        }
    }

    /// A cache of 300 people `p0`... (`age` n), all in memory, over a watched store: sharded,
    /// so hits take the read lock.
    func withWarmWatchedCache(_ body: (ModelCache<Person>) async throws -> Void) async throws {
        try await withStore { store in
            try store.batch { tx in for n in 0..<300 { try tx.save(Person(name: "p\(n)", age: n), forKey: "p\(n)") } }
            let watcher = try store.startWatching(WatchOptions(debounce: .milliseconds(10)))
            defer { watcher.stop() }
            let cache = ModelCache<Person>(store: store, countLimit: 300, costLimit: 1 << 20)
            for n in 0..<300 { _ = try await cache.value(forKey: "p\(n)") }
            try await body(cache)
        }
    }
}
