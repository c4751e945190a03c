import ArchiveCache
import ArchiveLocking
import ArchiveStore
import ArchiveWatch
import Foundation
import Testing

@Suite("Cache: reads under a stripe of the lock") struct ReadMostlyLockTests {
    /// Values that a writer raises one after the other: a reader that ever sees them differ
    /// ran while a write was half done. An array, so that the stripes' copies share heap
    /// storage that a write changes in place.
    struct Row {
        var values = [Int](repeating: 0, count: 64)
        var first: Int { values[0] }
        var isWhole: Bool { values.allSatisfy { $0 == values[0] } }
    }

    @Test func aWriterExcludesReadersOnEveryStripe() async throws {
        // Each reader on a stripe of its own, whatever CPUs the machine has.
        let lock = ReadMostlyLock(Row(), stripes: 4)
        let (readers, writers, writesEach) = (4, 2, 1_000)
        let (started, writing, torn, reads, stale) = (Counter(), Counter(), Counter(), Counter(), Counter())
        // Threads of their own: readers spin until the writers are done, which on a pool of one
        // thread per core would keep the writers from ever starting.
        let done = Counter()
        for reader in 0..<readers {
            Thread {
                defer { done.increment() }
                started.increment()
                // Until the writers are done (they start once every reader runs), so that they overlap.
                while writing.count < writers {
                    let whole = lock.read(onStripe: reader) { row, counter in
                        counter += 1
                        return row.isWhole
                    }
                    reads.increment()
                    if !whole { torn.increment() }
                }
                // After the last write, every stripe's readers see it.
                if lock.read(onStripe: reader, { row, _ in row.first }) != writers * writesEach { stale.increment() }
            }.start()
        }
        for _ in 0..<writers {
            Thread {
                defer { done.increment() }
                while started.count < readers { sched_yield() }
                for _ in 0..<writesEach {
                    lock.write { row in
                        for index in row.values.indices { row.values[index] += 1 }  // a window for a reader to look in
                    }
                }
                writing.increment()
            }.start()
        }
        try await eventually("the readers and the writers to finish") { done.count == readers + writers }
        #expect(torn.count == 0)
        #expect(stale.count == 0)
        // Every reader's count landed in some stripe, and the sum has them all.
        #expect(lock.counted == reads.count)
    }

    @Test func aWriteThatThrowsLeavesEveryStripeReadable() throws {
        struct Refused: Error {}
        let lock = ReadMostlyLock(Row(), stripes: 4)
        #expect(throws: Refused.self) {
            try lock.write { row in
                row.values[0] = 1
                throw Refused()
            }
        }
        // What the body changed before it threw stands, on every stripe (none was left empty).
        for stripe in 0..<4 { #expect(lock.read(onStripe: stripe) { row, _ in row.first } == 1) }
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
