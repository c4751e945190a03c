import ArchiveCache
import ArchiveLocking
import ArchiveStore
import ArchiveWatch
import Foundation
import Testing

@Suite("Cache: reads under a stripe of the lock") struct ReadMostlyLockTests {
    /// Two fields a writer changes one after the other, with work in between: a reader that
    /// ever sees them differ ran while a write was half done.
    struct Pair {
        var first = 0
        var second = 0
    }

    @Test func aWriterExcludesReadersOnEveryStripe() async throws {
        // Each reader on a stripe of its own, whatever CPUs the machine has.
        let lock = ReadMostlyLock(Pair(), stripes: 4)
        let readers = 4
        let writes = 2_000
        let (started, writerDone, torn, reads, stale) = (Counter(), Counter(), Counter(), Counter(), Counter())
        // Threads of their own: readers spin until the writer is done, which on a pool of one
        // thread per core would keep the writer from ever starting.
        let done = Counter()
        for reader in 0..<readers {
            Thread {
                defer { done.increment() }
                started.increment()
                // Until the writer is done (it starts once every reader runs), so that they overlap.
                while writerDone.count == 0 {
                    let seen = lock.read(onStripe: reader) { pair, counter in
                        counter += 1
                        return (pair.first, pair.second)
                    }
                    reads.increment()
                    if seen.0 != seen.1 { torn.increment() }
                }
                // After the last write, every stripe's readers see it.
                if lock.read(onStripe: reader, { pair, _ in pair.first }) != writes { stale.increment() }
            }.start()
        }
        Thread {
            defer { done.increment() }
            while started.count < readers { sched_yield() }
            for _ in 0..<writes {
                lock.write { pair in
                    pair.first += 1
                    var spin = 0
                    for n in 0..<2_000 { spin &+= n &* pair.first }  // a window for a reader to look in
                    pair.second = pair.first + (spin == -1 ? 1 : 0)
                }
            }
            writerDone.increment()
        }.start()
        try await eventually("the readers and the writer to finish") { done.count == readers + 1 }
        #expect(torn.count == 0)
        #expect(stale.count == 0)
        // Every reader's count landed in some stripe, and the sum has them all.
        #expect(lock.counted == reads.count)
    }

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
