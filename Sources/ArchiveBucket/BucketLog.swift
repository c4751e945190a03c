import ArchiveStore
import Foundation

/// The logs of a bucket replica as one store sees them: reading every replica's new segments
/// into the cache, and appending to the store's own log.
package struct BucketLog: Sendable {
    let storage: any BucketStorage
    let layout: BucketLayout
    let cache: BucketCache

    package init(storage: any BucketStorage, layout: BucketLayout, cache: BucketCache) {
        self.storage = storage
        self.layout = layout
        self.cache = cache
    }

    /// Lists every log after the cache's positions and folds what is new.
    ///
    /// One listing of `replicas/` names every log; one listing per log, after the last
    /// segment read, finds its new segments. A no-op costs one request per log and one more.
    ///
    /// A log with a gap (segments a compaction deleted, or a listing lagging behind a write)
    /// sends the reader to the newest snapshot it has not read, and the logs it moved are
    /// listed once more after it.
    package func catchUp() async throws {
        guard try await catchUpLogs(), try await foldNewestSnapshot() else { return }
        _ = try await catchUpLogs()
    }

    /// One pass of ``catchUp()``: returns whether some log stopped at a gap.
    private func catchUpLogs() async throws -> Bool {
        let positions = try cache.logPositions()
        let listed = try await storage.keys(under: layout.replicas, after: nil).compactMap(layout.replicaName)
        let replicas = Set(listed).union(positions.keys).sorted()
        let found = try await concurrentMap(replicas, width: 8) { [storage, layout] replica in
            try await storage.keys(under: layout.log(replica), after: positions[replica]?.key).compactMap(layout.segmentName)
        }
        var gap = false
        for (replica, names) in zip(replicas, found) where !names.isEmpty {
            gap = try await fold(names, of: replica, from: positions[replica]).gap || gap
        }
        return gap
    }

    /// Reads and folds `replica`'s new segments in order, as far as they are contiguous.
    ///
    /// Entry numbers run on without a gap in each log; a segment after a gap is one whose
    /// predecessor a lagging listing does not show yet, so reading stops there and the next
    /// sync picks up from the same place. A segment that overlaps what was read came from a
    /// push that lost a race for its number (its entries are pushed again after): its entries
    /// are folded all the same, as a version is news once whatever log it comes through.
    /// A segment listed and then gone was deleted by a compaction: a gap too.
    /// - Returns: the first change sequence the folds gave the view (nil when they changed
    ///   nothing), and whether reading stopped at a gap.
    func fold(_ names: [SegmentName], of replica: ReplicaID, from position: LogPosition?) async throws -> (change: Int?, gap: Bool) {
        var last = position?.last ?? 0
        var contiguous: [SegmentName] = []
        var gap = false
        for name in names.sorted(by: { $0.key < $1.key }) {
            if name.first > last + 1 {
                gap = true
                break
            }
            contiguous.append(name)
            last = max(last, name.last)
        }
        last = position?.last ?? 0
        var firstChange: Int?
        // A few segments fetched at once, folded one by one in order: memory stays at a few
        // segments, and a sync cut short keeps what it folded.
        for start in stride(from: 0, to: contiguous.count, by: 8) {
            let batch = Array(contiguous[start..<min(start + 8, contiguous.count)])
            let segments = try await concurrentMap(batch) { [storage] name in
                try await storage.read(name.key).map { try Segment.decode($0, name: name) }
            }
            for (name, segment) in zip(batch, segments) {
                guard let segment else { return (firstChange, true) }
                last = max(last, segment.last)
                let change = try cache.fold(segment.entries, log: (replica, LogPosition(last: last, key: name.key))).change
                firstChange = firstChange ?? change
            }
        }
        return (firstChange, gap)
    }

    /// Reads `replica`'s own log past the cache's position (after a lost race).
    private func catchUp(_ replica: ReplicaID) async throws -> Int? {
        let position = try cache.logPositions()[replica]
        let names = try await storage.keys(under: layout.log(replica), after: position?.key).compactMap(layout.segmentName)
        return try await fold(names, of: replica, from: position).change
    }

    /// Appends `entries` to `replica`'s log as its next segment, once every blob they name is
    /// in the bucket, and folds them into the cache.
    ///
    /// The segment is written with `If-None-Match: *`, and a listing after it must show it as
    /// the log's only new segment: another writer of the same log (a copy of the store) that
    /// took the same number, or an overlapping one, makes this push lose. The loser reads what
    /// the winner wrote and tries again with the next number.
    ///
    /// - Returns: the first change sequence at which the view came to show something other
    ///   than these entries (a concurrent version won, or a lost race read another writer's).
    package func append(_ entries: [BucketEntry], to replica: ReplicaID, blobs: [ContentHash: Data]) async throws -> Int? {
        guard !entries.isEmpty else { return nil }
        let known = try cache.knownBlobs(Array(blobs.keys))
        let missing = blobs.filter { !known.contains($0.key) }.map { ($0.key, $0.value) }
        _ = try await concurrentMap(missing) { [storage, layout] hash, data in
            try await storage.write(layout.blob(hash), data, ifAbsent: true)
        }
        // The log is named in `replicas/` before its first segment, so that readers find it.
        if try cache.logPositions()[replica] == nil {
            _ = try await storage.write(layout.replicas + replica.rawValue, Data(), ifAbsent: true)
        }
        let attempts = 8
        var key = ""
        var firstOther: Int?
        for attempt in 1...attempts {
            let position = try cache.logPositions()[replica]
            let segment = Segment(replica: replica, first: (position?.last ?? 0) + 1, entries: entries)
            key = layout.segment(replica, first: segment.first, last: segment.last)
            if try await storage.write(key, segment.encoded(), ifAbsent: true) {
                let after = try await storage.keys(under: layout.log(replica), after: position?.key)
                if after == [key] {
                    let other = try cache.fold(entries, log: (replica, LogPosition(last: segment.last, key: key))).other
                    return [firstOther, other].compactMap { $0 }.min()
                }
            }
            if let change = try await catchUp(replica) { firstOther = firstOther ?? change }
            // Apart in time, so that two losers do not meet again at the next number.
            try await Task.sleep(for: .milliseconds(Int.random(in: 10...(50 * attempt))))
        }
        throw BucketError.segmentRace(key: key, attempts: attempts)
    }
}
