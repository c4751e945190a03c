import ArchiveS3
import Foundation

extension BucketReplicas {
    /// Compacts the bucket replica at `location`, as `archive-sync compact` does: folds old
    /// segments into a snapshot, marks what the snapshot makes unneeded (and blobs no version
    /// references), and deletes what was marked more than `grace` ago and is still unneeded,
    /// under the bucket's compaction lease. Syncs go on meanwhile; they never wait for it.
    ///
    /// ```swift
    /// let report = try await BucketReplicas.compact(location, configuration: configuration, grace: .seconds(3600))
    /// ```
    /// - Throws: ``CompactionError/leaseHeld(location:holder:expires:)`` while another
    ///   compaction runs; ``BucketError`` or ``S3Error`` otherwise.
    public static func compact(
        _ location: S3Location, configuration: S3Configuration, grace: Duration = .seconds(3600), progress: @Sendable (String) -> Void = { _ in }
    ) async throws -> CompactionReport {
        try await withClient(configuration) { client in
            var compaction = BucketCompaction(storage: client, prefix: location.prefix, location: location.description)
            compaction.grace = grace
            return try await compaction.run(progress: progress)
        }
    }
}
