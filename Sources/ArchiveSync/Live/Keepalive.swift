import Foundation

/// One side's keepalive of a live connection (``Wire/Live``), for both the client and the far
/// side: every frame goes out through ``send(_:_:)`` (one at a time, whatever the thread), a
/// thread pings after ``interval`` without sending, and calls `silent` once when the other
/// side has said nothing for ``Wire/Live/silence(after:)`` while this side was listening.
final class Keepalive: @unchecked Sendable {
    let interval: Duration
    private let channel: FrameChannel
    // Guarded by `condition`.
    private let condition = NSCondition()
    private var lastSent = ContinuousClock.now
    private var lastHeard = ContinuousClock.now
    private var listening = true
    private var stopped = false
    /// One frame at a time.
    private let sending = NSLock()

    init(channel: FrameChannel, interval: Duration) {
        self.channel = channel
        self.interval = interval
    }

    /// Starts the pinging thread; `silent` gets how long the other side was silent.
    func start(silent: @escaping @Sendable (Duration) -> Void) {
        let thread = Thread { [self] in run(silent) }
        thread.name = "archive-sync keepalive"
        thread.start()
    }

    func send(_ kind: Wire.Kind, _ payload: [UInt8]) throws {
        sending.lock()
        defer { sending.unlock() }
        try channel.send(kind, payload)
        condition.lock()
        lastSent = .now
        condition.unlock()
    }

    /// A frame came from the other side.
    func heard() {
        condition.lock()
        lastHeard = .now
        condition.unlock()
    }

    /// Whether silence counts now: the far side counts it only while it waits for a request
    /// (while it works on one, the client's pings wait unread in the pipe).
    func listening(_ value: Bool) {
        condition.lock()
        listening = value
        lastHeard = .now
        condition.unlock()
    }

    func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
    }

    private func run(_ silent: @Sendable (Duration) -> Void) {
        let silence = Wire.Live.silence(after: interval)
        let tick = interval / 4
        while true {
            condition.lock()
            _ = condition.wait(until: Date(timeIntervalSinceNow: LiveSignals.seconds(tick)))
            if stopped {
                condition.unlock()
                return
            }
            let now = ContinuousClock.now
            let ping = now - lastSent >= interval
            let quiet = now - lastHeard
            let dead = listening && quiet >= silence
            condition.unlock()
            if dead { return silent(quiet) }
            if ping { try? send(.ping, []) }
        }
    }
}
