import ArchiveLocking
import Foundation
import TestSupport
import Testing

@Suite("ReadMostlyLock: readers on stripes, one writer over all") struct ReadMostlyLockTests {
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
                    // Let the writers run: four spinning readers on a 2-core machine running the
                    // whole suite kept them (and every other test) off the CPUs for minutes.
                    sched_yield()
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
        let deadline = ContinuousClock.now + .seconds(60)
        while done.count < readers + writers {
            try #require(ContinuousClock.now < deadline, "the readers and the writers did not finish")
            try await Task.sleep(for: .milliseconds(5))
        }
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
}
