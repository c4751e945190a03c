// The one child-process type of the benchmarks: every program they start (archive-sync,
// rsync, unison, ssh, sshd, sleep) is spawned, redirected, measured and reaped through it.

import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A child process started with `posix_spawn`. Call ``stop()`` or ``waitUntilExit()`` on every
/// path (`defer`); one still running when it is released is stopped.
///
/// Its memory is read from /proc/PID/status, never from `ru_maxrss`: `posix_spawn` starts the
/// child in the parent's address space (vfork), and at `exec` the kernel records the peak of
/// that space, the parent's, as the child's.
public final class ChildProcess {
    /// Where one of the child's standard streams goes.
    public enum Stream: Sendable {
        /// This process's own.
        case inherit
        /// /dev/null.
        case null
        /// A file: created or truncated for stdout and stderr, read for stdin.
        case file(String)
        /// A pipe that ``readOutput()`` reads; stdout and stderr both captured share one pipe.
        /// Not for stdin.
        case capture
    }

    public let pid: pid_t
    public let executable: String
    /// The file stderr goes to, when it goes to one.
    public let logPath: String?
    /// The read end of the captured output's pipe, or -1.
    private var output: Int32
    private var exited: Int32?

    public init(_ executable: String, _ arguments: [String], stdin: Stream = .inherit, stdout: Stream = .null, stderr: Stream = .null) throws {
        var ends: [Int32] = [-1, -1]
        let captures = [stdout, stderr].contains { if case .capture = $0 { true } else { false } }
        if captures {
            // Close-on-exec, so that only the dup2'd copies reach the child (and no other child).
            guard pipe(&ends) == 0 else { throw BenchError("pipe: \(String(cString: strerror(errno)))") }
            for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (stream, fd) in [(stdin, Int32(0)), (stdout, 1), (stderr, 2)] {
            let flags = fd == 0 ? O_RDONLY : O_WRONLY | O_CREAT | O_TRUNC
            switch stream {
            case .inherit: break
            case .null: posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", flags, 0)
            case .file(let path): posix_spawn_file_actions_addopen(&actions, fd, path, flags, 0o644)
            case .capture:
                precondition(fd != 0, "stdin cannot be captured")
                posix_spawn_file_actions_adddup2(&actions, ends[1], fd)
            }
        }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        if captures { close(ends[1]) }
        if rc != 0 {
            if captures { close(ends[0]) }
            throw BenchError("cannot start \(executable): \(String(cString: strerror(rc)))")
        }
        self.pid = pid
        self.executable = executable
        if case .file(let path) = stderr { logPath = path } else { logPath = nil }
        output = ends[0]
    }

    /// Reads the captured output (stdout and stderr) until the child closes it.
    public func readOutput() -> String {
        guard output >= 0 else { return "" }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(output, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            bytes += buffer[..<count]
        }
        close(output)
        output = -1
        return String(decoding: bytes, as: UTF8.self)
    }

    /// What it has written to its stderr file so far.
    public var log: String { logPath.flatMap { try? String(contentsOfFile: $0, encoding: .utf8) } ?? "" }

    /// Waits until its stderr file contains `text`. Throws when it exits first or `timeout` passes.
    public func waitForLog(_ text: String, timeout: Duration) throws {
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
        reap(blocking: true)!
    }

    /// Sends SIGTERM, waits up to 10 s, then SIGKILL. Returns the exit status (128+N for
    /// signal N). Later calls return the same.
    @discardableResult
    public func stop() -> Int32 {
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
    public var exitStatus: Int32? { reap(blocking: false) }

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

    deinit {
        stop()
        if output >= 0 { close(output) }
    }
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
