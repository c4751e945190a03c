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
    /// One listing of `log/` finds every log's new segments and every new log: a no-op is one
    /// request. It starts at the beginning of `log/` (a new log may sort before every known
    /// one, and start-after the lowest position would miss it), and each next page starts past
    /// its last log's position, so a log's old segments cost at most one page of it.
    ///
    /// A log with a gap (segments a compaction deleted, or a listing lagging behind a write)
    /// sends the reader to the newest snapshot it has not read, and the logs it moved are
    /// listed once more after it.
    ///
    /// `firstPage`, when given, is the listing's first page already requested (see
    /// ``OpeningRequests``): it stands for the first request.
    /// - Returns: whether the view changed.
    @discardableResult
    package func catchUp(firstPage: Task<KeyPage, any Error>? = nil) async throws -> Bool {
        let (changed, gap) = try await catchUpLogs(firstPage: firstPage)
        guard gap, try await foldNewestSnapshot() else { return changed }
        _ = try await catchUpLogs()
        return true
    }

    /// One pass of ``catchUp()``: whether the view changed, and whether some log stopped at a gap.
    private func catchUpLogs(firstPage: Task<KeyPage, any Error>? = nil) async throws -> (changed: Bool, gap: Bool) {
        let positions = try cache.logPositions()
        let pushed = try cache.pushedKeys()
        var found: [ReplicaID: [SegmentName]] = [:]
        var after: String?
        var sent = firstPage
        while true {
            let page: KeyPage
            if let request = sent {
                page = try await request.value
                sent = nil
            } else {
                page = try await storage.keyPage(under: layout.logs, after: after)
            }
            for name in page.keys.compactMap(layout.segmentName) where name.key > (positions[name.replica]?.key ?? "") {
                found[name.replica, default: []].append(name)
            }
            guard page.more, let last = page.keys.last else { break }
            let position = layout.segmentName(last).flatMap { positions[$0.replica]?.key } ?? ""
            after = max(last, position)
        }
        var (changed, gap) = (false, false)
        for (replica, names) in found.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            let folded = try await fold(names, of: replica, from: positions[replica], pushed: pushed)
            changed = changed || folded.change != nil
            gap = gap || folded.gap
        }
        return (changed, gap)
    }

    /// Reads and folds `replica`'s new segments in order, as far as they are contiguous.
    ///
    /// Entry numbers run on without a gap in each log; a segment after a gap is one whose
    /// predecessor a lagging listing does not show yet, so reading stops there and the next
    /// sync picks up from the same place. A segment that overlaps what was read came from a
    /// push that lost a race for its number (its entries are pushed again after): its entries
    /// are folded all the same, as a version is news once whatever log it comes through.
    /// - Returns: the first change sequence the folds gave the view (nil when they changed
    ///   nothing), and whether reading stopped at a gap. A segment listed and then gone was
    ///   deleted by a compaction: a gap too.
    ///
    /// Segments this cache pushed itself (`pushed`) are passed without being read: their
    /// entries are folded already.
    func fold(_ names: [SegmentName], of replica: ReplicaID, from position: LogPosition?, pushed: Set<String>) async throws -> (
        change: Int?, gap: Bool
    ) {
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
            // nil for a segment passed unread; `gone` for one deleted since the listing.
            let segments = try await concurrentMap(batch) { [storage] name -> (segment: Segment?, gone: Bool) in
                guard !pushed.contains(name.key) else { return (nil, false) }
                guard let data = try await storage.read(name.key) else { return (nil, true) }
                return (try Segment.decode(data, name: name), false)
            }
            for (name, read) in zip(batch, segments) {
                if read.gone { return (firstChange, true) }
                last = max(last, name.last)
                let change = try cache.fold(read.segment?.entries ?? [], log: (replica, LogPosition(last: last, key: name.key))).change
                firstChange = firstChange ?? change
            }
        }
        return (firstChange, gap)
    }

    /// Reads `replica`'s own log past the cache's position (after a lost race).
    private func catchUp(_ replica: ReplicaID) async throws -> Int? {
        let position = try cache.logPositions()[replica]
        let names = try await storage.keys(under: layout.log(replica), after: position?.key).compactMap(layout.segmentName)
        return try await fold(names, of: replica, from: position, pushed: try cache.pushedKeys()).change
    }

    /// Appends `entries` to `replica`'s log as its next segment, once every blob they name is
    /// in the bucket, and folds them into the cache.
    ///
    /// The segment is written with `If-None-Match: *`: a refusal means another writer of the
    /// same log (a copy of the store) took the number; this push reads what it wrote and
    /// tries again with the next number. A writer that took the same number for another
    /// length wrote another key, and both stand: the log's position keeps its last key read,
    /// so the next listing shows that segment too (this push's own is passed unread), and the
    /// fold takes its entries whatever their numbers.
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
        let attempts = 8
        var key = ""
        var firstOther: Int?
        for attempt in 1...attempts {
            let position = try cache.logPositions()[replica]
            let segment = Segment(replica: replica, first: (position?.last ?? 0) + 1, entries: entries)
            key = layout.segment(replica, first: segment.first, last: segment.last)
            if try await storage.write(key, segment.encoded(), ifAbsent: true) {
                // Read up to the log's start when nothing of it was read yet: all its keys sort after that.
                let read = position?.key ?? layout.log(replica)
                let other = try cache.fold(entries, log: (replica, LogPosition(last: segment.last, key: read)), pushed: key).other
                return [firstOther, other].compactMap { $0 }.min()
            }
            if let change = try await catchUp(replica) { firstOther = firstOther ?? change }
            // Apart in time, so that two losers do not meet again at the next number.
            try await Task.sleep(for: .milliseconds(Int.random(in: 10...(50 * attempt))))
        }
        throw BucketError.segmentRace(key: key, attempts: attempts)
    }
}
