import ArchiveLocking
import Foundation

/// `(0..<count).map(transform)` on every core (or this thread's share of them, see
/// ``CoreShare``), for work that is mostly system calls (stat, create, write) and so scales
/// with cores. Runs serially below `threshold` items. Each core fills its own part of the one
/// result array (plain values only: nothing to release when a transform throws halfway).
@discardableResult
func parallelMap<T: Sendable & BitwiseCopyable>(_ count: Int, threshold: Int = 1024, _ transform: @Sendable (Int) throws -> T) throws -> [T] {
    let lanes = parallelLanes(count, threshold: threshold)
    if lanes == 1 { return try (0..<count).map(transform) }
    let failure = TracedMutex<(any Error)?>(nil)
    let chunk = (count + lanes - 1) / lanes
    let results = try [T](unsafeUninitializedCapacity: count) { buffer, initialized in
        nonisolated(unsafe) let base = buffer.baseAddress!
        DispatchQueue.concurrentPerform(iterations: lanes) { lane in
            for index in lane * chunk..<min(count, (lane + 1) * chunk) {
                do {
                    (base + index).initialize(to: try transform(index))
                } catch {
                    failure.withLock { $0 = $0 ?? error }
                    return
                }
            }
        }
        if let error = failure.withLock({ $0 }) { throw error }
        initialized = count
    }
    return results
}

/// How many threads `parallelMap` runs `count` items on, from this thread.
func parallelLanes(_ count: Int, threshold: Int) -> Int {
    count >= threshold ? max(1, ProcessInfo.processInfo.activeProcessorCount / CoreShare.ways) : 1
}

/// How many ways the cores are split between work running at once in this process, as
/// `parallelMap` on this thread sees it: 1 (the default) lets it use every core.
package enum CoreShare {
    @TaskLocal package static var ways = 1
}

/// Runs two independent calls at once, on this thread and one more.
///
/// With `splittingCores`, `parallelMap` inside each call uses half the cores: two stores'
/// scans or writes then keep one core each busy, instead of four lanes crowding two cores
/// and two threads creating files in one directory queueing on its lock.
package func inParallel<A: Sendable, B: Sendable>(
    splittingCores: Bool = false, _ first: @escaping @Sendable () throws -> A, _ second: @escaping @Sendable () throws -> B
) throws -> (A, B) {
    let ways = splittingCores ? CoreShare.ways * 2 : CoreShare.ways
    let other = InBackground { try CoreShare.$ways.withValue(ways) { try second() } }
    let firstResult = Result { try CoreShare.$ways.withValue(ways) { try first() } }
    let secondResult = Result { try other.value() }
    return (try firstResult.get(), try secondResult.get())
}

/// A value computed on a thread of its own.
package final class InBackground<T: Sendable>: Sendable {
    private let result = TracedMutex<Result<T, any Error>?>(nil)
    private let done = DispatchSemaphore(value: 0)

    package init(_ body: @escaping @Sendable () throws -> T) {
        Thread { [self] in
            let value = Result { try body() }
            result.withLock { $0 = value }
            done.signal()
        }.start()
    }

    /// Waits for the value, or rethrows what the computation threw.
    package func value() throws -> T {
        done.wait()
        done.signal()
        return try result.withLock { $0! }.get()
    }
}
