import ArchiveStore
import Foundation

/// Settings of a live session (`sync A B --watch`, `watch STORE --sync-with PEER`).
public struct LiveOptions: Sendable {
    /// What each cycle does, as for a one-shot sync (``SyncOptions/dryRun`` is ignored;
    /// ``SyncOptions/full`` makes every cycle a full compare).
    public var sync: SyncOptions
    /// Make a directory that is not a store one, on either side (`--force`).
    public var create: Bool
    /// How long changes are gathered before a cycle starts (and before a watcher records
    /// them): a burst becomes one cycle. Default 20 ms.
    public var debounce: Duration
    /// How often a cycle compares everything, as a safety net (as `sync --full`; one runs
    /// right after the first cycle of the start and of each reconnection). Default one hour
    /// (the watcher's rescan); nil never.
    public var fullCompareInterval: Duration?
    /// How long either side of a connection to a far host stays silent before it pings;
    /// after 2.5 times this without a word the link is given up. Default 10 s.
    public var keepalive: Duration
    /// The first wait before reconnecting; each failed attempt doubles it, up to
    /// ``maximumReconnectDelay``. Default 1 s.
    public var reconnectDelay: Duration
    /// Default 60 s.
    public var maximumReconnectDelay: Duration
    /// How often a peer that cannot say it changed (a bucket) is asked, while nothing else
    /// happens: one request (a listing) when nothing is new. Default 2 s.
    public var poll: Duration = .seconds(2)

    public init(
        sync: SyncOptions = SyncOptions(), create: Bool = false, debounce: Duration = .milliseconds(20),
        fullCompareInterval: Duration? = .seconds(3600), keepalive: Duration = .seconds(10), reconnectDelay: Duration = .seconds(1),
        maximumReconnectDelay: Duration = .seconds(60)
    ) {
        self.sync = sync
        self.create = create
        self.debounce = debounce
        self.fullCompareInterval = fullCompareInterval
        self.keepalive = keepalive
        self.reconnectDelay = reconnectDelay
        self.maximumReconnectDelay = maximumReconnectDelay
    }
}

/// What a live session reports, in order.
public enum LiveEvent: Sendable {
    /// Both sides are reachable (at the start, and after each reconnection).
    case connected(peer: String)
    /// A far side went away or could not be reached: the session tries again after `retryIn`.
    /// Writes on this side keep working; the next cycle carries them.
    case disconnected(peer: String, error: String, retryIn: Duration)
    /// A cycle ran: its report, and each object it carried.
    case cycle(LiveCycle)
    /// The session stopped syncing with `peer` for good: a safety valve tripped (more than
    /// half of a side would be deleted, a side is no store), or a side here failed. Nothing
    /// was deleted. The session ends after this event.
    case stopped(peer: String, reason: String)
}

/// One cycle of a live session.
public struct LiveCycle: Sendable, Codable, Equatable {
    /// The sync's report, as a one-shot sync gives it.
    public var report: SyncReport
    /// Each object written, on the side it landed on.
    public var objects: [LiveObject]
    /// True when it compared everything: the cycle after the first one of a start or a
    /// reconnection, one at the interval, or a first cycle of stores whose checkpoints allowed
    /// no less. False for an incremental cycle, the first one of a start included.
    public var full: Bool
    public var started: Date
    /// How long it took, in seconds.
    public var seconds: Double
    /// Nil for a cycle that ran to its end. Otherwise why it stopped early (a link lost, the
    /// session stopped): `objects` are those that had landed by then, and `report` counts the
    /// pages that had landed whole. The next cycle carries the rest.
    public var error: String? = nil
}
