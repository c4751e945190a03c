import ArchiveProcess
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// What one run of a program (`archive-sync`, mostly) did.
public struct CommandResult: Sendable, CustomStringConvertible {
    /// The exit status; 128 + the signal number when the process was killed by a signal.
    public let status: Int32
    public let stdout: Data
    public let stderr: Data

    public init(status: Int32, stdout: Data, stderr: Data) {
        self.status = status
        self.stdout = stdout
        self.stderr = stderr
    }

    /// stdout as UTF-8 text.
    public var output: String { String(decoding: stdout, as: UTF8.self) }
    /// stderr as UTF-8 text.
    public var errorOutput: String { String(decoding: stderr, as: UTF8.self) }

    /// Shown by `#expect` and `#require` when a check fails, so a failure says what the command printed.
    public var description: String { "exit \(status)\n--- stdout ---\n\(output)\n--- stderr ---\n\(errorOutput)" }
}

/// A helper of the tests could not do its part; the description says what and why.
public struct TestSupportError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Runs the built `archive-sync` with `arguments`, feeding it `stdin` (or /dev/null when nil),
/// in `directory` (or ours), and waits for it to exit.
public func runArchiveSync(_ arguments: [String], stdin: Data? = nil, in directory: String? = nil) throws -> CommandResult {
    try RunningCommand(arguments, stdin: stdin, in: directory).wait()
}

/// Runs `archive-sync arguments` on a thread of its own (``offPool(_:)``) and waits for it,
/// at most `timeout` (``RunningCommand/finish(within:)``).
public func runArchiveSyncOffPool(_ arguments: [String], stdin: Data? = nil, timeout: Duration = .seconds(600)) async throws -> CommandResult {
    try await offPool { try RunningCommand(arguments, stdin: stdin).finish(within: timeout) }
}

/// Runs `executable` with `arguments` (stdin /dev/null) and waits for it to exit.
public func run(_ executable: String, _ arguments: [String]) throws -> CommandResult {
    try RunningCommand(arguments, executable: executable).wait()
}

/// Runs blocking work on a thread of its own: the test runner's cooperative threads (as many
/// as cores, 2 here) stay free for the tests that run alongside. A task on an executor of its
/// own runs it: a task inherits its creator's task-local values, so an expectation that fails
/// in `body` is the test's (from a bare thread, Swift Testing would not know which test
/// recorded it, and would count the test passed).
public func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    let executor = ThreadExecutor(name: "offPool")
    defer { executor.finish() }
    return try await Task(executorPreference: executor) { try body() }.value
}

/// A started child process (`archive-sync`, or another program); ``wait()`` collects what it
/// did. Several may run at once; each is used from one thread at a time.
///
/// stdout and stderr go to temp files rather than pipes, so a chatty child can never block on a
/// full pipe and a child started concurrently by another test can never hold our pipe open.
public final class RunningCommand: @unchecked Sendable {
    private let child: ChildProcess
    private let arguments: [String]
    private let scratch: String
    private var finished = false

    /// Starts `archive-sync arguments` with `stdin` (or /dev/null) in `directory` (or ours);
    /// or, given `executable`, that program with `arguments` (a wrapper such as `unshare`
    /// that goes on to run `archive-sync`).
    public init(_ arguments: [String], stdin: Data? = nil, in directory: String? = nil, executable: String? = nil) throws {
        guard let program = executable ?? archiveSyncBinary else {
            throw TestSupportError("cannot find the archive-sync binary next to the test executable; build it or set ARCHIVE_SYNC_BIN")
        }
        self.arguments = arguments
        scratch = try makeTemporaryDirectory(prefix: "archive-sync-run")
        let fileManager = FileManager.default
        guard fileManager.createFile(atPath: scratch + "/stdout", contents: nil),
            fileManager.createFile(atPath: scratch + "/stderr", contents: nil),
            fileManager.createFile(atPath: scratch + "/stdin", contents: stdin ?? Data())
        else {
            try? fileManager.removeItem(atPath: scratch)
            throw TestSupportError("cannot make the child's stdin, stdout and stderr files in \(scratch)")
        }
        do {
            child = try ChildProcess(
                program, arguments, stdin: stdin == nil ? .null : .file(scratch + "/stdin"), stdout: .file(scratch + "/stdout"),
                stderr: .file(scratch + "/stderr"), directory: directory)
        } catch {
            try? fileManager.removeItem(atPath: scratch)
            throw error
        }
    }

    /// Waits for the child to exit and returns its status and output.
    public func wait() -> CommandResult {
        result(child.wait())
    }

    /// Waits for the child to exit and returns what it did. Past `timeout` (generous: the
    /// thread sanitizer makes a child 5-15x slower), kills it and throws what it was doing:
    /// a hung child fails its test with that, never hangs it.
    public func finish(within timeout: Duration = .seconds(600)) throws -> CommandResult {
        if let termination = child.wait(timeout: timeout) { return result(termination) }
        let state = describeProcessTree(pid)
        let errorOutput = errorOutputSoFar
        kill()
        throw TestSupportError("\(arguments) did not exit within \(timeout); it was: \(state)\n--- stderr ---\n\(errorOutput)")
    }

    private func result(_ termination: ChildProcess.Termination) -> CommandResult {
        let result = CommandResult(
            status: termination.status,
            stdout: FileManager.default.contents(atPath: scratch + "/stdout") ?? Data(),
            stderr: FileManager.default.contents(atPath: scratch + "/stderr") ?? Data())
        cleanUp()
        return result
    }

    /// The child's process id.
    public var pid: Int32 { child.pid }

    /// True until the child has exited.
    public var isRunning: Bool { child.isRunning }

    /// What the child has written to stdout so far (it may still be writing).
    public var outputSoFar: String {
        finished ? "" : String(decoding: FileManager.default.contents(atPath: scratch + "/stdout") ?? Data(), as: UTF8.self)
    }

    /// What the child has written to stderr so far (it may still be writing).
    public var errorOutputSoFar: String {
        finished ? "" : String(decoding: FileManager.default.contents(atPath: scratch + "/stderr") ?? Data(), as: UTF8.self)
    }

    /// Sends `signal` to the child, if it still runs.
    public func send(_ signal: Int32) {
        if !finished { child.send(signal) }
    }

    /// Waits up to `timeout` for the child to exit: what it did, or nil when it still runs.
    public func wait(timeout: Duration) -> CommandResult? {
        if finished { return nil }
        return child.wait(timeout: timeout).map(result)
    }

    /// Kills the child at once (a stopped one too) and throws away what it printed. Does
    /// nothing when it was already waited for: meant for `defer`, so no child outlives its test.
    public func kill() {
        if finished { return }
        child.kill()
        cleanUp()
    }

    deinit {
        // Not waited for (a test stopped early): stop the child rather than leave it behind,
        // politely first; a child stopped by SIGSTOP is continued so that it can exit.
        if finished { return }
        if child.isRunning {
            child.send(SIGCONT)
            child.terminate(grace: .seconds(5))
        }
        cleanUp()
    }

    private func cleanUp() {
        finished = true
        try? FileManager.default.removeItem(atPath: scratch)
    }
}

/// A process and its descendants, one line each: pid, state (Z: exited but not reaped), what
/// each thread waits in, and the command: what a test says about a child that did not exit.
public func describeProcessTree(_ root: Int32) -> String {
    var lines: [String] = []
    var queue = [root]
    while let pid = queue.first {
        queue.removeFirst()
        let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
        guard let close = stat.lastIndex(of: ")") else {
            lines.append("\(pid): gone")
            continue
        }
        let state = stat[stat.index(close, offsetBy: 2)...].prefix(1)
        let command = ((try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8)) ?? "").replacingOccurrences(of: "\0", with: " ")
        let threads = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []).map { thread in
            ((try? String(contentsOfFile: "/proc/\(pid)/task/\(thread)/wchan", encoding: .utf8)) ?? "?").trimmingCharacters(in: .whitespaces)
        }
        lines.append("\(pid) \(state) [\(threads.joined(separator: ","))] \(command.prefix(200))")
        let children = (try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8)) ?? ""
        queue += children.split(separator: " ").compactMap { Int32($0) }
    }
    return lines.joined(separator: "\n")
}
