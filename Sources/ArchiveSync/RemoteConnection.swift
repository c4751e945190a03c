import ArchiveLocking
import ArchiveProcess
import ArchiveStore
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The transport: the child process and the frames on its stdin and stdout.
final class Connection {
    private let process: ChildProcess
    private let channel: FrameChannel
    private(set) var isClosed = false
    /// Set once the session is live: a thread of its own then reads every frame.
    private var live: LiveLink?

    init(command: [String]) throws {
        guard let program = command.first else { throw SyncError.remote("no command to reach the far side") }
        do {
            // Its stderr on a thread of its own, so that it never blocks on a full pipe; the
            // last few kilobytes say why it failed.
            process = try ChildProcess(program, Array(command.dropFirst()), stdin: .pipe, stdout: .pipe, stderr: .collect(lastBytes: 8_192))
        } catch {
            switch error.call {
            case "pipe": throw SyncError.remote("cannot make a pipe: \(String(cString: strerror(error.errno)))")
            default:
                throw SyncError.farSideCannotServe("cannot start \(command.joined(separator: " ")): \(String(cString: strerror(error.errno)))")
            }
        }
        // Both pipes are open until `close()`; writes go through the no-SIGPIPE path.
        channel = FrameChannel(input: process.standardOutput!, output: process.standardInput!)
    }

    /// One request and the payload of its `ok` reply; a transport failure closes the connection.
    func call(_ request: Wire.Request, name: String, beforeHandshake: Bool) throws -> [UInt8] {
        do {
            try send(request, name: name)
            return try receive(name: name, beforeHandshake: beforeHandshake)
        } catch {
            throw failed(error, name: name, beforeHandshake: beforeHandshake)
        }
    }

    /// Sends one request. Its reply is read by ``receive(name:beforeHandshake:)``, replies in
    /// the order the requests went. Throws what the transport threw, closing nothing (see
    /// ``failed(_:name:beforeHandshake:)``).
    func send(_ request: Wire.Request, name: String) throws {
        guard !isClosed else { throw closedError(name: name) }
        if let live { try live.send(request.kind, request.encode()) } else { try channel.send(request.kind, request.encode()) }
    }

    /// The payload of the next reply when it is `ok`; ``SyncError`` with the far side's message
    /// for a `failure`. Throws what the transport threw, closing nothing.
    func receive(name: String, beforeHandshake: Bool) throws -> [UInt8] {
        guard !isClosed else { throw closedError(name: name) }
        let (replyKind, reply) = if let live { try live.reply() } else { try channel.receive() }
        switch replyKind {
        case .ok:
            return reply
        case .failure:
            let message = "\(name): " + ((try? Wire.Reply.failure(reply)) ?? "a failure it could not describe")
            // A refused handshake (another protocol version, a store it cannot open) is
            // refused again on the next try.
            throw beforeHandshake ? SyncError.farSideCannotServe(message) : SyncError.remote(message)
        default:
            throw WireError("the far side sent a request where a reply belongs")
        }
    }

    /// What a request on a closed connection fails with. Closed because the keepalive gave the
    /// link up, it says so, whichever of several threads' requests (a sync's window) comes first.
    private func closedError(name: String) -> SyncError {
        if let silence = live?.silence { return Self.silent(name: name, for: silence) }
        return SyncError.remote("\(name): the connection to the far side is closed")
    }

    private static func silent(name: String, for silence: Duration) -> SyncError {
        SyncError.remote("\(name): no word from the far side for \(LiveLink.describe(silence)) (the keepalive)")
    }

    /// `error` from ``send(_:name:)`` or ``receive(name:beforeHandshake:)`` as the user sees
    /// it. A transport failure or a reply that breaks the protocol closes the connection (what
    /// follows on it cannot be trusted); a `failure` reply leaves it open.
    func failed(_ error: any Error, name: String, beforeHandshake: Bool) -> any Error {
        switch error {
        case is ChannelClosed:
            if let silence = live?.silence {
                close()
                return Self.silent(name: name, for: silence)
            }
            close()
            let message = "\(name): \(closedMessage(beforeHandshake: beforeHandshake))"
            // The far shell's "command not found" (127) or "cannot execute" (126); ssh's own
            // failures (the network, authentication) are 255.
            if beforeHandshake, case .exited(let status)? = process.termination, status == 126 || status == 127 {
                return SyncError.farSideCannotServe(message)
            }
            return SyncError.remote(message)
        case let error as WireError:
            close()
            let said = stderrText(waiting: .milliseconds(200))
            return SyncError.remote("\(name): \(error.description)" + (said.isEmpty ? "" : "; it said: \(said)"))
        default:
            return error
        }
    }

    /// Hands the connection's input to a thread of its own (see ``LiveLink``): after the far
    /// side accepted ``Wire/Request/watch(keepalive:)``.
    func goLive(keepalive: Duration, notice: @escaping @Sendable (Int) -> Void, lost: @escaping @Sendable (String) -> Void) {
        let process = self.process
        let link = LiveLink(channel: channel, keepalive: keepalive, notice: notice, lost: lost) { _ = process.terminate(grace: .milliseconds(100)) }
        live = link
        link.start()
    }

    /// Why the far side went away, in its (or ssh's) words.
    func closedMessage(beforeHandshake: Bool) -> String {
        _ = process.wait(timeout: .seconds(5))
        let said = stderrText(waiting: .seconds(1))
        var message = beforeHandshake ? "the far side closed the connection before the handshake" : "the connection to the far side closed"
        switch process.termination {
        case .signalled(let number)?: message += " (the transport was killed by signal \(number))"
        case .exited(127)?: message += " (exit 127: is archive-sync installed there? --remote-cmd names it)"
        case .exited(let status)? where status != 0: message += " (exit \(status))"
        default: break
        }
        return said.isEmpty ? message : message + ": " + said
    }

    /// What the child said on stderr, trimmed, on one line; waits up to `timeout` for it to end.
    private func stderrText(waiting timeout: Duration) -> String {
        _ = process.waitForErrorOutputEnd(timeout: timeout)
        return String(decoding: process.collectedErrorOutput, as: UTF8.self).split(whereSeparator: \.isNewline)
            .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }.joined(separator: "; ")
    }

    /// Closes the pipes (the far side sees the end of its input) and waits briefly for the
    /// child; one that does not exit is terminated.
    ///
    /// After a session the far side ended cleanly (its reply to `end` is in: every write it
    /// made is durable in its manifest), `waitingForExit` false returns at once: the far
    /// process still settles its store as it exits (the `syncfs` that lets its write intents
    /// go, SQLite's checkpoint), which promises nothing more to this side, and ssh's teardown
    /// follows. A thread of its own reaps the child meanwhile (a command's process may exit
    /// first: the child is then reaped by init), and terminates one that outlives
    /// ``exitGrace``.
    func close(waitingForExit: Bool = true) {
        guard !isClosed else { return }
        isClosed = true
        if !waitingForExit && live == nil {
            process.closeStandardInput()
            let process = self.process
            Thread {
                if process.wait(timeout: Self.exitGrace) == nil { _ = process.terminate(grace: .seconds(1)) }
                process.closeStandardOutput()
            }.start()
            return
        }
        live?.stop()
        process.closeStandardInput()
        // The child's stderr ends when it (and anything it started) exits: a prompt signal,
        // where the notice of the exit itself is only polled.
        var waited = 0
        while !process.waitForErrorOutputEnd(timeout: .milliseconds(5)) && process.isRunning && waited < 1_000 { waited += 1 }
        if waited == 1_000 { process.terminate(grace: .seconds(1)) }
        // Its stderr has ended: it is exiting, if it has not exited yet.
        _ = process.wait(timeout: .seconds(1))
        // The reader thread sees the end of the output before the descriptor is closed (and
        // perhaps reused under it).
        if let live, !live.waitUntilReaderEnded(timeout: .seconds(1)) {
            _ = process.terminate(grace: .milliseconds(100))
            _ = live.waitUntilReaderEnded(timeout: .seconds(1))
        }
        process.closeStandardOutput()
    }

    /// How long a far process that ended its session cleanly is given to settle and exit.
    static let exitGrace = Duration.seconds(60)

    deinit {
        if !isClosed {
            process.closeStandardInput()
            process.terminate(grace: .seconds(1))
        }
    }
}
