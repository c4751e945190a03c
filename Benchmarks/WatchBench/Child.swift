import BenchSupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A child process started with `posix_spawn`: stdout to /dev/null, stderr to a file, so that
/// its log can be read while it runs. `stop()` ends it; call it on every path (`defer`).
///
/// Its memory is read from /proc/PID/status, never from `ru_maxrss`: `posix_spawn` starts the
/// child in the parent's address space (vfork), and at `exec` the kernel records the peak of
/// that space, the parent's, as the child's.
final class ChildProcess {
    let pid: pid_t
    let executable: String
    /// Where its stderr goes.
    let logPath: String
    private var exited: Int32?

    init(_ executable: String, _ arguments: [String], logPath: String) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, logPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        if rc != 0 { throw BenchError("cannot start \(executable): \(String(cString: strerror(rc)))") }
        self.pid = pid
        self.executable = executable
        self.logPath = logPath
    }

    /// What it has written to stderr so far.
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Waits until its stderr contains `text`. Throws when it exits first or `timeout` passes.
    func waitForLog(_ text: String, timeout: Duration) throws {
        let deadline = ContinuousClock.now + timeout
        while !log.contains(text) {
            if let status = reap(blocking: false) {
                throw BenchError("\(executable) exited with status \(status) before printing '\(text)'; its stderr: \(log)")
            }
            if ContinuousClock.now >= deadline { throw BenchError("\(executable) did not print '\(text)' within \(timeout); its stderr: \(log)") }
            usleep(5_000)
        }
    }

    /// The `kB` fields of /proc/PID/status (VmRSS, VmHWM, RssAnon, RssFile, ...).
    func memory() throws -> [String: Int] {
        try procStatus(pid)
    }

    /// CPU seconds it has used so far (user + system), from /proc/PID/stat.
    func cpuSeconds() throws -> Double {
        let text = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // Fields after "(comm)": state is field 3, utime field 14, stime field 15.
        let fields = text[text.index(after: text.lastIndex(of: ")")!)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else {
            throw BenchError("cannot read /proc/\(pid)/stat")
        }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Sends SIGTERM, waits up to 10 s, then SIGKILL. Returns the exit status (128+N for
    /// signal N). Later calls return the same.
    @discardableResult
    func stop() -> Int32 {
        if let exited { return exited }
        kill(pid, SIGTERM)
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if let result = reap(blocking: false) { return result }
            usleep(5_000)
        }
        kill(pid, SIGKILL)
        return reap(blocking: true)!
    }

    /// Its exit status once it has exited, nil while it runs.
    var exitStatus: Int32? { reap(blocking: false) }

    /// `waitpid` once; nil while it runs.
    private func reap(blocking: Bool) -> Int32? {
        if let exited { return exited }
        var status: Int32 = 0
        var rc: pid_t
        repeat { rc = waitpid(pid, &status, blocking ? 0 : WNOHANG) } while rc < 0 && errno == EINTR
        guard rc == pid else { return nil }
        exited = status & 0x7F == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        return exited
    }

    deinit { stop() }
}

/// The `kB` fields of /proc/PID/status.
func procStatus(_ pid: pid_t) throws -> [String: Int] {
    let text = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
    var fields: [String: Int] = [:]
    for line in text.split(separator: "\n") where line.hasSuffix(" kB") {
        let parts = line.split(separator: ":", maxSplits: 1)
        guard parts.count == 2, let value = Int(parts[1].dropLast(3).trimmingCharacters(in: .whitespaces)) else { continue }
        fields[String(parts[0])] = value
    }
    return fields
}

/// The `archive-sync` binary: `--cli`, or the one next to this program (`/proc/self/exe`).
func archiveSyncBinary(_ options: BenchOptions) throws -> String {
    let path: String
    if let cli = options.cli {
        path = cli
    } else {
        let me = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        path = URL(fileURLWithPath: me).deletingLastPathComponent().appendingPathComponent("archive-sync").path
    }
    guard access(path, X_OK) == 0 else {
        throw BenchError(
            "no archive-sync binary at \(path): build it with `swift build -c release --product archive-sync` (same --scratch-path), or pass --cli PATH"
        )
    }
    return path
}
