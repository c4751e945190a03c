import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The client's end of a live connection: a thread reads every frame (replies for the
/// request waiting, ``Wire/Kind/changed`` notices for the session, pings), and the
/// ``Keepalive`` pings after a quiet interval and gives the link up after
/// ``Wire/Live/silence(after:)`` without a word from the far side (it ends the transport, so
/// that every wait ends too).
final class LiveLink: @unchecked Sendable {
    private let channel: FrameChannel
    private let keepalive: Keepalive
    private let notice: @Sendable (Int) -> Void
    private let lost: @Sendable (String) -> Void
    private let kill: @Sendable () -> Void
    // Guarded by `condition`.
    private let condition = NSCondition()
    private var replies: [(Wire.Kind, [UInt8])] = []
    private var ended: (any Error)?
    private var readerEnded = false
    private var stopped = false
    private var silentFor: Duration?

    init(
        channel: FrameChannel, keepalive: Duration, notice: @escaping @Sendable (Int) -> Void, lost: @escaping @Sendable (String) -> Void,
        kill: @escaping @Sendable () -> Void
    ) {
        self.channel = channel
        self.keepalive = Keepalive(channel: channel, interval: keepalive)
        self.notice = notice
        self.lost = lost
        self.kill = kill
    }

    func start() {
        let reader = Thread { [self] in read() }
        reader.name = "archive-sync live read"
        reader.start()
        keepalive.start { [self] quiet in
            condition.lock()
            silentFor = quiet
            condition.unlock()
            kill()
        }
    }

    func send(_ kind: Wire.Kind, _ payload: [UInt8]) throws { try keepalive.send(kind, payload) }

    /// The next reply; throws what ended the link when it ends first.
    func reply() throws -> (Wire.Kind, [UInt8]) {
        condition.lock()
        defer { condition.unlock() }
        while replies.isEmpty {
            if let ended { throw ended }
            condition.wait()
        }
        return replies.removeFirst()
    }

    /// Ends the keepalive; the reader ends within a tick.
    func stop() {
        keepalive.stop()
        condition.lock()
        stopped = true
        condition.broadcast()
        condition.unlock()
    }

    func waitUntilReaderEnded(timeout: Duration) -> Bool {
        let limit = Date(timeIntervalSinceNow: LiveSignals.seconds(timeout))
        condition.lock()
        defer { condition.unlock() }
        while !readerEnded {
            if !condition.wait(until: limit) { return readerEnded }
        }
        return true
    }

    /// How long the far side had been silent when the keepalive gave the link up; nil while
    /// it has not.
    var silence: Duration? {
        condition.lock()
        defer { condition.unlock() }
        return silentFor
    }

    /// True once the keepalive gave the link up or the session closed it: the reader stops
    /// waiting even when the transport's output stays open (a stopped far side's pipe held by
    /// a process that was not killed).
    private var givenUp: Bool {
        condition.lock()
        defer { condition.unlock() }
        return stopped || silentFor != nil
    }

    private func read() {
        let tick = Int32(max(10, min(1_000, Wire.Live.milliseconds(keepalive.interval) / 4)))
        while true {
            do {
                var input = pollfd(fd: channel.input, events: Int16(POLLIN), revents: 0)
                let ready = poll(&input, 1, tick)
                if givenUp { throw ChannelClosed(midFrame: false, errno: 0) }
                if ready == 0 || (ready < 0 && errno == EINTR) { continue }
                let (kind, payload) = try channel.receive()
                keepalive.heard()
                switch kind {
                case .ping: continue
                case .changed: notice(try Wire.Live.changedSequence(payload))
                default:
                    condition.lock()
                    replies.append((kind, payload))
                    condition.broadcast()
                    condition.unlock()
                }
            } catch {
                condition.lock()
                ended = error is WireError ? error : ChannelClosed(midFrame: false, errno: 0)
                readerEnded = true
                let quietly = stopped
                let silence = silentFor
                condition.broadcast()
                condition.unlock()
                keepalive.stop()
                if !quietly {
                    lost(
                        silence.map { "no word from the far side for \(Self.describe($0)) (the keepalive)" }
                            ?? ((error as? WireError)?.description ?? "the connection to the far side closed"))
                }
                return
            }
        }
    }

    static func describe(_ duration: Duration) -> String {
        let seconds = LiveSignals.seconds(duration)
        return seconds >= 10 ? "\(Int(seconds)) s" : String(format: "%.1f s", seconds)
    }
}
