import ArchiveStore
import Foundation

/// Settings of one sync.
public struct SyncOptions: Sendable {
    /// Plan only: report what would be done and change nothing.
    public var dryRun: Bool
    /// Decide conflicts this way instead of keeping both versions.
    public var preference: SyncPreference?
    /// How concurrent edits are treated: merged field by field (the default), or never merged.
    /// ``preference`` decides only what a merge leaves in conflict.
    public var merge: SyncMerge
    /// Go ahead even when the sync would delete more than half of a side's objects.
    public var force: Bool
    /// Compare every object, not only what changed since the last sync (after a store was
    /// restored from a backup, which its checkpoints cannot always tell).
    public var full: Bool
    /// Called now and then with the objects handled so far and how many there are.
    public var progress: (@Sendable (_ done: Int, _ total: Int) -> Void)?

    public init(
        dryRun: Bool = false, preference: SyncPreference? = nil, merge: SyncMerge = .fields, force: Bool = false, full: Bool = false,
        progress: (@Sendable (_ done: Int, _ total: Int) -> Void)? = nil
    ) {
        self.dryRun = dryRun
        self.preference = preference
        self.merge = merge
        self.force = force
        self.full = full
        self.progress = progress
    }
}

/// What a sync did (or, for a dry run, would do).
public struct SyncReport: Sendable, Codable, Equatable {
    /// A conflict: both sides changed an object since they last met.
    public struct Conflict: Sendable, Codable, Equatable {
        /// The object, `Collection/key`.
        public var id: String
        /// The side whose version stays at the id.
        public var winner: SyncSide
        /// Where the other version was saved on both sides; nil when a preference decided
        /// (the losing version then stays in its side's history).
        public var copy: String?
        /// Where a field merge found the two edits conflicting (`name`, `address.city`); nil
        /// when no merge was tried, empty when it found no base.
        public var paths: [String]?
    }

    /// An object whose two concurrent edits were merged field by field: both sides now hold
    /// the merged version.
    public struct Merge: Sendable, Codable, Equatable {
        public var id: String
        /// Where the merged version differs from the base: what either side changed.
        public var paths: [String]
    }

    /// An object left for the next sync because it changed while this one ran.
    public struct Skipped: Sendable, Codable, Equatable {
        public var id: String
        /// The side where it changed.
        public var side: SyncSide
    }

    /// One step of the plan, listed by `diff` and `sync --dry-run`.
    public struct Action: Sendable, Codable, Equatable {
        /// `merge`: both sides get the field merge of their edits (`to` is then A).
        public enum Kind: String, Sendable, Codable { case copy, delete, conflict, merge }
        public var id: String
        public var kind: Kind
        /// The side that changes: where the object is copied to or deleted, or the conflict's loser.
        public var to: SyncSide
        /// A conflict's copy, if one is made.
        public var copy: String?
        /// The paths a merge changes, or a conflict's conflicting paths.
        public var paths: [String]?
    }

    /// The two stores, as named.
    public var a: String
    public var b: String
    public var dryRun: Bool
    /// True when only what changed since the last sync was compared (checkpoints matched).
    public var incremental: Bool
    /// Whether each side was scanned first (false: a watcher kept it current).
    public var scannedA: Bool
    public var scannedB: Bool
    public var copiedToA = 0
    public var copiedToB = 0
    public var deletedOnA = 0
    public var deletedOnB = 0
    /// Objects both held alike, whose version vectors were merged (no contents changed).
    public var vectorsMerged = 0
    /// Objects whose concurrent edits were merged field by field, with the paths each merge changed.
    public var merges: [Merge] = []
    public var conflicts: [Conflict] = []
    public var skipped: [Skipped] = []
    /// The plan, step by step: set for a dry run only.
    public var actions: [Action]?

    /// Objects copied, deleted, merged field by field or in conflict: 0 when the two stores
    /// were already equal.
    public var changes: Int { copiedToA + copiedToB + deletedOnA + deletedOnB + merges.count + conflicts.count }

    /// One line: `3 copied to B, 1 copied to A, 1 deleted on B, 1 conflict`.
    public var summary: String {
        var parts: [String] = []
        if copiedToB > 0 { parts.append("\(copiedToB) copied to B") }
        if copiedToA > 0 { parts.append("\(copiedToA) copied to A") }
        if deletedOnB > 0 { parts.append("\(deletedOnB) deleted on B") }
        if deletedOnA > 0 { parts.append("\(deletedOnA) deleted on A") }
        if !merges.isEmpty { parts.append("\(merges.count) merged") }
        if !conflicts.isEmpty { parts.append("\(conflicts.count) conflict\(conflicts.count == 1 ? "" : "s")") }
        if !skipped.isEmpty { parts.append("\(skipped.count) changed during the sync, left for the next one") }
        if parts.isEmpty { parts.append("0 changes") }
        return parts.joined(separator: ", ")
    }
}

/// Why a sync stopped before changing anything.
public enum SyncError: ExitStatusError, Sendable, Equatable {
    /// A sync that stopped is a failure (exit status 1), never bad usage.
    public var exitStatus: Int32 { ExitStatus.failure }

    /// The sync would delete more than half of a side's objects (run again with --force).
    case tooManyDeletes(store: String, deletes: Int, objects: Int)
    /// Both stores have one replica id: they are one store, or one is a file copy of the other.
    case sameReplica(String, String)
    /// The other side broke the protocol or failed.
    case remote(String)
    /// An object the sync would carry between hosts is over ``Wire/maximumObject``; nothing was written.
    case tooLarge(id: String, store: String, size: Int)
    /// The far side could not serve at all, for a reason that trying again does not mend: the
    /// command that reaches it could not start, its program was not found or could not run
    /// there (exit 127 or 126), or it refused the handshake (another protocol version, a
    /// store it cannot open). A live session stops that peer instead of retrying.
    case farSideCannotServe(String)

    public var description: String {
        switch self {
        case .tooManyDeletes(let store, let deletes, let objects):
            return
                "the sync would delete \(deletes) of the \(objects) objects in \(store), more than half; if that is what you want, run it again with --force"
        case .sameReplica(let a, let b):
            return
                "\(a) and \(b) have the same replica id: they are one store, or one is a file copy of the other (cp, rsync) and not a replica of its own; make a replica with `archive-sync init NEW` and `archive-sync sync \(a) NEW` instead of copying files"
        case .remote(let message), .farSideCannotServe(let message):
            return message
        case .tooLarge(let id, let store, let size):
            return
                "\(id) in \(store) is \(size) bytes, over \(Wire.describeObjectLimit), so nothing was synced; make it smaller, or sync it through a directory on this host"
        }
    }
}
