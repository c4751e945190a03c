import Foundation
import Synchronization

/// `(0..<count).map(transform)` on every core, for work that is mostly system calls (stat,
/// create, write) and so scales with cores. Runs serially below `threshold` items.
@discardableResult
func parallelMap<T: Sendable>(_ count: Int, threshold: Int = 1024, _ transform: @Sendable (Int) throws -> T) throws -> [T] {
    let lanes = count >= threshold ? max(1, ProcessInfo.processInfo.activeProcessorCount) : 1
    if lanes == 1 { return try (0..<count).map(transform) }
    let results = Mutex<[Int: [T]]>([:])
    let failure = Mutex<(any Error)?>(nil)
    let chunk = (count + lanes - 1) / lanes
    DispatchQueue.concurrentPerform(iterations: lanes) { lane in
        var local: [T] = []
        local.reserveCapacity(chunk)
        for index in lane * chunk..<min(count, (lane + 1) * chunk) {
            do {
                local.append(try transform(index))
            } catch {
                failure.withLock { $0 = $0 ?? error }
                return
            }
        }
        results.withLock { $0[lane] = local }
    }
    if let error = failure.withLock({ $0 }) { throw error }
    return results.withLock { parts in (0..<lanes).flatMap { parts[$0] ?? [] } }
}

/// Runs `first` and `second` at the same time, on two threads.
func concurrently<A: Sendable, B: Sendable>(_ first: @Sendable () throws -> A, _ second: @Sendable () throws -> B) throws -> (A, B) {
    let a = Mutex<Result<A, any Error>?>(nil)
    let b = Mutex<Result<B, any Error>?>(nil)
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
