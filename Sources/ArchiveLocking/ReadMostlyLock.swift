import CArchiveShims

/// A lock for state that many threads read at once and few write: a reader takes one of
/// several locks (the one of the CPU it runs on), a writer takes all of them, in order.
///
/// With one lock, every read writes the lock's word, and two threads reading on two cores
/// pass that cache line back and forth: on this project's test host a round trip costs
/// 50-350 ns, more than a whole cache hit. Here readers on different CPUs write only their own
/// stripe (each on a cache line of its own), so reads scale with cores; a write costs one lock
/// per stripe. Each stripe also keeps a counter that its readers may add to (hits, say), since
/// a shared counter would be a shared write again.
///
/// Readers run together: `read` gives the state `inout` only so that reading it in place
/// copies nothing (a borrow through a pointer would retain every array it reads, shared
/// writes again), and its body must not change it.
/// Every lock is a ``TracedMutex``, so the thread sanitizer sees the order.
public final class ReadMostlyLock<State>: @unchecked Sendable {
    @usableFromInline
    final class Stripe: Sendable {
        @usableFromInline let lock = TracedMutex<Int>(0)
        // Keeps the next stripe's lock off this one's cache line (objects are at least 128 bytes apart).
        private let padding: (Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    }

    @usableFromInline let stripes: [Stripe]
    /// The same, reached without retaining them (`Unmanaged`): `stripes` keeps them alive.
    @usableFromInline let unretainedStripes: [Unmanaged<Stripe>]
    /// Read under any one stripe's lock, written under all of them.
    @usableFromInline let state: UnsafeMutablePointer<State>

    /// - Parameter stripes: how many read locks; rounded up to a power of two. One makes it a
    ///   plain mutex.
    public init(_ initialState: State, stripes: Int) {
        var count = 1
        while count < stripes { count *= 2 }
        self.stripes = (0..<count).map { _ in Stripe() }
        unretainedStripes = self.stripes.map { Unmanaged.passUnretained($0) }
        state = .allocate(capacity: 1)
        state.initialize(to: initialState)
    }

    deinit {
        state.deinitialize(count: 1)
        state.deallocate()
    }

    /// One stripe per CPU up to 16 (a power of two): reads on different CPUs share no lock.
    public static var stripesForThisMachine: Int {
        min(16, max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))))
    }

    /// Runs `body` with the state, which other readers may be reading too (so `body` must not
    /// change it), and the counter of this reader's stripe, which it may.
    @inlinable
    public func read<Result: Sendable>(_ body: (inout State, inout Int) throws -> Result) rethrows -> Result {
        let stripe = unretainedStripes[unretainedStripes.count == 1 ? 0 : Int(archive_current_cpu()) & (unretainedStripes.count - 1)]
        // The closures capture the pointer, not `self`: capturing `self` retains it, a write
        // to the object's first cache line, which readers on every core read.
        let state = self.state
        return try stripe._withUnsafeGuaranteedRef { stripe in
            try stripe.lock.withLock { counter in try body(&state.pointee, &counter) }
        }
    }

    /// Runs `body` with the state to change, no reader or writer running.
    @inlinable
    public func write<Result: Sendable>(_ body: (inout State) throws -> Result) rethrows -> Result {
        try lock(from: 0, body)
    }

    @inlinable
    func lock<Result: Sendable>(from index: Int, _ body: (inout State) throws -> Result) rethrows -> Result {
        if index == stripes.count { return try body(&state.pointee) }
        return try stripes[index].lock.withLock { _ in try lock(from: index + 1, body) }
    }

    /// The sum of the stripes' counters.
    public var counted: Int {
        stripes.reduce(0) { sum, stripe in sum + stripe.lock.withLock { $0 } }
    }
}
