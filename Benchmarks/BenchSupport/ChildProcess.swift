// What the benchmarks add to the project's one child-process type (ArchiveProcess's
// `ChildProcess`): every program they start (archive-sync, rsync, unison, ssh, sshd, sleep) is
// spawned, redirected, measured and reaped through it.

import ArchiveProcess
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Call ``ChildProcess/stop()`` or ``ChildProcess/waitUntilExit()`` on every path (`defer`);
/// one still running when it is released is killed.
///
/// Its memory is read from /proc/PID/status, never from `ru_maxrss`: `posix_spawn` starts the
/// child in the parent's address space (vfork), and at `exec` the kernel records the peak of
/// that space, the parent's, as the child's.
extension ChildProcess {
    /// Reads the captured output (`stdout: .pipe`, with `stderr: .standardOutput` for both)
    /// until the child closes it.
    public func readOutput() -> String {
        String(decoding: readStandardOutputToEnd(), as: UTF8.self)
    }

    /// The file stderr goes to, when it goes to one.
    public var logPath: String? {
        if case .file(let path) = errorDestination { path } else { nil }
    }

    /// What it has written to its stderr file so far.
    public var log: String { logPath.flatMap { try? String(contentsOfFile: $0, encoding: .utf8) } ?? "" }

    /// Waits until its stderr file contains `text`. Throws when it exits first or `timeout` passes.
    public func waitForLog(_ text: String, timeout: Duration) throws {
        let deadline = ContinuousClock.now + timeout
        while !log.contains(text) {
            if let status = exitStatus {
                throw BenchError("\(executable) exited with status \(status) before printing '\(text)'; its stderr: \(log)")
            }
            if ContinuousClock.now >= deadline { throw BenchError("\(executable) did not print '\(text)' within \(timeout); its stderr: \(log)") }
            usleep(5_000)
        }
    }

    /// The `kB` fields of /proc/PID/status (VmRSS, VmHWM, RssAnon, RssFile, ...).
    public func memory() throws -> [String: Int] {
        try procStatus(pid)
    }

    /// CPU seconds it has used so far (user + system), from /proc/PID/stat.
    public func cpuSeconds() throws -> Double {
        let text = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // Fields after "(comm)": state is field 3, utime field 14, stime field 15.
        let fields = text[text.index(after: text.lastIndex(of: ")")!)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else {
            throw BenchError("cannot read /proc/\(pid)/stat")
        }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Waits for it to exit. Returns the exit status (128+N for signal N).
    @discardableResult
    public func waitUntilExit() -> Int32 {
        wait().status
    }

    /// Sends SIGTERM, waits up to 10 s, then SIGKILL. Returns the exit status (128+N for
    /// signal N). Later calls return the same.
    @discardableResult
    public func stop() -> Int32 {
        terminate(grace: .seconds(10)).status
    }

    /// Its exit status once it has exited, nil while it runs.
    public var exitStatus: Int32? { termination?.status }
}

/// The `kB` fields of /proc/PID/status.
public func procStatus(_ pid: pid_t) throws -> [String: Int] {
    let text = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
    var fields: [String: Int] = [:]
    for line in text.split(separator: "\n") where line.hasSuffix(" kB") {
        let parts = line.split(separator: ":", maxSplits: 1)
        guard parts.count == 2, let value = Int(parts[1].dropLast(3).trimmingCharacters(in: .whitespaces)) else { continue }
        fields[String(parts[0])] = value
    }
    return fields
}
