import ArchiveLocking
import Foundation

/// A ``Connection`` that several threads use at once, each sending a request and waiting for
/// its reply without waiting for the others' round trips: one thread sends while another
/// waits. A sync whose pages of writes land in turn on the far side (``Sync``'s window) keeps
/// the far side busy this way: it finds the next page queued when it has committed one,
/// instead of idling for a reply's way back and the next page's way out.
///
/// The far side answers in the order the requests came. Each request takes a ticket as it is
/// sent; the thread that reads sets aside the replies that are not its own for their owners.
/// Sends are serialized by one lock, reads by another; anything else (closing, going live)
/// takes both, sending's first.
///
/// No deadlock waits on the far side's writes: every thread that sent goes on to read, so a
/// reply is always read while others send, however large it is.
final class PipelinedConnection: @unchecked Sendable {
    private let connection: Connection
    private let name: String
    /// Requests sent so far (the next ticket).
    private let sending = TracedMutex(0)
    private let receiving = TracedMutex(Inbound())
    /// Requests sent and not yet answered: now, and the most there have been.
    private let inFlight = TracedMutex((now: 0, most: 0))

    private struct Inbound: Sendable {
        /// Replies read so far.
        var received = 0
        /// Replies read for tickets whose threads have not come for them yet.
        var early: [Int: Result<[UInt8], any Error>] = [:]
        /// What broke the stream of replies (the transport, a reply that broke the protocol):
        /// every later reply is lost with it.
        var broken: (any Error)?
    }

    /// - Parameter name: the far store as the user knows it, for messages.
    init(_ connection: Connection, name: String) {
        self.connection = connection
        self.name = name
    }

    /// Sends `request` and waits for the payload of its `ok` reply. A failure the transport
    /// caused closes the connection (see ``Connection/failed(_:name:beforeHandshake:)``).
    func call(_ request: Wire.Request) throws -> [UInt8] {
        let ticket: Int
        do {
            ticket = try sending.withLock { sent in
                // On its way from the start of its sending (a far side that is slow to read holds it there).
                inFlight.withLock { $0 = (now: $0.now + 1, most: max($0.most, $0.now + 1)) }
                do {
                    try connection.send(request, name: name)
                } catch {
                    inFlight.withLock { $0.now -= 1 }
                    throw error
                }
                defer { sent += 1 }
                return sent
            }
        } catch {
            throw failed(error)
        }
        let reply = receiving.withLock { inbound -> Result<[UInt8], any Error> in
            while inbound.received <= ticket {
                var next: Result<[UInt8], any Error>
                if let broken = inbound.broken {
                    next = .failure(broken)
                } else {
                    next = Result { try connection.receive(name: name, beforeHandshake: false) }
                    // A `failure` reply (a SyncError) leaves the stream in step; anything else does not.
                    if case .failure(let error) = next, !(error is SyncError) { inbound.broken = error }
                }
                inbound.early[inbound.received] = next
                inbound.received += 1
                inFlight.withLock { $0.now -= 1 }
            }
            return inbound.early.removeValue(forKey: ticket)!
        }
        do {
            return try reply.get()
        } catch {
            throw failed(error)
        }
    }

    /// The most requests that were sent and not yet answered at once.
    var mostInFlight: Int { inFlight.withLock { $0.most } }

    /// Runs `body` with the connection while no request is being sent or read.
    func exclusive<T: Sendable, E: Error>(_ body: (Connection) throws(E) -> T) throws(E) -> T {
        try sending.withLock { (_) throws(E) -> T in try receiving.withLock { (_) throws(E) -> T in try body(connection) } }
    }

    /// `error` as the user sees it; one the transport caused closes the connection first.
    private func failed(_ error: any Error) -> any Error {
        if error is SyncError { return error }
        return exclusive { $0.failed(error, name: name, beforeHandshake: false) }
    }
}
