import Synchronization

/// A counter that threads and tasks raise at once: fetch closures, reader and writer threads.
public final class Counter: Sendable {
    private let value = Atomic<Int>(0)

    public init() {}

    /// Adds one.
    public func increment() { value.add(1, ordering: .relaxed) }

    /// The count so far.
    public var count: Int { value.load(ordering: .relaxed) }
}
