import ArchiveStore
import Foundation

/// What a compaction did, as `archive-sync compact --json` prints it.
public struct CompactionReport: Codable, Sendable, Equatable {
    /// The snapshot written, if the logs had anything new since the last.
    public var snapshot: String?
    /// The versions in the newest snapshot (deletes included).
    public var snapshotEntries = 0
    /// Objects found deletable and marked, by kind.
    public var markedSegments = 0
    public var markedSnapshots = 0
    public var markedBlobs = 0
    /// Objects deleted, their mark's grace period having passed.
    public var deletedSegments = 0
    public var deletedSnapshots = 0
    public var deletedBlobs = 0
    /// Marked blobs that a version referenced again by the time of their deletion: kept.
    public var keptBlobs = 0
    /// Marks still waiting for their grace period.
    public var pendingMarks = 0
}

/// A compaction of one bucket replica (docs/bucket.md, "Compaction"), under its lease:
///
/// 1. folds the newest snapshot and every segment after it but each log's newest, and writes
///    the fold as the next snapshot (with `If-None-Match: *`) when the logs moved;
/// 2. deletes what marks older than the grace period list, where it is still unreferenced;
/// 3. marks what is now deletable: segments the newest snapshot covers, older snapshots, and
///    blobs no version of the fold references.
package struct BucketCompaction: Sendable {
    package var grace: Duration = .seconds(3600)
    /// How long the lease lasts without a renewal; renewed before each phase and every few
    /// hundred deletions.
    package var leaseDuration: Duration = .seconds(300)

    let storage: any ConditionalStorage
    let layout: BucketLayout
    let location: String

    package init(storage: any ConditionalStorage, prefix: String, location: String) {
        self.storage = storage
        layout = BucketLayout(prefix: prefix)
        self.location = location
    }

    /// Runs the compaction; `progress` hears a line per phase.
    /// - Throws: ``CompactionError`` (the lease held or lost), ``BucketError`` (no replica
    ///   marker, damaged objects), S3 errors.
    package func run(progress: @Sendable (String) -> Void = { _ in }) async throws -> CompactionReport {
        guard let marker = try await storage.read(layout.marker) else { throw BucketError.notAReplica(location: location) }
        let replica = try BucketMarker.decode(marker, key: layout.marker).replica
        var lease = try await BucketLease.take(storage: storage, layout: layout, location: location, duration: leaseDuration)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("archive-sync-compact-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let cache = try BucketCache(path: directory + "/fold.sqlite", replica: replica)
            let report = try await compact(BucketLog(storage: storage, layout: layout, cache: cache), lease: &lease, progress: progress)
            try await lease.release()
            return report
        } catch {
            try? await lease.release()
            throw error
        }
    }

    private func compact(_ log: BucketLog, lease: inout BucketLease, progress: @Sendable (String) -> Void) async throws -> CompactionReport {
        var report = CompactionReport()
        progress("reading the logs of \(location)")
        _ = try await log.foldNewestSnapshot()
        let previous = try log.cache.snapshotRead()
        let previousPositions = try await previous.asyncMap { try await coverage(of: $0) } ?? [:]
        try await log.foldAllButNewest()
        let positions = try log.cache.logPositions()
        let entries = try log.cache.antichain()
        // The snapshot's blobs stay while it is the newest, even where a newer segment
        // replaced their version: a reader whose listing lags may show them until it reads on.
        let snapshotBlobs = Set(entries.compactMap(\.hash))
        report.snapshotEntries = entries.count
        var newest = previous
        if positions != previousPositions {
            try await lease.renew()
            let number = (previous.flatMap(layout.snapshotNumber) ?? 0) + 1
            let key = layout.snapshot(number)
            let snapshot = Snapshot(number: number, made: BucketLease.nanoseconds(Date()), logs: positions, entries: entries)
            guard try await storage.write(key, snapshot.encoded(), ifAbsent: true) else { throw CompactionError.snapshotTaken(key: key) }
            progress("wrote \(key): \(entries.count) versions")
            (report.snapshot, newest) = (key, key)
        }
        // The newest segments too, for the blobs they reference.
        try await log.catchUp()
        let pending = try await deleteRipeMarks(log, newest: newest, covered: positions, keeping: snapshotBlobs, lease: &lease, report: &report)
        try await mark(
            newest: newest, covered: positions, referenced: snapshotBlobs.union(try log.cache.referencedBlobs()), pending: pending, lease: &lease,
            report: &report)
        progress(
            "marked \(report.markedSegments) segments, \(report.markedSnapshots) snapshots and \(report.markedBlobs) blobs; deleted \(report.deletedSegments), \(report.deletedSnapshots) and \(report.deletedBlobs)"
        )
        return report
    }

    /// The positions the snapshot at `key` covers.
    private func coverage(of key: String) async throws -> [ReplicaID: LogPosition] {
        guard let data = try await storage.read(key) else { return [:] }
        return try Snapshot.decode(data, key: key, layout: layout).positions
    }

    /// Whether `key` may be deleted now: a segment the newest snapshot covers (`covered`), a
    /// snapshot older than the newest, a blob no version references. Anything else is kept.
    private func deletable(_ key: String, newest: String?, covered: [ReplicaID: LogPosition], referenced: Set<ContentHash>) -> Bool {
        if let segment = layout.segmentName(key) { return covered[segment.replica].map { key <= $0.key } ?? false }
        if layout.snapshotNumber(key) != nil { return newest.map { key < $0 } ?? false }
        if let hash = layout.blobHash(key) { return !referenced.contains(hash) }
        return false
    }

    /// Deletes what ripe marks list and is still deletable, then the marks.
    ///
    /// Before each batch the fold reads the logs again: a blob that a segment pushed since
    /// names again (the same bytes written anew, the write refused as already there) is kept.
    /// - Returns: the keys that marks not yet ripe list.
    private func deleteRipeMarks(
        _ log: BucketLog, newest: String?, covered: [ReplicaID: LogPosition], keeping snapshotBlobs: Set<ContentHash>, lease: inout BucketLease,
        report: inout CompactionReport
    ) async throws -> Set<String> {
        var pending: Set<String> = []
        let ripe = Date() - grace.timeInterval
        for key in try await storage.keys(under: layout.marks, after: nil) {
            guard let data = try await storage.read(key) else { continue }
            let mark = try DeletionMark.decode(data, key: key)
            guard Date(timeIntervalSince1970: Double(mark.marked) / 1e9) <= ripe else {
                pending.formUnion(mark.keys)
                report.pendingMarks += 1
                continue
            }
            for batch in stride(from: 0, to: mark.keys.count, by: 256).map({ Array(mark.keys[$0..<min($0 + 256, mark.keys.count)]) }) {
                // Renewed before each batch: a holder that lost its lease deletes nothing more.
                try await lease.renew()
                try await log.catchUp()
                let referenced = snapshotBlobs.union(try log.cache.knownBlobs(batch.compactMap(layout.blobHash)))
                let doomed = batch.filter { deletable($0, newest: newest, covered: covered, referenced: referenced) }
                _ = try await concurrentMap(doomed) { [storage] key in try await storage.delete(key) }
                report.keptBlobs += batch.count - doomed.count
                for key in doomed {
                    if layout.segmentName(key) != nil { report.deletedSegments += 1 }
                    if layout.snapshotNumber(key) != nil { report.deletedSnapshots += 1 }
                    if layout.blobHash(key) != nil { report.deletedBlobs += 1 }
                }
            }
            try await storage.delete(key)
        }
        return pending
    }

    /// Writes one mark listing what is deletable now and no pending mark lists yet.
    private func mark(
        newest: String?, covered: [ReplicaID: LogPosition], referenced: Set<ContentHash>, pending: Set<String>, lease: inout BucketLease,
        report: inout CompactionReport
    ) async throws {
        var keys: [String] = []
        for prefix in [layout.logs, layout.snapshots, layout.blobs] {
            for key in try await storage.keys(under: prefix, after: nil)
            where !pending.contains(key) && deletable(key, newest: newest, covered: covered, referenced: referenced) {
                keys.append(key)
                if layout.segmentName(key) != nil { report.markedSegments += 1 }
                if layout.snapshotNumber(key) != nil { report.markedSnapshots += 1 }
                if layout.blobHash(key) != nil { report.markedBlobs += 1 }
            }
        }
        guard !keys.isEmpty else { return }
        try await lease.renew()
        let now = Date()
        let key = layout.marks + BucketLayout.padded(Int(now.timeIntervalSince1970 * 1000)) + "-" + lease.record.token
        _ = try await storage.write(
            key, DeletionMark(marked: BucketLease.nanoseconds(now), holder: lease.holder, keys: keys).encoded(), ifAbsent: true)
    }
}

extension Optional {
    fileprivate func asyncMap<U>(_ transform: (Wrapped) async throws -> U) async rethrows -> U? {
        guard let self else { return nil }
        return try await transform(self)
    }
}
