import Foundation

extension Wire {
    /// The messages of a live session (protocol version 3), defined once for both sides.
    ///
    /// After the handshake the client sends ``Wire/Request/watch(keepalive:)``; from its `ok`
    /// reply on, the far side watches its store and sends ``Wire/Kind/changed`` (its change
    /// sequence) whenever that moves, unsolicited, between replies. Either side sends
    /// ``Wire/Kind/ping`` (no payload, no answer) when it has sent nothing for the keepalive
    /// interval, and gives the link up when it has heard nothing for ``silence(after:)``: a
    /// link that goes silent without closing (a partition) is noticed in bounded time.
    package enum Live {
        /// The keepalive interval of a session that names none: a silent link is noticed
        /// within 25 s (``silence(after:)``), inside the 30 s the issue allows.
        package static let defaultKeepalive = Duration.seconds(10)
        /// The longest keepalive interval a client may ask for (an hour).
        package static let maximumKeepalive = Duration.seconds(3600)

        /// The longest debounce a client may ask for, in milliseconds (a minute).
        package static let maximumDebounce = 60_000

        /// How long a side waits without hearing anything before it gives the link up: two
        /// and a half intervals, so that one late ping is not a lost link.
        package static func silence(after keepalive: Duration) -> Duration { keepalive * 5 / 2 }

        static func milliseconds(_ duration: Duration) -> Int {
            let (seconds, attoseconds) = duration.components
            return Int(seconds) * 1_000 + Int(attoseconds / 1_000_000_000_000_000)
        }

        /// Reads a keepalive interval in milliseconds: 10 ms to ``maximumKeepalive``.
        static func keepalive(_ reader: inout WireReader) throws -> Duration {
            let ms = try reader.count(max: milliseconds(maximumKeepalive), "a keepalive interval")
            guard ms >= 10 else { throw WireError("a message gives \(ms) ms as a keepalive interval, under the least of 10 ms") }
            return .milliseconds(ms)
        }

        /// The payload of a ``Wire/Kind/changed`` notice.
        package static func changed(_ sequence: Int) -> [UInt8] {
            var writer = WireWriter()
            writer.count(sequence)
            return writer.bytes
        }

        /// Reads a ``Wire/Kind/changed`` notice's change sequence.
        package static func changedSequence(_ payload: [UInt8]) throws -> Int {
            try Wire.Reply.count(payload, "a change sequence")
        }
    }
}
