import ArchiveStore
import Foundation

extension Sync {
    /// The bytes of both versions of each field merge among `actions`, read on their sides.
    func fieldMergeContents(_ actions: [SyncAction]) throws -> [SyncSide: [ObjectID: Data]] {
        var entries: [SyncSide: [ReplicaEntry]] = [.a: [], .b: []]
        for case .fieldMerge(let a, let b, _) in actions {
            entries[.a]!.append(a)
            entries[.b]!.append(b)
        }
        let (a, b) = try bothSides(busy: { !entries[$0]!.isEmpty }) { [self, entries] side in
            try self.read(entries[side]!, copies: [], on: side).contents
        }
        return [.a: a, .b: b]
    }

    /// Merges each field merge among `actions` whose two versions are in `contents`: asks
    /// both sides for their history of the object, then merges against the base either holds.
    /// A pair missing from `contents` (its bytes changed since the plan) is left out.
    func fieldMerges(_ actions: [SyncAction], contents: [SyncSide: [ObjectID: Data]]) throws -> [ObjectID: FieldMergeOutcome] {
        var pairs: [(a: ReplicaEntry, b: ReplicaEntry, bytesA: Data, bytesB: Data)] = []
        for case .fieldMerge(let a, let b, _) in actions {
            guard let bytesA = contents[.a]?[a.id], let bytesB = contents[.b]?[b.id] else { continue }
            pairs.append((a, b, bytesA, bytesB))
        }
        guard !pairs.isEmpty else { return [:] }
        let queries = pairs.map { MergeBaseQuery(id: $0.a.id, base: $0.a.vector.meet($0.b.vector)) }
        let (historiesA, historiesB) = try bothSides(busy: { _ in true }) { [self] side in try self.replica(side).mergeBases(queries) }
        var outcomes: [ObjectID: FieldMergeOutcome] = [:]
        for (pair, (historyA, historyB)) in zip(pairs, zip(historiesA, historiesB)) {
            outcomes[pair.a.id] = SyncPlanner.merge(pair.a, pair.bytesA, history: historyA, pair.b, pair.bytesB, history: historyB)
        }
        return outcomes
    }
}
