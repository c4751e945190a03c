import ArchiveStore
import Foundation

/// One of the two stores of a sync: `a` is the first named, `b` the second.
public enum SyncSide: String, Sendable, Codable, CaseIterable {
    case a, b

    /// The other side.
    public var other: SyncSide { self == .a ? .b : .a }
}

/// How a conflict (both sides changed an object since they last met) is decided.
public enum SyncPreference: String, Sendable, Codable, CaseIterable {
    /// Side A's version wins.
    case a
    /// Side B's version wins.
    case b
    /// The version made later wins.
    case newer
    /// The version made earlier wins.
    case older
}

/// What a sync does about one object: the planner's answer for one pair of manifest rows.
package enum SyncAction: Sendable, Equatable {
    /// Both hold the same contents (or both a tombstone) with the same vector.
    case none
    /// Both hold the same contents; each records the merged vector.
    case merge(VectorMerge)
    /// `source` (a version or a tombstone) goes to side `to`, replacing `target`, recorded there
    /// with `vector`.
    case copy(to: SyncSide, source: ReplicaEntry, target: ReplicaEntry?, vector: VersionVector)
    /// Both changed the contents. `winner`'s stays at the id on both sides (with `vector`, both
    /// sides' merged); the loser's is saved on both sides as `copy` (nil when a preference
    /// decided it: the loser then stays in its side's history only).
    case conflict(winner: SyncSide, kept: ReplicaEntry, lost: ReplicaEntry, vector: VersionVector, copy: ObjectID?)
    /// Both changed the contents of a JSON or property-list object: the executor merges the
    /// two field by field against their base (which only it can read), and does `otherwise`
    /// (a `conflict`) when fields conflict or there is no base.
    indirect case fieldMerge(a: ReplicaEntry, b: ReplicaEntry, otherwise: SyncAction)
}

/// The sync planner: a pure function of the two rows an object has on the two sides.
///
/// - Same contents: nothing to copy; differing vectors are merged.
/// - One vector dominates: that side's version (or tombstone) is copied to the other.
/// - Concurrent vectors: an edit beats a delete; two edits are a conflict, which keeps both,
///   or, with `merge` on and both stored as JSON or property list, a field merge.
/// - A tombstone facing nothing needs nothing: the other side never had the object.
package enum SyncPlanner {
    package static func action(a: ReplicaEntry?, b: ReplicaEntry?, preference: SyncPreference?, merge: SyncMerge = .none) -> SyncAction {
        guard let a else {
            guard let b, !b.isDeleted else { return .none }
            return .copy(to: .a, source: b, target: nil, vector: b.vector)
        }
        guard let b else {
            return a.isDeleted ? .none : .copy(to: .b, source: a, target: nil, vector: a.vector)
        }
        let merged = a.vector.merged(with: b.vector)
        if a.isDeleted == b.isDeleted, a.hash == b.hash {
            return a.vector == b.vector ? .none : .merge(VectorMerge(id: a.id, hash: a.hash, vector: merged))
        }
        if a.vector != b.vector {
            if a.vector.dominates(b.vector) { return .copy(to: .b, source: a, target: b, vector: a.vector) }
            if b.vector.dominates(a.vector) { return .copy(to: .a, source: b, target: a, vector: b.vector) }
        }
        // Concurrent (or equal vectors over different contents: two stores that never met, or
        // an edit the manifest could not attribute). An edit beats a delete.
        if a.isDeleted { return .copy(to: .a, source: b, target: a, vector: merged) }
        if b.isDeleted { return .copy(to: .b, source: a, target: b, vector: merged) }
        let winner = self.winner(a: a, b: b, preference: preference)
        let (kept, lost) = winner == .a ? (a, b) : (b, a)
        let copy = preference == nil ? conflictCopyID(of: lost) : nil
        let conflict = SyncAction.conflict(winner: winner, kept: kept, lost: lost, vector: merged, copy: copy)
        guard merge == .fields, mergeFormat(a, b) != nil, merged.counters.count < maximumMergedVector else { return conflict }
        // --prefer decides only what the merge leaves: `otherwise` is what it decides.
        return .fieldMerge(a: a, b: b, otherwise: conflict)
    }

    /// The side whose version stays at the id. Both sides compute the same answer: the newer
    /// version, a tie broken by the larger replica id, then by the larger hash.
    static func winner(a: ReplicaEntry, b: ReplicaEntry, preference: SyncPreference?) -> SyncSide {
        switch preference {
        case .a?: return .a
        case .b?: return .b
        case .older?: return newer(a, b) == .a ? .b : .a
        case .newer?, nil: return newer(a, b)
        }
    }

    private static func newer(_ a: ReplicaEntry, _ b: ReplicaEntry) -> SyncSide {
        if a.modified != b.modified { return a.modified > b.modified ? .a : .b }
        if a.author != b.author { return a.author > b.author ? .a : .b }
        let ha = a.hash?.bytes ?? Data()
        let hb = b.hash?.bytes ?? Data()
        return hb.lexicographicallyPrecedes(ha) ? .a : .b
    }

    /// The id of a conflict copy: the key, `.conflict-`, the first 8 characters of the replica
    /// that made the losing version, when (UTC), and the first 8 hex digits of its contents'
    /// hash: `person1.conflict-3f2a9c1b-20261123T163012Z-9e1c04aa`. Both sides derive the same
    /// name, and two losing versions never share one. A key too long to take the suffix is
    /// cut short (on a character boundary) to make room.
    package static func conflictCopyID(of lost: ReplicaEntry) -> ObjectID? {
        let seconds = Int(lost.modified / 1_000_000_000)
        var time = tm()
        var t = time_t(seconds)
        gmtime_r(&t, &time)
        let stamp = String(
            format: "%04d%02d%02dT%02d%02d%02dZ", Int(time.tm_year) + 1900, Int(time.tm_mon) + 1, Int(time.tm_mday), Int(time.tm_hour),
            Int(time.tm_min), Int(time.tm_sec))
        let replica = String(lost.author.rawValue.prefix(8))
        let content = String((lost.hash?.description ?? "").prefix(8))
        let suffix = "\(conflictMarker)\(replica)-\(stamp)-\(content)"
        var key = ""
        var room = ObjectID.maximumLength - suffix.utf8.count
        for scalar in lost.id.key.unicodeScalars {
            room -= String(scalar).utf8.count
            if room < 0 { break }
            key.unicodeScalars.append(scalar)
        }
        return try? ObjectID(collection: lost.id.collection, key: key + suffix)
    }

    /// The most entries a vector may have for its object to be merged field by field: each merge
    /// adds one (see ``mergedVersion(_:_:)``), and the protocol carries at most 1,000.
    static let maximumMergedVector = 500

    /// What every conflict copy's key holds.
    package static let conflictMarker = ".conflict-"

    /// True when `key` names a conflict copy.
    package static func isConflictCopy(_ key: String) -> Bool {
        guard let range = key.range(of: conflictMarker, options: .backwards) else { return false }
        // 8 replica characters, yyyyMMddTHHmmssZ, 8 hex digits of the contents' hash
        let parts = key[range.upperBound...].split(separator: "-", omittingEmptySubsequences: false)
        return parts.count == 3 && parts[1].count == 16 && parts[1].hasSuffix("Z") && parts[1].dropFirst(8).first == "T"
            && parts[2].count == 8 && parts[2].allSatisfy(\.isHexDigit)
    }
}

extension VersionVector {
    /// The entry-wise maximum: a vector that has seen every change either has.
    package func merged(with other: VersionVector) -> VersionVector {
        var counters = self.counters
        for (replica, count) in other.counters where count > counters[replica, default: 0] { counters[replica] = count }
        return VersionVector(counters)
    }
}
