import ArchiveStore
import Foundation

/// What a live session learns from inside a sync: each object as it lands, and whether to
/// stop between pages.
package struct SyncObserver: Sendable {
    /// Called once per object written, with the side it landed on.
    package var propagated: @Sendable (LiveObject) -> Void
    package var shouldStop: @Sendable () -> Bool
    /// True when both manifests are known to be current without asking: each side is watched
    /// by the session, so what is not recorded yet will start a cycle of its own once it is.
    /// The sync then skips each side's `makeCurrent` (a request, and a probe of the watcher).
    package var manifestsCurrent: Bool
    /// Called as the sync passes each step (`ARCHIVE_SYNC_LIVE_TRACE`); nil when not traced.
    package var step: (@Sendable (String) -> Void)?
    /// Called once each page has landed whole, with the report of every page landed so far:
    /// what a cycle that fails later (a link lost mid-cycle) did before it failed.
    package var pageLanded: (@Sendable (SyncReport) -> Void)?

    package init(
        propagated: @escaping @Sendable (LiveObject) -> Void, shouldStop: @escaping @Sendable () -> Bool, manifestsCurrent: Bool = false,
        step: (@Sendable (String) -> Void)? = nil, pageLanded: (@Sendable (SyncReport) -> Void)? = nil
    ) {
        self.propagated = propagated
        self.shouldStop = shouldStop
        self.manifestsCurrent = manifestsCurrent
        self.step = step
        self.pageLanded = pageLanded
    }

    func landed(_ object: IncomingObject, on side: SyncSide, tally: Sync.Tally) {
        let kind: LiveObject.Kind
        switch tally {
        case .copy(_, deleted: true): kind = .delete
        case .copy: kind = .copy
        case .conflict: kind = .conflict
        case .conflictCopy: kind = .conflictCopy
        case .fieldMerge: kind = .merge
        }
        let now = Int64(Date().timeIntervalSince1970 * 1e9)
        propagated(
            LiveObject(
                direction: side == .b ? .aToB : .bToA, id: object.id.description,
                version: object.version.vector.counters.values.reduce(0, +), kind: kind,
                latencyMilliseconds: max(0, Double(now - object.version.modified) / 1e6)))
    }
}

/// One object a live session carried from one side to the other.
public struct LiveObject: Sendable, Codable, Equatable {
    public enum Direction: String, Sendable, Codable {
        case aToB = "a-to-b"
        case bToA = "b-to-a"
    }

    public enum Kind: String, Sendable, Codable {
        /// A new or changed version.
        case copy
        case delete
        /// The version kept at the id of a conflict.
        case conflict
        /// A conflict's losing version, saved beside it.
        case conflictCopy = "conflict-copy"
        /// A field merge of two concurrent edits.
        case merge
    }

    public var direction: Direction
    /// `Collection/key`.
    public var id: String
    /// The version's number: the sum of its version vector's counters (each change any
    /// replica made to the object counts once), the same on both sides.
    public var version: Int
    public var kind: Kind
    /// From the change being recorded (the version's time, as its author recorded it) to it
    /// landing on the other side, in milliseconds.
    public var latencyMilliseconds: Double

    public init(direction: Direction, id: String, version: Int, kind: Kind, latencyMilliseconds: Double) {
        self.direction = direction
        self.id = id
        self.version = version
        self.kind = kind
        self.latencyMilliseconds = latencyMilliseconds
    }
}
