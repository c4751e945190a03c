import CArchiveShims
import Synchronization

/// A `Mutex` whose locking the thread sanitizer sees.
///
/// On Linux, `Synchronization.Mutex` takes and hands over a contended lock in the kernel
/// (`FUTEX_LOCK_PI`, `FUTEX_UNLOCK_PI`, in the uninstrumented standard library): the
/// sanitizer then sees no acquire and no release, and reports the accesses of two threads
/// that took the lock one after the other as a race, now and then (only when they collided).
/// This one tells it, with its `__tsan_acquire` and `__tsan_release` annotations on the
/// mutex's address, right after taking the lock and right before giving it up. It says
/// nothing more than the lock does: an access outside the lock is still reported.
///
/// Outside a `--sanitize=thread` build the annotations do not exist and cost a test of a
/// null pointer each.
public struct TracedMutex<Value: ~Copyable>: ~Copyable {
    @usableFromInline let mutex: Mutex<Value>

    @inlinable
    public init(_ initialValue: consuming sending Value) {
        mutex = Mutex(initialValue)
    }

    /// Runs `body` with the value, under the lock (as `Mutex.withLock`).
    @inlinable
    public borrowing func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        let address = withUnsafePointer(to: mutex) { UnsafeMutableRawPointer(mutating: $0) }
        return try mutex.withLock { (value: inout sending Value) throws(E) -> sending Result in
            archive_tsan_acquire(address)
            defer { archive_tsan_release(address) }
            return try body(&value)
        }
    }
}

extension TracedMutex: @unchecked Sendable where Value: ~Copyable {}
