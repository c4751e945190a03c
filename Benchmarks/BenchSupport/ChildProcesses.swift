// Child processes, as benchmarks run and time them.

import ArchiveProcess
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

// MARK: - Child processes

/// Runs `executable` with `arguments` and captures what it prints (stdout and stderr).
public func runCapturing(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
    let child = try ChildProcess(executable, arguments, stdout: .pipe, stderr: .standardOutput)
    let output = child.readOutput()
    return (child.waitUntilExit(), output)
}

/// Runs `executable` with `arguments`, its output sent to /dev/null, and times it from spawn
/// to exit. Returns the exit status (128+N for signal N) and the child's peak resident memory
/// in kilobytes.
///
/// The peak is `VmHWM` from `/proc/PID/status`, sampled every 2 ms by another thread while the
/// child runs (it only grows, so the last sample holds the peak up to then), not `wait4`'s
/// `ru_maxrss` (``ChildProcess`` says why).
public func runTimed(_ executable: String, _ arguments: [String]) throws -> (status: Int32, seconds: Double, maxResidentKilobytes: Int) {
    let start = ContinuousClock.now
    let child = try ChildProcess(executable, arguments, stdout: .null, stderr: .null)
    let sampler = PeakMemorySampler(pid: child.pid)
    let status = child.waitUntilExit()
    let elapsed = (ContinuousClock.now - start).seconds
    return (status, elapsed, sampler.stop())
}

/// Reads a running process's `VmHWM` every 2 ms on a thread of its own.
private final class PeakMemorySampler: @unchecked Sendable {
    private let condition = NSCondition()
    private var stopped = false
    private var peak = 0
    private var finished = false

    init(pid: pid_t) {
        Thread { [self] in
            while true {
                condition.lock()
                let done = stopped
                condition.unlock()
                if done { break }
                if let kilobytes = try? procStatus(pid)["VmHWM"] {
                    condition.lock()
                    peak = max(peak, kilobytes)
                    condition.unlock()
                }
                usleep(2_000)
            }
            condition.lock()
            finished = true
            condition.broadcast()
            condition.unlock()
        }.start()
    }

    /// Stops sampling and returns the largest `VmHWM` seen, in kilobytes.
    func stop() -> Int {
        condition.lock()
        defer { condition.unlock() }
        stopped = true
        while !finished { condition.wait() }
        return peak
    }
}

/// The absolute path of `name` found on `PATH`, or nil.
public func findOnPath(_ name: String) -> String? {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
    for directory in path.split(separator: ":") {
        let candidate = "\(directory)/\(name)"
        if access(candidate, X_OK) == 0 { return candidate }
    }
    return nil
}

/// Whether this `rsync` has `--fsync` (rsync 3.2.4 and later): each file it writes flushed
/// to disk, the durability reference the benchmarks print beside plain `rsync -a`.
public func rsyncHasFsync(_ rsync: String) -> Bool {
    guard let help = try? runCapturing(rsync, ["--help"]) else { return false }
    return help.output.contains("--fsync")
}

/// The `archive-sync` binary a benchmark runs: `cli` (its `--cli`), or the one next to the
/// running program (`/proc/self/exe`), where `make bench` builds it.
///
/// The one next to the program is built by a `swift build` of its own: when it is older than
/// the project's newest source file, this warns that it may not be the code being measured.
public func archiveSyncPath(_ cli: String?) -> String {
    if let cli { return cli }
    let me = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    let path = me.deletingLastPathComponent().appendingPathComponent("archive-sync").path
    warnIfOlderThanSources(path)
    return path
}

/// Prints a warning when the binary at `path` is older than a file under the project's
/// `Sources/` (found from this file's own path; nothing is said when it is not there).
private func warnIfOlderThanSources(_ path: String) {
    let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Sources").standardized
    var binary = stat()
    guard stat(path, &binary) == 0, let walk = FileManager.default.enumerator(at: sources, includingPropertiesForKeys: [.contentModificationDateKey])
    else { return }
    let built = Date(timeIntervalSince1970: TimeInterval(binary.st_mtim.tv_sec))
    for case let file as URL in walk {
        guard let modified = try? file.resourceValues(forKeys: [.contentModificationDateKey]).contentModificationDate, modified > built else {
            continue
        }
        print(
            "WARNING: \(path) (built \(built)) is older than \(file.path) (\(modified)): rebuild it with"
                + " `swift build -c release --static-swift-stdlib --package-path Benchmarks --product archive-sync`, or pass --cli PATH")
        return
    }
}

/// ``archiveSyncPath(_:)``, or an error saying how to build it when it is not there.
public func archiveSyncBinary(_ cli: String?) throws -> String {
    let path = archiveSyncPath(cli)
    guard access(path, X_OK) == 0 else {
        throw BenchError(
            "no archive-sync binary at \(path): build it beside the benchmarks (`make bench` does, or"
                + " `swift build -c release --static-swift-stdlib --package-path Benchmarks --product archive-sync`), or pass --cli PATH"
        )
    }
    return path
}

// MARK: - Watchers

/// Starts `archive-sync watch STORE` in the background; the caller stops it.
public func startWatcher(cli: String, store: String) throws -> ChildProcess {
    try ChildProcess(cli, ["watch", store], stdout: .null, stderr: .null)
}

/// Waits until `archive-sync status` reports each store kept current by a watcher.
public func waitUntilCurrent(cli: String, stores: [String]) throws {
    let deadline = ContinuousClock.now + .seconds(120)
    for store in stores {
        while true {
            let status = try runCapturing(cli, ["status", store, "--json"]).output
            if status.contains("\"currentSince\"") { break }
            if ContinuousClock.now > deadline { throw BenchError("the watcher of \(store) did not catch up in 120 s") }
            Thread.sleep(forTimeInterval: 0.1)
        }
    }
}
