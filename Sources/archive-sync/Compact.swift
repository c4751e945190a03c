import ArchiveBucket
import ArchiveS3
import ArchiveStore
import ArgumentParser
import Foundation

struct Compact: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Compact a bucket replica: fold old log segments into a snapshot, delete what no one needs.",
        discussion: """
            Folds the log segments of s3://BUCKET/PREFIX (all but each log's newest) into a new snapshot, so that a store that syncs for the first time (or after a long while) reads one object instead of every segment. Segments the snapshot covers, older snapshots, and blobs no version references are marked; a later compact deletes what was marked more than --grace ago and is still unneeded. Run it from one host now and then (a daily timer): syncs go on meanwhile and never wait for it.

            One compaction runs at a time: a lease object (PREFIX/lease) names the holder and its expiry. A live lease held by another is refused (exit 3); one past its expiry, or held by a process of this host that is gone, is taken over. See docs/bucket.md.

            Examples:
              archive-sync compact s3://team-data/archive
              archive-sync compact s3://team-data/archive --grace 2h --json
            """
    )

    @Argument(help: ArgumentHelp("The bucket replica.", valueName: "s3://bucket/prefix"))
    var location: String

    @Option(
        help: ArgumentHelp("How long marked objects stay before a later compact deletes them: 90s, 30m, 1h, 2d.", valueName: "duration"))
    var grace: String = "1h"

    @OptionGroup var output: OutputOptions

    func validate() throws {
        guard isBucketURL(location) else { throw ValidationError("compact takes a bucket replica, s3://BUCKET/PREFIX, not \(location)") }
        _ = try parseDuration(grace)
    }

    func run() throws {
        let bucket = try S3Location(parsing: location)
        var settings = try S3Configuration.fromEnvironment()
        settings.bucket = bucket.bucket
        let configuration = settings
        let period = try parseDuration(grace)
        let terminal = isatty(2) != 0
        let report = try blocking {
            try await BucketReplicas.compact(bucket, configuration: configuration, grace: period) { line in
                if terminal { printError(line) }
            }
        }
        if output.json { return try output.printJSON(report) }
        printLine(
            "\(bucket): "
                + (report.snapshot.map { "wrote \($0) (\(report.snapshotEntries) version\(report.snapshotEntries == 1 ? "" : "s"))" }
                    ?? "no new segments since the last snapshot")
                + "; deleted \(report.deletedSegments) segments, \(report.deletedSnapshots) snapshots, \(report.deletedBlobs) blobs"
                + "; marked \(report.markedSegments) segments, \(report.markedSnapshots) snapshots, \(report.markedBlobs) blobs for deletion after \(grace)"
        )
    }
}

/// `90s`, `30m`, `1h`, `2d`, `500ms`, or a number of seconds.
func parseDuration(_ text: String) throws -> Duration {
    let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86400)]
    let (suffix, scale) = units.first { text.hasSuffix($0.0) && Double(text.dropLast($0.0.count)) != nil } ?? ("", 1)
    guard let number = Double(text.dropLast(suffix.count)), number >= 0, number.isFinite else {
        throw ValidationError("--grace takes a duration such as 90s, 30m, 1h or 2d, not \(text)")
    }
    return .milliseconds(Int64(number * scale * 1000))
}
