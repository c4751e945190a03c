import ArchiveLocking
import Foundation

/// What a bucket replica needs of an object store: the four S3 calls it makes, with the one
/// condition it relies on. ``S3Client`` is the real one; the unit tests of the format use an
/// in-memory one.
package protocol BucketStorage: Sendable {
    /// Writes `data` at `key`. With `ifAbsent` (S3's `If-None-Match: *`) a key that exists is
    /// left alone and the call returns false, unless a retried write finds `data` there (its
    /// first try landed, as the S3 client reads back a refusal of a retry); otherwise it
    /// returns true.
    func write(_ key: String, _ data: Data, ifAbsent: Bool) async throws -> Bool
    /// The object's bytes, or nil when there is no object at `key`.
    func read(_ key: String) async throws -> Data?
    /// Every key under `prefix` after `startAfter`, in byte order (each page of the listing a request).
    func keys(under prefix: String, after startAfter: String?) async throws -> [String]
    /// One page of those keys (one request), and whether more follow it.
    func keyPage(under prefix: String, after startAfter: String?) async throws -> (keys: [String], more: Bool)
    func delete(_ key: String) async throws
}

extension BucketStorage {
    /// A storage without pages answers in one.
    package func keyPage(under prefix: String, after startAfter: String?) async throws -> (keys: [String], more: Bool) {
        (try await keys(under: prefix, after: startAfter), false)
    }
}

/// Runs `body` on Swift's concurrency pool and blocks this thread until it returns.
///
/// The replica interface is synchronous and a sync runs on a thread of its own (see
/// `Sync.run()`): blocking that thread on a semaphore costs nothing, while `body`'s requests
/// only await on the pool. Never call this from a task on the pool itself: it would hold one
/// of its few threads.
package func blocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let result = TracedMutex<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        do {
            let value = try await body()
            result.withLock { $0 = .success(value) }
        } catch {
            result.withLock { $0 = .failure(error) }
        }
        done.signal()
    }
    done.wait()
    return try result.withLock { $0! }.get()
}

/// `transform` of each element, at most `width` at once, in the order of `items`.
package func concurrentMap<T: Sendable, R: Sendable>(
    _ items: [T], width: Int = 16, _ transform: @escaping @Sendable (T) async throws -> R
) async throws -> [R] {
    try await withThrowingTaskGroup(of: (Int, R).self) { group in
        var results = [R?](repeating: nil, count: items.count)
        var next = 0
        func start() {
            let index = next
            let item = items[index]
            group.addTask { (index, try await transform(item)) }
            next += 1
        }
        while next < min(width, items.count) { start() }
        while let (index, value) = try await group.next() {
            results[index] = value
            if next < items.count { start() }
        }
        return results.map { $0! }
    }
}
