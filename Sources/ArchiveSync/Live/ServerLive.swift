import ArchiveLocking
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
final class ServerLive: Sendable {
    private let keepalive: Keepalive
    /// The last sequence sent in a notice, and the change source once started.
    private let state: TracedMutex<(notified: Int, stopped: Bool, source: LocalChangeSource?)>

    init(channel: FrameChannel, keepalive: Duration, store: ArchiveStore) throws {
        self.keepalive = Keepalive(channel: channel, interval: keepalive)
        state = TracedMutex((try store.changeSequence(), false, nil))
    }

    /// Starts pinging, then watching, after the `ok` of the watch request is sent: the pings
    /// first, since taking the watch lease can wait a second for a holder (a far side of an
    /// earlier connection, stopped) and the client must hear from this side meanwhile.
    func start(store: ArchiveStore, debounce: Duration) throws {
        keepalive.start { quiet in
            FileHandle.standardError.write(
                Data("archive-sync: no word from the other side for \(LiveLink.describe(quiet)) (the keepalive); ending the session\n".utf8))
            exit(1)
        }
        let source = try LocalChangeSource(store: store, watch: WatchOptions(debounce: debounce)) { [self] sequence in
            let moved = state.withLock { state in
                guard sequence > state.notified && !state.stopped else { return false }
                state.notified = sequence
                return true
            }
            if moved { try? send(.changed, Wire.Live.changed(sequence)) }
        }
        state.withLock { $0.source = source }
    }

    func send(_ kind: Wire.Kind, _ payload: [UInt8]) throws { try keepalive.send(kind, payload) }

    /// The server waits for the client's next frame (true) or works on one (false).
    func waiting(_ value: Bool) { keepalive.listening(value) }

    func stop() {
        keepalive.stop()
        let source = state.withLock { state in
            state.stopped = true
            return state.source
        }
        source?.stop()
    }
}
