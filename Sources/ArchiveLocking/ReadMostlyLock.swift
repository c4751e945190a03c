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
/// Each stripe holds its own copy of the state, and its readers get that copy `inout`: a
/// copy of a struct shares its arrays' storage (copy-on-write), so the copies cost a few
/// pointers, and an `inout` access reads in place, where a borrowed read of shared state
/// retains every array it calls into (shared writes again). A writer empties the other
/// stripes' copies, so that the first stripe's storage is its alone and changes in place,
/// then hands the copies out again. Nothing is shared that two threads write; every lock is
/// a ``TracedMutex``, so the thread sanitizer sees the order.
public final class ReadMostlyLock<State: Sendable>: Sendable {
    @usableFromInline
    struct Local: Sendable {
        /// Nil only while a writer runs.
        @usableFromInline var state: State?
        @usableFromInline var counter = 0
    }

    @usableFromInline
    final class Stripe: Sendable {
        @usableFromInline let lock: TracedMutex<Local>
        // Keeps the next stripe's lock off this one's cache line (objects are at least 128 bytes apart).
        private let padding: (Int, Int, Int, Int, Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0)

        init(_ state: State) { lock = TracedMutex(Local(state: state)) }
    }

    @usableFromInline let stripes: [Stripe]
    /// The same, reached without retaining them (`Unmanaged`): `stripes` keeps them alive, and
    /// a retain would write the stripe object's first cache line.
    @usableFromInline let unretainedStripes: [Unmanaged<Stripe>]

    /// - Parameter stripes: how many read locks; rounded up to a power of two. One makes it a
    ///   plain mutex.
    public init(_ initialState: State, stripes: Int) {
        var count = 1
        while count < stripes { count *= 2 }
        self.stripes = (0..<count).map { _ in Stripe(initialState) }
        unretainedStripes = self.stripes.map { Unmanaged.passUnretained($0) }
    }

    /// One stripe per CPU up to 16 (a power of two): reads on different CPUs share no lock.
    public static var stripesForThisMachine: Int {
        min(16, max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))))
    }

    /// Runs `body` with this stripe's copy of the state, to read only (other readers read the
    /// same storage; a change would be lost at the next write), and the stripe's counter,
    /// which it may change.
    @inlinable
    public func read<Result: Sendable>(_ body: (inout State, inout Int) throws -> Result) rethrows -> Result {
        try read(onStripe: unretainedStripes.count == 1 ? 0 : Int(archive_current_cpu()), body)
    }

    /// As ``read(_:)``, on stripe `index` (modulo their count) whatever the CPU: for tests.
    @inlinable
    package func read<Result: Sendable>(onStripe index: Int, _ body: (inout State, inout Int) throws -> Result) rethrows -> Result {
        try unretainedStripes[index & (unretainedStripes.count - 1)]._withUnsafeGuaranteedRef { stripe in
            try stripe.lock.withLock { local in try body(&local.state!, &local.counter) }
        }
    }

    /// Runs `body` with the state to change, no reader or writer running.
    @inlinable
    public func write<Result: Sendable>(_ body: (inout State) throws -> Result) rethrows -> Result {
        try stripes[0].lock.withLock { first in try lock(from: 1, &first.state!, body) }
    }

    /// Takes stripe `index` and the ones after it, emptying their copies while `body` changes
    /// `state` (the first stripe's), then gives them the new state.
    @inlinable
    func lock<Result: Sendable>(from index: Int, _ state: inout State, _ body: (inout State) throws -> Result) rethrows -> Result {
        if index == stripes.count { return try body(&state) }
        return try stripes[index].lock.withLock { local in
            local.state = nil
            defer { local.state = state }
            return try lock(from: index + 1, &state, body)
        }
    }

    /// The sum of the stripes' counters.
    public var counted: Int {
        stripes.reduce(0) { sum, stripe in sum + stripe.lock.withLock { $0.counter } }
    }
}
