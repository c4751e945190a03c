import ArchiveStore
import ArchiveWatch
import Foundation

/// One side of a live session, used on the session's thread only: a store here, watched (or
/// followed) for the session's life, or a far store reached over one connection, made again
/// after each loss.
final class LiveSide: @unchecked Sendable {
    let side: SyncSide
    /// The store's location; nil for a polled peer.
    let location: StoreLocation?
    let name: String
    private(set) var replica: (any SyncReplica)?
    private var source: LocalChangeSource?
    /// A store here that the caller opened (shared by several sessions of a hub), or the
    /// store a polled peer syncs with.
    private let opened: ArchiveStore?
    private let polled: (any PolledPeer)?

    init(_ side: SyncSide, location: StoreLocation, store: ArchiveStore? = nil) {
        self.side = side
        self.location = location
        self.opened = store
        polled = nil
        switch location {
        case .directory(let path): name = store?.path ?? path
        case .remote(let far): name = "\(far.host):\(far.path)"
        }
    }

    /// A polled peer (a bucket) that `store`, the other side, syncs with.
    init(_ side: SyncSide, polled: any PolledPeer, for store: ArchiveStore) {
        self.side = side
        location = nil
        opened = store
        self.polled = polled
        name = polled.name
    }

    /// A far store or a polled peer: reached by ``connect(peer:options:signals:)``, lost and retried.
    var isRemote: Bool { if case .directory = location { false } else { true } }
    var store: ArchiveStore? { polled == nil ? (replica as? LocalReplica)?.store ?? opened : nil }

    /// Opens and watches a store here; a far store is reached by ``connect(peer:options:signals:)``.
    func open(options: LiveOptions, signals: LiveSignals) throws {
        guard case .directory(let path) = location, replica == nil else { return }
        let store = try opened ?? Sync.openStore(path, create: options.create)
        let side = self.side
        source = try LocalChangeSource(
            store: store, watch: WatchOptions(debounce: options.debounce, rescanInterval: options.fullCompareInterval)
        ) { signals.changed(side, sequence: $0) }
        replica = LocalReplica(store, name: name)
    }

    /// Connects to a far store: starts `serve --stdio` there, shakes hands and asks it to
    /// watch. Nothing for a store here.
    func connect(peer: ReplicaID?, options: LiveOptions, signals: LiveSignals) throws {
        if let polled, let store = opened {
            _ = signals.connecting(side)
            replica = try polled.connect(for: store)
            return
        }
        guard case .remote(var far) = location else { return }
        // ssh's own keepalive and connect timeout follow the session's, in ssh's whole seconds:
        // a far host that does not answer at all fails an attempt as soon as a silent link is
        // given up (2.5 intervals), and ssh's keepalive stays the backstop of the session's own
        // (which says why it gave up), giving up only after 6 intervals.
        let interval = Double(options.keepalive.components.seconds) + Double(options.keepalive.components.attoseconds) / 1e18
        far.keepaliveInterval = max(1, Int((2 * interval).rounded(.up)))
        far.connectTimeout = max(1, Int((2.5 * interval).rounded(.up)))
        let connection = signals.connecting(side)
        let side = self.side
        let remote = try RemoteReplica(command: far.serveCommand(create: options.create), name: name, peer: peer)
        do {
            try remote.goLive(
                keepalive: options.keepalive, debounce: options.debounce, notice: { signals.changed(side, sequence: $0) },
                lost: { signals.connectionLost(side, connection: connection, $0) })
        } catch {
            remote.close()
            throw error
        }
        replica = remote
    }

    /// Drops the connection to a far store (nothing for a store here).
    func disconnect() {
        if let remote = replica as? RemoteReplica {
            remote.close()
        } else if let polled = replica as? any PolledReplica {
            polled.disconnect()
        } else {
            return
        }
        replica = nil
    }

    /// Asks a polled peer for news and posts its change sequence; nothing for a store.
    /// - Throws: the request's error: the peer is then given up and connected again.
    func poll(signals: LiveSignals) throws {
        guard let polled = replica as? any PolledReplica else { return }
        signals.changed(side, sequence: try polled.poll())
    }

    var isPolled: Bool { polled != nil }

    /// Ends everything: the connection, the watcher or follower.
    func close() {
        disconnect()
        source?.stop()
        source = nil
    }

    /// Why this side's watcher stopped on its own (its store was removed), if it did.
    var watchFailure: (any Error)? { source?.failure }
}
