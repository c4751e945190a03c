import ArchiveStore
import BenchSupport
import Foundation

/// Workload 5: scan the unchanged large store, against `rsync -a SRC/ DST/` with nothing to
/// copy (DST is a full rsync copy of the whole store directory, manifest included).
///
/// The store is scanned once first to settle: a scan re-hashes files whose stamp was taken
/// within 2 s of their mtime ("racy"), which is every file just written. Then, for `runs`
/// rounds: an untimed rsync brings DST up to date (each scan writes `last_scan` to the
/// manifest), then rsync, the library scan and the CLI scan are timed. Medians are reported.
func scanUnchanged(_ options: BenchOptions, large: LargeStore) throws -> [String] {
    let built = try large.get()
    var lines: [String] = []
    guard let rsync = findOnPath("rsync") else {
        return ["5. scan: SKIPPED: rsync is not installed (apt-get install -y rsync; `make bench` installs it)"]
    }
    let scratch = try ScratchDirectory(under: options.directory, name: "rsync")
    let source = built.path + "/"
    let copy = try scratch.sub("copy") + "/"

    // Settle: wait out the 2 s racy window of the last write, then scan once.
    let age = (ContinuousClock.now - built.finished).seconds
    if age < 2.1 { Thread.sleep(forTimeInterval: 2.1 - age) }
    var settled: ScanReport?
    let settleSeconds = try seconds { settled = try ArchiveStore(directory: built.path).scan() }
    let settle = settled!
    lines.append(
        "   settling scan: \(grouped(Double(settle.touched))) racy files re-hashed, \(settle.changes.count) changes, in \(String(format: "%.2f s", settleSeconds))"
    )
    let full = try runCapturing(rsync, ["-a", source, copy])
    if full.status != 0 { throw BenchError("rsync -a \(source) \(copy) failed (\(full.status)): \(full.output)") }

    var cli = try findCLI(options)
    var rsyncTimes: [Double] = []
    var openTimes: [Double] = []
    var scanTimes: [Double] = []
    var cliTimes: [Double] = []
    for round in 0..<options.runs {
        _ = try runTimed(rsync, ["-a", source, copy])  // untimed: catch up with the last scan's manifest write
        if round == 0 {
            let dryRun = try runCapturing(rsync, ["-a", "-n", "-i", source, copy])
            let items = dryRun.output.split(separator: "\n").count
            lines.append(
                "   rsync dry run before the timed rsync: \(items) items to copy (\(items == 0 ? "nothing to copy, as intended" : "NOT empty"))")
        }
        let timed = try runTimed(rsync, ["-a", source, copy])
        if timed.status != 0 { throw BenchError("rsync failed with status \(timed.status)") }
        rsyncTimes.append(timed.seconds)

        var store: ArchiveStore?
        var scanned: ScanReport?
        openTimes.append(try seconds { store = try ArchiveStore(directory: built.path) })
        scanTimes.append(try seconds { scanned = try store!.scan() })
        store = nil
        let report = scanned!
        if report.unchanged != built.count || !report.changes.isEmpty || report.touched != 0 {
            lines.append(
                "   NOTE: round \(round + 1) scan was not clean: \(report.unchanged) unchanged, \(report.touched) re-hashed, \(report.changes.count) changes"
            )
        }

        if let binary = cli.path {
            let result = try runTimed(binary, ["scan", built.path])
            if result.status == 0 {
                cliTimes.append(result.seconds)
            } else {
                cli = (nil, "`archive-sync scan \(built.path)` failed with status \(result.status)")
            }
        }
    }
    let rsyncSeconds = median(rsyncTimes)
    let librarySeconds = median(zip(openTimes, scanTimes).map { $0 + $1 })
    let libraryRatio = librarySeconds / rsyncSeconds
    let n = grouped(Double(built.count))
    var result = [
        "5. scan of \(n) unchanged (library): open+scan \(milliseconds(librarySeconds)), rsync \(milliseconds(rsyncSeconds)), ratio \(ratio(libraryRatio)) (target <= 0.5x) \(verdict(libraryRatio <= 0.5))"
    ]
    if let _ = cli.path, cliTimes.count == options.runs {
        let cliSeconds = median(cliTimes)
        let cliRatio = cliSeconds / rsyncSeconds
        result.append(
            "5. scan of \(n) unchanged (CLI `archive-sync scan`): \(milliseconds(cliSeconds)), rsync \(milliseconds(rsyncSeconds)), ratio \(ratio(cliRatio)) (target <= 0.5x) \(verdict(cliRatio <= 0.5))"
        )
    } else {
        result.append("5. scan of \(n) unchanged (CLI): NOT MEASURED: \(cli.reason)")
    }
    result.append(
        "   medians of \(options.runs) rounds; library open \(milliseconds(median(openTimes))), scan \(milliseconds(median(scanTimes))); rsync runs: \(rsyncTimes.map(milliseconds).joined(separator: ", "))"
    )
    return result + lines + large.takeBuildNote()
}

/// The `archive-sync` binary, if it is built and has a `scan` command; otherwise why not.
private func findCLI(_ options: BenchOptions) throws -> (path: String?, reason: String) {
    let path = archiveSyncPath(options.cli)
    guard access(path, X_OK) == 0 else {
        return (nil, "no archive-sync binary at \(path) (build it, or pass --cli PATH); measured through the library only")
    }
    let help = try runCapturing(path, ["scan", "--help"])
    guard help.status == 0, help.output.lowercased().contains("usage: archive-sync scan") else {
        return (
            nil,
            "\(path) has no `scan` command yet (`scan --help` printed \"\(help.output.prefix(60).trimmingCharacters(in: .whitespacesAndNewlines))\"); measured through the library only"
        )
    }
    return (path, "")
}
