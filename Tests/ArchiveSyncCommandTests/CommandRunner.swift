import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What one run of the `archive-sync` binary did.
struct CommandResult: Sendable, CustomStringConvertible {
    /// The exit status; 128 + the signal number when the process was killed by a signal.
    let status: Int32
    let stdout: Data
    let stderr: Data

    /// stdout as UTF-8 text.
    var output: String { String(decoding: stdout, as: UTF8.self) }
    /// stderr as UTF-8 text.
    var errorOutput: String { String(decoding: stderr, as: UTF8.self) }

    /// Shown by `#expect` and `#require` when a check fails, so a failure says what the command printed.
    var description: String { "exit \(status)\n--- stdout ---\n\(output)\n--- stderr ---\n\(errorOutput)" }
}

struct CommandRunnerError: Error, CustomStringConvertible {
    let description: String
}

/// The built `archive-sync` binary: the one in the products directory that holds the running
/// test executable (`.build/debug/archive-syncPackageTests.xctest` next to `.build/debug/archive-sync`),
/// or else the one named by the environment variable `ARCHIVE_SYNC_BIN`.
let archiveSyncBinary: String? = locateArchiveSyncBinary()

private func locateArchiveSyncBinary() -> String? {
    let fileManager = FileManager.default
    var directories: [URL] = []
    // The running executable, with symlinks resolved (`.build/debug` is one).
    if let executable = try? fileManager.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
        directories.append(URL(fileURLWithPath: executable).deletingLastPathComponent())
    }
    if let first = CommandLine.arguments.first, !first.isEmpty {
        let url = URL(fileURLWithPath: first, relativeTo: URL(fileURLWithPath: fileManager.currentDirectoryPath))
        directories.append(url.standardizedFileURL.resolvingSymlinksInPath().deletingLastPathComponent())
    }
    // macOS: the test bundle is a directory loaded into `xctest`; the products are beside it.
    for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
        directories.append(bundle.bundleURL.deletingLastPathComponent())
    }
    for directory in directories {
        let candidate = directory.appendingPathComponent("archive-sync").path
        var isDirectory: ObjCBool = false
        if fileManager.fileExists(atPath: candidate, isDirectory: &isDirectory), !isDirectory.boolValue,
            fileManager.isExecutableFile(atPath: candidate)
        {
            return candidate
        }
    }
    if let fromEnvironment = ProcessInfo.processInfo.environment["ARCHIVE_SYNC_BIN"], !fromEnvironment.isEmpty,
        fileManager.isExecutableFile(atPath: fromEnvironment)
    {
        return fromEnvironment
    }
    return nil
}

/// Runs the built `archive-sync` with `arguments`, feeding it `stdin` (or /dev/null when nil),
/// and waits for it to exit.
func runArchiveSync(_ arguments: [String], stdin: Data? = nil, in directory: String? = nil) throws -> CommandResult {
    try RunningCommand(arguments, stdin: stdin, in: directory).wait()
}

/// A started `archive-sync` child process; ``wait()`` collects what it did. Several may run at once.
///
/// stdout and stderr go to temp files rather than pipes, so a chatty child can never block on a
/// full pipe and a child started concurrently by another test can never hold our pipe open.
final class RunningCommand {
    private let process = Process()
    private let scratch: String
    private let handles: [FileHandle]

    /// Signalled once when the child exits, for waits with a deadline.
    private let exited = DispatchSemaphore(value: 0)

    /// Starts `archive-sync arguments` with `stdin` (or /dev/null) in `directory` (or ours);
    /// or, given `executable`, that program with `arguments` (a wrapper such as `unshare`
    /// that goes on to run `archive-sync`).
    init(_ arguments: [String], stdin: Data? = nil, in directory: String? = nil, executable: String? = nil) throws {
        guard let binary = executable ?? archiveSyncBinary else {
            throw CommandRunnerError(
                description: "cannot find the archive-sync binary next to the test executable; build it or set ARCHIVE_SYNC_BIN")
        }
        scratch = try makeTemporaryDirectory(prefix: "archive-sync-run")
        let fileManager = FileManager.default
        guard fileManager.createFile(atPath: scratch + "/stdout", contents: nil),
            fileManager.createFile(atPath: scratch + "/stderr", contents: nil),
            fileManager.createFile(atPath: scratch + "/stdin", contents: stdin ?? Data()),
            let input = stdin == nil ? FileHandle(forReadingAtPath: "/dev/null") : FileHandle(forReadingAtPath: scratch + "/stdin"),
            let output = FileHandle(forWritingAtPath: scratch + "/stdout"),
            let error = FileHandle(forWritingAtPath: scratch + "/stderr")
        else {
            try? fileManager.removeItem(atPath: scratch)
            throw CommandRunnerError(description: "cannot make the child's stdin, stdout and stderr files in \(scratch)")
        }
        handles = [input, output, error]
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        process.standardInput = input
        process.standardOutput = output
        process.standardError = error
        process.terminationHandler = { [exited] _ in exited.signal() }
        do {
            try process.run()
        } catch {
            cleanUp()
            throw error
        }
    }

    /// Waits for the child to exit and returns its status and output.
    func wait() -> CommandResult {
        process.waitUntilExit()
        let status = process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
        let result = CommandResult(
            status: status,
            stdout: FileManager.default.contents(atPath: scratch + "/stdout") ?? Data(),
            stderr: FileManager.default.contents(atPath: scratch + "/stderr") ?? Data())
        cleanUp()
        return result
    }

    /// The child's process id.
    var pid: Int32 { process.processIdentifier }

    /// True until the child has exited.
    var isRunning: Bool { process.isRunning }

    /// What the child has written to stdout so far (it may still be writing).
    var outputSoFar: String { finished ? "" : String(decoding: FileManager.default.contents(atPath: scratch + "/stdout") ?? Data(), as: UTF8.self) }

    /// What the child has written to stderr so far (it may still be writing).
    var errorOutputSoFar: String {
        finished ? "" : String(decoding: FileManager.default.contents(atPath: scratch + "/stderr") ?? Data(), as: UTF8.self)
    }

    /// Sends `signal` to the child, if it still runs.
    func send(_ signal: Int32) {
        if !finished, process.isRunning { signalProcess(process.processIdentifier, signal) }
    }

    /// Waits up to `timeout` for the child to exit: what it did, or nil when it still runs.
    func wait(timeout: Duration) -> CommandResult? {
        if finished { return nil }
        let (seconds, attoseconds) = timeout.components
        let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
        guard exited.wait(timeout: .now() + .nanoseconds(nanoseconds)) == .success else { return nil }
        exited.signal()  // for any later wait
        return wait()
    }

    /// Kills the child at once (a stopped one too) and throws away what it printed. Does
    /// nothing when it was already waited for: meant for `defer`, so no child outlives its test.
    func kill() {
        if finished { return }
        if process.isRunning {
            signalProcess(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        cleanUp()
    }

    deinit {
        // Not waited for (a test stopped early): stop the child rather than leave it behind,
        // politely first; a child stopped by SIGSTOP is continued so that it can exit.
        if finished { return }
        if process.isRunning {
            signalProcess(process.processIdentifier, SIGCONT)
            process.terminate()
            if exited.wait(timeout: .now() + .seconds(5)) == .timedOut { signalProcess(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
        cleanUp()
    }

    private var finished = false

    private func cleanUp() {
        finished = true
        for handle in handles { try? handle.close() }
        try? FileManager.default.removeItem(atPath: scratch)
    }
}

/// Sends `signal` to process `pid` (the libc `kill`, which ``RunningCommand/kill()`` hides).
private func signalProcess(_ pid: Int32, _ signal: Int32) {
    _ = kill(pid, signal)
}

/// Makes a new, empty directory with a unique name under the system's temp directory and
/// returns its path, with symlinks resolved.
func makeTemporaryDirectory(prefix: String = "archive-sync-e2e") throws -> String {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: false)
    return url.resolvingSymlinksInPath().path
}
