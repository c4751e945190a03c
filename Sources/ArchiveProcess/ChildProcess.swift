import ArchiveLocking
import CArchiveShims
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

// Not swift-subprocess (1.0.2): its `run` is async and the child lives only inside its closure,
// where the sync transport keeps a child for the life of a synchronous connection and reads
// and writes its pipes from blocking threads.

/// A child process started with `posix_spawnp` and reaped with `waitpid`: the one way the
/// project starts a program (the sync transport's ssh, the tests' commands, the benchmarks').
///
/// ```swift
/// let child = try ChildProcess("/usr/bin/ssh", ["host", "uptime"], stdout: .pipe, stderr: .collect(lastBytes: 8_192))
/// let output = child.readStandardOutputToEnd()
/// let termination = child.wait()
/// ```
///
/// Not Foundation's `Process`: a program that closes the descriptors it inherits (ssh, sshd)
/// looks to Foundation as if it had exited, and its one watching thread then blocks in
/// `waitpid` until that program ends, stalling the notice of every other child's exit in the
/// process (an app's, a test runner's).
///
/// Only this type reaps its child, and only under its lock, so a signal it sends never
/// reaches a process that took over the pid. One still running when it is released is killed
/// (SIGKILL) and reaped: none is left a zombie. It sets no signal disposition: a write to
/// ``standardInput`` whose reader is gone raises SIGPIPE unless the caller avoids it.
public final class ChildProcess: Sendable {
    /// Where the child's standard input comes from.
    public enum Input: Sendable {
        /// This process's own.
        case inherit
        /// /dev/null: the child reads end-of-file at once.
        case null
        /// A file, read from its start.
        case file(String)
        /// A pipe whose write end is ``ChildProcess/standardInput``.
        case pipe
    }

    /// Where the child's standard output or standard error goes.
    public enum Output: Sendable {
        /// This process's own.
        case inherit
        /// /dev/null.
        case null
        /// A file, created or truncated (mode 0644).
        case file(String)
        /// A pipe whose read end is ``ChildProcess/standardOutput`` (or ``ChildProcess/standardError``).
        /// Read it, or the child blocks once the pipe is full.
        case pipe
        /// Standard error only: read on a thread of its own, which keeps the last `lastBytes`
        /// bytes (``ChildProcess/collectedErrorOutput``), so the child never blocks on a full pipe.
        case collect(lastBytes: Int)
        /// Standard error only: wherever standard output goes (one pipe or file for both).
        case standardOutput
    }

    /// How the child ended.
    public enum Termination: Equatable, Sendable, CustomStringConvertible {
        /// It exited with this status.
        case exited(Int32)
        /// A signal with this number ended it.
        case signalled(Int32)

        /// The status a shell reports: the exit status, or 128 + the signal's number.
        public var status: Int32 {
            switch self {
            case .exited(let status): status
            case .signalled(let signal): 128 + signal
            }
        }

        public var description: String {
            switch self {
            case .exited(let status): "exit \(status)"
            case .signalled(let signal): "signal \(signal)"
            }
        }
    }

    /// The child's process id.
    public let pid: pid_t
    /// The program, as it was named to ``init(_:_:stdin:stdout:stderr:directory:)``.
    public let executable: String
    /// Where its standard error goes.
    public let errorDestination: Output

    private struct State {
        var termination: Termination?
        /// This side's ends of the pipes, or -1.
        var input: Int32 = -1
        var output: Int32 = -1
        var error: Int32 = -1
    }
    private let state: TracedMutex<State>
    private let collector: ErrorCollector?

    /// Starts `executable` with `arguments`. A name without a slash is looked up on `PATH`.
    ///
    /// - Parameters:
    ///   - stdin, stdout, stderr: where its standard streams come from and go.
    ///   - directory: its working directory; nil for this process's.
    /// - Throws: ``ChildProcessError`` when a pipe cannot be made or the program cannot start.
    public init(
        _ executable: String, _ arguments: [String] = [], stdin: Input = .inherit, stdout: Output = .inherit, stderr: Output = .inherit,
        directory: String? = nil
    ) throws(ChildProcessError) {
        precondition(!Self.isStderrOnly(stdout), "standard output cannot be collected or joined to itself")
        // Close-on-exec from the start: a child that another thread starts meanwhile must not
        // hold an end, or this side would never read end-of-file.
        var pipes: [Int32: (read: Int32, write: Int32)] = [:]
        func closeAll() { for pipe in pipes.values { close(pipe.read); close(pipe.write) } }
        let wanted: [(Int32, Bool)] = [(0, Self.isPipe(stdin)), (1, Self.isPipe(stdout)), (2, Self.isPipe(stderr))]
        for (fd, isPipe) in wanted where isPipe {
            var ends: [Int32] = [-1, -1]
            guard archive_pipe_cloexec(&ends) == 0 else {
                let cause = errno
                closeAll()
                throw ChildProcessError(call: "pipe", executable: executable, errno: cause)
            }
            pipes[fd] = (ends[0], ends[1])
        }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        switch stdin {
        case .inherit: break
        case .null: posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        case .file(let path): posix_spawn_file_actions_addopen(&actions, 0, path, O_RDONLY, 0)
        case .pipe: posix_spawn_file_actions_adddup2(&actions, pipes[0]!.read, 0)
        }
        for (output, fd) in [(stdout, Int32(1)), (stderr, 2)] {
            switch output {
            case .inherit: break
            case .null: posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", O_WRONLY, 0)
            case .file(let path): posix_spawn_file_actions_addopen(&actions, fd, path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            case .pipe, .collect: posix_spawn_file_actions_adddup2(&actions, pipes[fd]!.write, fd)
            case .standardOutput: posix_spawn_file_actions_adddup2(&actions, 1, 2)
            }
        }
        // Descriptors this process opened without close-on-exec stay here.
        archive_spawn_addclosefrom(&actions, 3)
        if let directory { archive_spawn_addchdir(&actions, directory) }

        // The child starts with no signal blocked and every signal at its default action, as
        // a program expects: the spawning thread's mask and this process's ignored signals
        // (a test runner's SIGTERM, a command's SIGPIPE) would otherwise carry over exec.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        sigdelset(&allSignals, SIGKILL)
        sigdelset(&allSignals, SIGSTOP)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawnp(&pid, executable, &actions, &attributes, argv, Glibc.environ)
        guard result == 0 else {
            closeAll()
            throw ChildProcessError(call: "posix_spawnp", executable: executable, errno: result)
        }
        // The child's ends are the child's alone now: its exit closes them.
        close(pipes[0]?.read ?? -1)
        close(pipes[1]?.write ?? -1)
        close(pipes[2]?.write ?? -1)

        self.pid = pid
        self.executable = executable
        errorDestination = stderr
        var initial = State()
        initial.input = pipes[0]?.write ?? -1
        initial.output = pipes[1]?.read ?? -1
        if case .collect(let lastBytes) = stderr {
            collector = ErrorCollector(fd: pipes[2]!.read, lastBytes: lastBytes)
        } else {
            collector = nil
            initial.error = pipes[2]?.read ?? -1
        }
        state = TracedMutex(initial)
    }

    private static func isPipe(_ input: Input) -> Bool {
        if case .pipe = input { true } else { false }
    }

    private static func isPipe(_ output: Output) -> Bool {
        switch output {
        case .pipe, .collect: true
        default: false
        }
    }

    private static func isStderrOnly(_ output: Output) -> Bool {
        switch output {
        case .collect, .standardOutput: true
        default: false
        }
    }

    // MARK: - Pipes

    /// The write end of the child's standard input (``Input/pipe``), until ``closeStandardInput()``.
    public var standardInput: Int32? { state.withLock { $0.input >= 0 ? $0.input : nil } }
    /// The read end of the child's standard output (``Output/pipe``), until ``closeStandardOutput()``.
    public var standardOutput: Int32? { state.withLock { $0.output >= 0 ? $0.output : nil } }
    /// The read end of the child's standard error (``Output/pipe``), until ``closeStandardError()``.
    public var standardError: Int32? { state.withLock { $0.error >= 0 ? $0.error : nil } }

    /// Closes this side of the standard-input pipe: the child reads end-of-file.
    public func closeStandardInput() { state.withLock { Self.closeEnd(&$0.input) } }
    /// Closes this side of the standard-output pipe.
    public func closeStandardOutput() { state.withLock { Self.closeEnd(&$0.output) } }
    /// Closes this side of the standard-error pipe.
    public func closeStandardError() { state.withLock { Self.closeEnd(&$0.error) } }

    private static func closeEnd(_ fd: inout Int32) {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }

    /// Reads standard output (``Output/pipe``) until the child closes it, then closes this side.
    public func readStandardOutputToEnd() -> [UInt8] {
        guard let fd = standardOutput else { return [] }
        let bytes = readToEnd(fd)
        closeStandardOutput()
        return bytes
    }

    /// The last bytes the child wrote to standard error (``Output/collect(lastBytes:)``) so far.
    public var collectedErrorOutput: [UInt8] { collector?.bytes ?? [] }

    /// Waits up to `timeout` for the child's standard error (``Output/collect(lastBytes:)``)
    /// to end, which it does when the child and every process that inherited it have exited.
    /// True when it has ended.
    public func waitForErrorOutputEnd(timeout: Duration) -> Bool {
        collector?.waitForEnd(timeout: timeout) ?? true
    }

    // MARK: - Exit

    /// How the child ended, or nil while it runs. Reaps it when it has exited.
    public var termination: Termination? {
        state.withLock { state in
            if let termination = state.termination { return termination }
            var status: Int32 = 0
            var reaped: pid_t
            repeat { reaped = waitpid(pid, &status, WNOHANG) } while reaped < 0 && errno == EINTR
            guard reaped == pid else { return nil }
            let termination: Termination = status & 0x7F == 0 ? .exited((status >> 8) & 0xFF) : .signalled(status & 0x7F)
            state.termination = termination
            return termination
        }
    }

    /// True until the child has exited.
    public var isRunning: Bool { termination == nil }

    /// Waits for the child to exit and reaps it.
    @discardableResult
    public func wait() -> Termination {
        while true {
            if let termination { return termination }
            // Waits without reaping: only `termination` reaps, under the lock.
            var info = siginfo_t()
            let waited = waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT)
            if waited < 0 && errno != EINTR {
                // ECHILD: reaped by another thread's `termination` meanwhile.
                if let termination { return termination }
                usleep(1_000)
            }
        }
    }

    /// Waits up to `timeout` for the child to exit: how it ended, or nil when it still runs.
    public func wait(timeout: Duration) -> Termination? {
        let deadline = ContinuousClock.now + timeout
        var pause: useconds_t = 500
        while true {
            if let termination { return termination }
            if ContinuousClock.now >= deadline { return nil }
            usleep(pause)
            pause = min(pause * 2, 10_000)
        }
    }

    /// Sends `signal` to the child, unless it has been reaped.
    public func send(_ signal: Int32) {
        state.withLock { state in
            if state.termination == nil { _ = Glibc.kill(pid, signal) }
        }
    }

    /// Kills the child (SIGKILL) and reaps it.
    @discardableResult
    public func kill() -> Termination {
        send(SIGKILL)
        return wait()
    }

    /// Asks the child to stop (SIGTERM); one still running after `grace` is killed (SIGKILL).
    /// Reaps it.
    @discardableResult
    public func terminate(grace: Duration) -> Termination {
        if let termination { return termination }
        send(SIGTERM)
        return wait(timeout: grace) ?? kill()
    }

    deinit {
        if termination == nil { kill() }
        state.withLock { state in
            Self.closeEnd(&state.input)
            Self.closeEnd(&state.output)
            Self.closeEnd(&state.error)
        }
    }
}

/// Why a child process could not start: the call that failed and its errno.
public struct ChildProcessError: Error, CustomStringConvertible, Sendable {
    /// The system call that failed: `pipe` or `posix_spawnp`.
    public let call: String
    /// The program that was to start.
    public let executable: String
    /// The call's error number.
    public let errno: Int32

    public var description: String { "cannot start \(executable): \(call): \(String(cString: strerror(errno)))" }
}

/// Reads `fd` until end-of-file (or an error other than EINTR).
private func readToEnd(_ fd: Int32) -> [UInt8] {
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 64 * 1024)
    while true {
        let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if count < 0 && errno == EINTR { continue }
        if count <= 0 { break }
        bytes += chunk[..<count]
    }
    return bytes
}

/// Standard error, read on a thread of its own; keeps the last bytes.
private final class ErrorCollector: Sendable {
    private let buffer = TracedMutex<[UInt8]>([])
    private let ended = DispatchSemaphore(value: 0)

    init(fd: Int32, lastBytes: Int) {
        let thread = Thread { [self] in
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let got = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if got < 0 && errno == EINTR { continue }
                if got <= 0 { break }
                buffer.withLock { buffer in
                    buffer += chunk[..<got]
                    if buffer.count > lastBytes { buffer.removeFirst(buffer.count - lastBytes) }
                }
            }
            close(fd)
            ended.signal()
        }
        thread.start()
    }

    var bytes: [UInt8] { buffer.withLock { $0 } }

    func waitForEnd(timeout: Duration) -> Bool {
        let (seconds, attoseconds) = timeout.components
        let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
        guard ended.wait(timeout: .now() + .nanoseconds(nanoseconds)) == .success else { return false }
        ended.signal()  // for the next wait
        return true
    }
}
