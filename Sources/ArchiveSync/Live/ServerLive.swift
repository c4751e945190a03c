import ArchiveStore
import ArchiveWatch
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The far side of a live session (`serve --stdio` after ``Wire/Request/watch(keepalive:debounce:)``):
/// watches its store (or follows the manifest of the watcher that holds its lease), sends
/// ``Wire/Kind/changed`` when the change sequence moves, pings after `keepalive` of its own
/// silence, and ends the process after ``Wire/Live/silence(after:)`` without a word from the
/// client while it waits for one (a partitioned client never closes the pipe; its ssh may
/// linger): the store's locks go with the process, so the client's reconnection finds them free.
final class ServerLive: @unchecked Sendable {
    private let channel: FrameChannel
    private let keepalive: Duration
    // Guarded by `condition`.
    private let condition = NSCondition()
    private var lastSent = ContinuousClock.now
    private var lastHeard = ContinuousClock.now
    private var waiting = false
    private var notified: Int
    private var stopped = false
    private var source: LocalChangeSource?
    /// One frame at a time from the server's thread, the notices and the keepalive.
    private let sending = NSLock()

    init(channel: FrameChannel, keepalive: Duration, store: ArchiveStore) throws {
        self.channel = channel
        self.keepalive = keepalive
        notified = try store.changeSequence()
    }

    /// Starts watching and pinging: after the `ok` of the watch request is sent.
    func start(store: ArchiveStore, debounce: Duration) throws {
        source = try LocalChangeSource(store: store, watch: WatchOptions(debounce: debounce)) { [self] sequence in
            condition.lock()
            let moved = sequence > notified && !stopped
            if moved { notified = sequence }
            condition.unlock()
            if moved { try? send(.changed, Wire.Live.changed(sequence)) }
        }
        let thread = Thread { [self] in keepAlive() }
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

    /// The server waits for the client's next frame (true) or works on one (false).
    func waiting(_ value: Bool) {
        condition.lock()
        waiting = value
        lastHeard = .now
        condition.unlock()
    }

    func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
        source?.stop()
    }

    private func keepAlive() {
        let silence = Wire.Live.silence(after: keepalive)
        let tick = keepalive / 4
        while true {
            condition.lock()
            _ = condition.wait(until: Date(timeIntervalSinceNow: Double(tick.components.seconds) + Double(tick.components.attoseconds) / 1e18))
            if stopped {
                condition.unlock()
                return
            }
            let now = ContinuousClock.now
            let ping = now - lastSent >= keepalive
            let dead = waiting && now - lastHeard >= silence
            condition.unlock()
            if dead {
                FileHandle.standardError.write(
                    Data("archive-sync: no word from the other side for \(LiveLink.describe(silence)) (the keepalive); ending the session\n".utf8))
                exit(1)
            }
            if ping { try? send(.ping, []) }
        }
    }
}
