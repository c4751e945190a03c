import Foundation

/// What wakes a live session's thread: a side's change sequence moving, a connection lost, a
/// stop. Posted from the change sources' and the connections' threads.
final class LiveSignals: @unchecked Sendable {
    /// What the session's thread is woken for.
    enum Wake: Equatable {
        case stop
        case lost(SyncSide, String)
        /// Changes gathered for the debounce, and each side's sequence when they were taken
        /// (taken together, so that a change coming after is pending again, never lost).
        case changes([SyncSide: Int])
        /// The deadline passed with nothing else to do.
        case deadline
    }

    private let condition = NSCondition()
    private var latest: [SyncSide: Int] = [:]
    private var pendingSince: ContinuousClock.Instant?
    private var lost: [(SyncSide, String)] = []
    private var stopped = false
    private var generation: [SyncSide: Int] = [:]

    /// `side`'s change sequence is `sequence`: changes are pending when it moved.
    func changed(_ side: SyncSide, sequence: Int) {
        condition.lock()
        defer { condition.unlock() }
        if let known = latest[side], known >= sequence { return }
        latest[side] = sequence
        LiveTrace.line("changed \(side) \(sequence)")
        if pendingSince == nil { pendingSince = .now }
        condition.broadcast()
    }

    /// Something changed that no sequence says (a cycle cut short by a busy store).
    func markPending() {
        condition.lock()
        if pendingSince == nil { pendingSince = .now }
        condition.broadcast()
        condition.unlock()
    }

    /// A new connection to `side`: what was said of the one before no longer counts.
    /// - Returns: the connection's number, for ``connectionLost(_:connection:_:)``.
    func connecting(_ side: SyncSide) -> Int {
        condition.lock()
        defer { condition.unlock() }
        generation[side, default: 0] += 1
        lost.removeAll { $0.0 == side }
        return generation[side]!
    }

    func connectionLost(_ side: SyncSide, connection: Int, _ why: String) {
        condition.lock()
        if generation[side] == connection { lost.append((side, why)) }
        condition.broadcast()
        condition.unlock()
    }

    func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
    }

    var stopRequested: Bool {
        condition.lock()
        defer { condition.unlock() }
        return stopped
    }

    /// The highest change sequence each side was seen at.
    var sequences: [SyncSide: Int] {
        condition.lock()
        defer { condition.unlock() }
        return latest
    }

    /// Forgets gathered changes (a cycle is about to read them all) and lost connections (they
    /// were just made again).
    func clearPending() {
        condition.lock()
        pendingSince = nil
        condition.unlock()
    }

    /// Waits for a stop, a lost connection, changes `debounce` old, or `deadline`.
    func wait(debounce: Duration, deadline: ContinuousClock.Instant?) -> Wake {
        condition.lock()
        defer { condition.unlock() }
        while true {
            if stopped { return .stop }
            if let (side, why) = lost.first {
                lost.removeFirst()
                return .lost(side, why)
            }
            let now = ContinuousClock.now
            if let since = pendingSince, now >= since + debounce {
                pendingSince = nil
                return .changes(latest)
            }
            if let deadline, now >= deadline { return .deadline }
            var wake = pendingSince.map { $0 + debounce } ?? deadline
            if let deadline, let due = wake, deadline < due { wake = deadline }
            if let wake {
                _ = condition.wait(until: Date(timeIntervalSinceNow: Self.seconds(wake - now)))
            } else {
                condition.wait()
            }
        }
    }

    /// Sleeps until `deadline` or a stop; false on a stop.
    func sleep(until deadline: ContinuousClock.Instant) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while !stopped {
            let now = ContinuousClock.now
            if now >= deadline { return true }
            _ = condition.wait(until: Date(timeIntervalSinceNow: Self.seconds(deadline - now)))
        }
        return false
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

/// Where a live session's time goes, on stderr when `ARCHIVE_SYNC_LIVE_TRACE` is set: each
/// change sequence heard of, each cycle's steps, in milliseconds since the session began
/// (live-bench keeps the session's stderr; Benchmarks/README.md reads it).
enum LiveTrace {
    static let enabled = ProcessInfo.processInfo.environment["ARCHIVE_SYNC_LIVE_TRACE"] != nil
    private static let origin = ContinuousClock.now

    /// Milliseconds since the first trace of this process.
    static func now() -> Double { LiveSignals.seconds(ContinuousClock.now - origin) * 1000 }

    static func line(_ text: @autoclosure () -> String) {
        guard enabled else { return }
        FileHandle.standardError.write(Data(("live-trace " + String(format: "%.3f ", now()) + text() + "\n").utf8))
    }
}
