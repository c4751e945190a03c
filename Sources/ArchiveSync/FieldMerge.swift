import ArchiveMerge
import ArchiveStore
import Foundation

// What a sync needs to merge two concurrent edits of an object field by field (docs/merge.md):
// each side's history of the object (vectors, and the base's bytes), the three-way merge of
// the decoded documents, and the one version both sides then record.

/// How a sync treats two concurrent edits of an object.
public enum SyncMerge: String, Sendable, Codable, CaseIterable {
    /// Merge JSON and property-list objects field by field against the version both sides
    /// last shared; a conflict copy only where the same field changed both ways.
    case fields
    /// Never merge: a winner and a conflict copy, as syncs did before merging.
    case none
}

extension VersionVector: CausalVector {
    /// The entrywise minimum: the newest vector both this and `other` dominate.
    public func meet(_ other: VersionVector) -> VersionVector {
        var counters: [ReplicaID: Int] = [:]
        for (replica, count) in self.counters {
            let both = min(count, other.counters[replica, default: 0])
            if both > 0 { counters[replica] = both }
        }
        return VersionVector(counters)
    }
}

/// A request for what one side's history holds of an object: every kept version's vector, and
/// the bytes of the newest live version whose vector is `base` (the meet of the two current
/// vectors: the only version a merge may use as its base).
package struct MergeBaseQuery: Sendable, Equatable {
    package var id: ObjectID
    package var base: VersionVector

    package init(id: ObjectID, base: VersionVector) {
        self.id = id
        self.base = base
    }
}

/// One side's answer to a ``MergeBaseQuery``.
package struct MergeBaseAnswer: Sendable, Equatable {
    /// The vector of each kept version, oldest first.
    package var vectors: [VersionVector]
    /// The bytes of the base version, when this side still keeps them.
    package var base: Data?

    package init(vectors: [VersionVector], base: Data?) {
        self.vectors = vectors
        self.base = base
    }

    /// The answer of a side that keeps no history of the object.
    package static let none = MergeBaseAnswer(vectors: [], base: nil)
}

extension SyncReplica {
    /// A replica that keeps no history: no merge base, so concurrent edits keep a conflict copy.
    package func mergeBases(_ queries: [MergeBaseQuery]) throws -> [MergeBaseAnswer] { queries.map { _ in .none } }
}

extension ArchiveStore {
    /// Answers ``MergeBaseQuery``s from the store's history. A base whose kept bytes are gone
    /// (pruned) or no longer hash to what history recorded is answered without bytes.
    package func mergeBases(_ queries: [MergeBaseQuery]) throws -> [MergeBaseAnswer] {
        try queries.map { query in
            let versions: [ObjectVersion]
            do {
                versions = try history(query.id)
            } catch ArchiveError.notFound {
                return .none
            }
            var bytes: Data?
            if let base = versions.last(where: { !$0.isDeleted && $0.vector == query.base }) {
                do {
                    let data = try data(for: query.id, version: base.version)
                    if ContentHash(of: data) == base.hash { bytes = data }
                } catch ArchiveError.notFound, ArchiveError.versionNotKept {
                    bytes = nil
                }
            }
            return MergeBaseAnswer(vectors: versions.map(\.vector), base: bytes)
        }
    }
}

/// What the executor made of one concurrent pair the plan asked it to merge.
enum FieldMergeOutcome: Sendable, Equatable {
    /// The merged document's bytes in the object's codec, and the paths either side changed.
    case merged(Data, paths: [String])
    /// No merge: the conflicting paths (empty when there was no base or a side did not decode).
    case conflict(paths: [String])
}

extension SyncPlanner {
    /// The document format both versions are stored in, when the merge reads it: the same
    /// codec on both sides, JSON or property list.
    static func mergeFormat(_ a: ReplicaEntry, _ b: ReplicaEntry) -> DocumentFormat? {
        let ext = fileExtension(a.file)
        guard ext == fileExtension(b.file) else { return nil }
        return DocumentFormat(rawValue: ext)
    }

    /// Merges `a` and `b` (bytes `bytesA`, `bytesB`) against the base their histories hold.
    static func merge(
        _ a: ReplicaEntry, _ bytesA: Data, history historyA: MergeBaseAnswer, _ b: ReplicaEntry, _ bytesB: Data, history historyB: MergeBaseAnswer
    ) -> FieldMergeOutcome {
        guard let format = mergeFormat(a, b) else { return .conflict(paths: []) }
        let search = BaseSearch.search(
            ours: historyA.vectors.map { HistoryEntry(vector: $0, id: 0) }, theirs: historyB.vectors.map { HistoryEntry(vector: $0, id: 0) },
            oursCurrent: a.vector, theirsCurrent: b.vector)
        guard case .found = search, let baseBytes = historyA.base ?? historyB.base else { return .conflict(paths: []) }
        do {
            let base = try Document(baseBytes, format: format)
            let ours = try Document(bytesA, format: format)
            let theirs = try Document(bytesB, format: format)
            switch Document.merge(base: base, ours: ours, theirs: theirs) {
            case .merged(let document, let paths): return .merged(try document.data(in: format), paths: paths.map(\.description))
            case .conflicts(let paths): return .conflict(paths: paths.map(\.description))
            }
        } catch {
            return .conflict(paths: [])
        }
    }

    /// The version a field merge of `a` and `b` records on both sides: the join of the two
    /// vectors plus one change by a replica id derived from the pair (both versions' hashes
    /// and vectors), never from the stores that run the sync. So two syncs that merge the
    /// same pair, whichever stores run them, record the same vector, and the counter of no
    /// real replica is raised (a later edit there could otherwise look already seen).
    static func mergedVersion(_ a: ReplicaEntry, _ b: ReplicaEntry) -> (vector: VersionVector, author: ReplicaID, modified: Int64) {
        let pair = [a, b].map { "\($0.hash?.description ?? "-") \($0.vector)" }.sorted().joined(separator: "\n")
        let author = ReplicaID(rawValue: String(ContentHash(of: Data(pair.utf8)).description.prefix(16)))
        var vector = a.vector.merged(with: b.vector)
        vector.increment(author)
        return (vector, author, max(a.modified, b.modified))
    }
}

/// The file extension of a stored file name (`json` for `person1.json`): it names the codec.
package func fileExtension(_ file: String) -> String {
    guard let dot = file.lastIndex(of: ".") else { return "json" }
    return String(file[file.index(after: dot)...])
}
