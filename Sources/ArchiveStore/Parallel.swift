import ArchiveLocking
import Foundation

/// `(0..<count).map(transform)` on every core, for work that is mostly system calls (stat,
/// create, write) and so scales with cores. Runs serially below `threshold` items. Each core
/// fills its own part of the one result array (plain values only: nothing to release when a
/// transform throws halfway).
@discardableResult
func parallelMap<T: Sendable & BitwiseCopyable>(_ count: Int, threshold: Int = 1024, _ transform: @Sendable (Int) throws -> T) throws -> [T] {
    let lanes = count >= threshold ? max(1, ProcessInfo.processInfo.activeProcessorCount) : 1
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

/// Runs `first` and `second` at the same time, on two threads.
func concurrently<A: Sendable, B: Sendable>(_ first: @Sendable () throws -> A, _ second: @Sendable () throws -> B) throws -> (A, B) {
    let a = TracedMutex<Result<A, any Error>?>(nil)
    let b = TracedMutex<Result<B, any Error>?>(nil)
    DispatchQueue.concurrentPerform(iterations: 2) { index in
        if index == 0 {
            let result = Result { try first() }
            a.withLock { $0 = result }
        } else {
            let result = Result { try second() }
            b.withLock { $0 = result }
        }
    }
    return (try a.withLock { $0! }.get(), try b.withLock { $0! }.get())
}
