import ArchiveProcess
import ArchiveStore
import BenchSupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Workload 2: a burst of `count` new files written as fast as possible into a store watched
/// by the real `archive-sync watch` process (default options: debounce 50 ms), timed from the
/// first write until this process sees all of them in the manifest's live object count
/// (polled every 10 ms; not `status()`, whose probe would make the watcher record at once).
/// The baseline: the same files written into a fresh store with no watcher, then one
/// `store.scan()`, timed by itself.
func burst(_ options: BenchOptions) throws -> [String] {
    let cli = try archiveSyncBinary(options.cli)
    let scratch = try ScratchDirectory(under: options.directory, name: "burst")
    let count = options.burst
    let files = try Person.encoded(0..<count)
    let collection = ArchiveStore.collectionName(of: Person.self)

    // Watched: `archive-sync watch` runs while the files are written.
    let watchedPath = try scratch.sub("watched")
    let watched = try ArchiveStore(directory: watchedPath)
    try watched.save(Person.sample(-1), forKey: "seed")  // makes STORE/Person/
    let watcher = try ChildProcess(cli, ["watch", watchedPath], stdout: .null, stderr: .file(scratch.path + "/watch.log"))
    defer { watcher.stop() }
    try watcher.waitForLog("caught up", timeout: .seconds(60))
    let watchedDirectory = try openDirectory(watchedPath + "/" + collection)
    defer { close(watchedDirectory) }

    let cpuBefore = try watcher.cpuSeconds()
    let start = ContinuousClock.now
    for n in 0..<count { try writeExternalFile(files[n], named: Person.file(n), in: watchedDirectory) }
    let written = ContinuousClock.now
    var recorded = 0
    var polls = 0
    while true {
        recorded = try watched.liveObjectCount()
        polls += 1
        if recorded >= count + 1 { break }
        if ContinuousClock.now - start > .seconds(300) {
            throw BenchError("after 300 s the watcher had recorded \(recorded - 1) of \(count) files; its stderr: \(watcher.log)")
        }
        usleep(10_000)
    }
    let done = ContinuousClock.now
    let cpu = try watcher.cpuSeconds() - cpuBefore
    let status = watcher.stop()
    let log = watcher.log
    if status != 0 { throw BenchError("archive-sync watch exited with status \(status); its stderr: \(log)") }
    let overflows = log.components(separatedBy: "overflowed").count - 1
    let fullScans = log.components(separatedBy: "full scan:").count - 1
    let errors = log.split(separator: "\n").filter { $0.contains("error") }

    // Baseline: the same files with no watcher, then one scan.
    let scannedPath = try scratch.sub("scanned")
    let scanned = try ArchiveStore(directory: scannedPath)
    try scanned.save(Person.sample(-1), forKey: "seed")
    let scannedDirectory = try openDirectory(scannedPath + "/" + collection)
    defer { close(scannedDirectory) }
    let baselineWrites = try seconds {
        for n in 0..<count { try writeExternalFile(files[n], named: Person.file(n), in: scannedDirectory) }
    }
    var report: ScanReport?
    let cpuBeforeScan = processCPUSeconds()
    let scanSeconds = try seconds { report = try scanned.scan() }
    let scanCPU = processCPUSeconds() - cpuBeforeScan
    if report!.created != count { throw BenchError("the scan recorded \(report!.created) new objects, not \(count)") }

    let total = (done - start).seconds
    let writes = (written - start).seconds
    let unwatched = baselineWrites + scanSeconds
    return [
        "2. burst of \(grouped(count)) files: watched by `archive-sync watch`, first write -> all recorded \(milliseconds(total));"
            + " unwatched, store.scan() \(milliseconds(scanSeconds)): ratio \(ratio(total / scanSeconds)); overflow: \(overflows > 0 ? "YES (\(overflows))" : "no")",
        "   watched: the writes took \(milliseconds(writes)) and the last object was recorded \(milliseconds(total - writes)) after the last write"
            + " (the manifest's count polled every 10 ms, \(polls) times); the watcher used \(String(format: "%.2f s", cpu)) of CPU; \(fullScans) full scans in the watcher's log\(errors.isEmpty ? "" : "; \(errors.count) error lines: \(errors[0])")",
        "   unwatched: the writes took \(milliseconds(baselineWrites)), then the scan (\(String(format: "%.2f s", scanCPU)) of CPU): \(milliseconds(unwatched)) in all;"
            + " ratio of the watched burst to writes + scan \(ratio(total / unwatched))",
    ]
}

/// CPU seconds this process has used so far (all threads, user + system).
private func processCPUSeconds() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}
