// Child processes, as benchmarks run and time them.

import Foundation

#if canImport(Glibc)
    import Glibc
#endif

// MARK: - Child processes

/// Runs `executable` with `arguments` and captures what it prints (stdout and stderr). Not for
/// timing: Foundation's `waitUntilExit` polls in 50 ms steps.
public func runCapturing(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    try process.run()
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: output, as: UTF8.self))
}

/// Runs `executable` with `arguments`, its output sent to /dev/null, and times it from spawn
/// to exit with `posix_spawn` and `waitpid`. Returns the exit status (128+N for signal N) and
/// the child's peak resident memory in kilobytes.
///
/// The peak is `VmHWM` from `/proc/PID/status`, sampled every 2 ms by another thread while the
/// child runs (it only grows, so the last sample holds the peak up to then), not `wait4`'s
/// `ru_maxrss`: on Linux that counts the memory of the process that spawned the child, since
/// a spawned child execs from its parent's address space, and a benchmark's own is large.
public func runTimed(_ executable: String, _ arguments: [String]) throws -> (status: Int32, seconds: Double, maxResidentKilobytes: Int) {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    let start = ContinuousClock.now
    let rc = posix_spawn(&pid, executable, &actions, nil, argv, environ)
    if rc != 0 { throw BenchError("cannot start \(executable): \(String(cString: strerror(rc)))") }
    let sampler = PeakMemorySampler(pid: pid)
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 {
        if errno != EINTR { throw BenchError("waitpid: \(String(cString: strerror(errno)))") }
    }
    let elapsed = (ContinuousClock.now - start).seconds
    let peak = sampler.stop()
    let exited = status & 0x7F == 0
    return (exited ? (status >> 8) & 0xFF : 128 + (status & 0x7F), elapsed, peak)
}

/// Reads a running process's `VmHWM` every 2 ms on a thread of its own.
private final class PeakMemorySampler: @unchecked Sendable {
    private let condition = NSCondition()
    private var stopped = false
    private var peak = 0
    private var finished = false

    init(pid: pid_t) {
        Thread { [self] in
            let path = "/proc/\(pid)/status"
            while true {
                condition.lock()
                let done = stopped
                condition.unlock()
                if done { break }
                if let text = try? String(contentsOfFile: path, encoding: .utf8),
                    let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
                    let kilobytes = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
                {
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

// MARK: - Watchers

/// Starts `archive-sync watch STORE` in the background; the caller terminates it.
public func startWatcher(cli: String, store: String) throws -> Process {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: cli)
    process.arguments = ["watch", store]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    return process
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
