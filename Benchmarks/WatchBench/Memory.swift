import ArchiveProcess
import ArchiveStore
import BenchSupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Workload 3: resident memory of `archive-sync watch` on a store of `storeSize` objects.
///
/// The store is built with 10 batches. The watcher is started 2.1 s later, so that the stamps
/// its first scan records are no longer racy; that scan re-hashes the files whose stamp was
/// taken within 2 s of their mtime (most of them). 1 s after its "caught up" line, VmRSS and
/// VmHWM (the peak, during the first scan) are read from /proc/PID/status (MB = 1,024 kB).
/// It is then stopped and started again on the now settled store, as on a restart: that
/// first scan finds every file unchanged.
/// For scale: the same watcher on a one-object store, `archive-sync status` on the large store
/// (its VmHWM, sampled until it exits), and `sleep 100`.
func memory(_ options: BenchOptions) throws -> [String] {
    let cli = try archiveSyncBinary(options.cli)
    let scratch = try ScratchDirectory(under: options.directory, name: "memory")
    let count = options.storeSize
    let storePath = try scratch.sub("store")
    var built = 0
    let buildSeconds = try seconds { built = try buildLargeStore(at: storePath, count: count) }
    Thread.sleep(forTimeInterval: 2.1)

    let first = try watchMemory(cli, storePath, log: scratch.path + "/watch-first.log")
    let restart = try watchMemory(cli, storePath, log: scratch.path + "/watch-restart.log")
    let smallPath = try scratch.sub("small")
    try ArchiveStore(directory: smallPath).save(Person.sample(0), forKey: Person.key(0))
    let small = try watchMemory(cli, smallPath, log: scratch.path + "/watch-small.log")

    let statusPeak = try sampledPeak(cli, ["status", storePath], log: scratch.path + "/status.log")
    let sleeper = try ChildProcess("/bin/sleep", ["100"], stdout: .null, stderr: .file(scratch.path + "/sleep.log"))
    defer { sleeper.stop() }
    Thread.sleep(forTimeInterval: 0.2)
    let sleepRSS = try sleeper.memory()["VmRSS"] ?? 0

    let rss = first.after["VmRSS"] ?? 0
    let budget = 40 * 1024
    func mb(_ fields: [String: Int], _ name: String) -> String { megabytes(kilobytes: fields[name] ?? 0) }
    func rssLine(_ fields: [String: Int]) -> String {
        "VmRSS \(mb(fields, "VmRSS")) (anon \(mb(fields, "RssAnon")) + file \(mb(fields, "RssFile"))), VmHWM \(mb(fields, "VmHWM"))"
    }
    return [
        "3. memory of `archive-sync watch` on \(grouped(built)) objects: VmRSS \(megabytes(kilobytes: rss)), ratio \(ratio(Double(rss) / Double(budget))) of the budget"
            + " (target < 40 MB) \(verdict(rss < budget)); peak VmHWM \(mb(first.after, "VmHWM"))",
        "   first start: \(rssLine(first.after)); at the caught-up line VmRSS \(mb(first.caughtUp, "VmRSS")),"
            + " caught up in \(milliseconds(first.caughtUpSeconds)) (\(first.summary))",
        "   restart on the settled store: \(rssLine(restart.after)); caught up in \(milliseconds(restart.caughtUpSeconds)) (\(restart.summary))",
        "   for scale: the same watcher on a 1-object store \(rssLine(small.after)); `archive-sync status` on the large store:"
            + " VmHWM \(megabytes(kilobytes: statusPeak)); `sleep 100`: VmRSS \(megabytes(kilobytes: sleepRSS))",
        "   (the store was built with \(largeStoreBatches) batches in \(String(format: "%.1f s", buildSeconds)))",
    ]
}

/// Starts `archive-sync watch STORE`, waits for its "caught up" line, and reads its memory
/// then and 1 s later; stops it.
private func watchMemory(_ cli: String, _ store: String, log: String) throws -> (
    caughtUp: [String: Int], after: [String: Int], caughtUpSeconds: Double, summary: String
) {
    let start = ContinuousClock.now
    let watcher = try ChildProcess(cli, ["watch", store], stdout: .null, stderr: .file(log))
    defer { watcher.stop() }
    try watcher.waitForLog("caught up", timeout: .seconds(120))
    let caughtUpSeconds = (ContinuousClock.now - start).seconds
    let caughtUp = try watcher.memory()
    Thread.sleep(forTimeInterval: 1)
    let after = try watcher.memory()
    let status = watcher.stop()
    if status != 0 { throw BenchError("archive-sync watch exited with status \(status); its stderr: \(watcher.log)") }
    // "watching STORE: caught up (0 created, 0 modified, 0 deleted, 100000 unchanged)"
    let line = watcher.log.split(separator: "\n").first { $0.contains("caught up") } ?? ""
    let summary = line.split(separator: "(", maxSplits: 1).last.map { String($0.dropLast()) } ?? ""
    return (caughtUp, after, caughtUpSeconds, summary)
}

/// Runs a short command to its end, reading its VmHWM from /proc/PID/status as often as it can;
/// the last reading is its peak (unless it grew in its last few hundred microseconds).
private func sampledPeak(_ executable: String, _ arguments: [String], log: String) throws -> Int {
    let child = try ChildProcess(executable, arguments, stdout: .null, stderr: .file(log))
    var peak = 0
    while child.exitStatus == nil {
        if let hwm = try? procStatus(child.pid)["VmHWM"] { peak = max(peak, hwm) }
        usleep(100)
    }
    if child.exitStatus != 0 {
        throw BenchError("\(executable) \(arguments.joined(separator: " ")) exited with status \(child.exitStatus!): \(child.log)")
    }
    return peak
}
