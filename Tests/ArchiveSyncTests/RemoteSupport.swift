import ArchiveStore
import Foundation
import Testing

@testable import ArchiveSync

#if canImport(Glibc)
    import Glibc
#endif

struct RemoteTestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The built `archive-sync` binary beside the test executable, or `ARCHIVE_SYNC_BIN`.
let archiveSyncBinary: String = {
    var candidates: [String] = []
    if let executable = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
        candidates.append(URL(fileURLWithPath: executable).deletingLastPathComponent().appendingPathComponent("archive-sync").path)
    }
    if let first = CommandLine.arguments.first {
        candidates.append(
            URL(fileURLWithPath: first).standardizedFileURL.resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent(
                "archive-sync"
            )
            .path)
    }
    candidates.append(ProcessInfo.processInfo.environment["ARCHIVE_SYNC_BIN"] ?? "")
    return candidates.first { !$0.isEmpty && FileManager.default.isExecutableFile(atPath: $0) } ?? "archive-sync"
}()

/// What one child process did.
struct ChildResult: CustomStringConvertible {
    let status: Int32
    let output: String
    let errorOutput: String
    var description: String { "exit \(status)\n--- stdout ---\n\(output)\n--- stderr ---\n\(errorOutput)" }
}

/// A child process with its stdout and stderr in temp files (no pipe can fill up). Used from
/// one test at a time.
final class Child: @unchecked Sendable {
    let process = Process()
    private let scratch: String

    init(_ executable: String, _ arguments: [String], stdin: Data? = nil) throws {
        scratch = NSTemporaryDirectory() + "/archive-sync-child-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: scratch + "/in", contents: stdin ?? Data())
        _ = FileManager.default.createFile(atPath: scratch + "/out", contents: nil)
        _ = FileManager.default.createFile(atPath: scratch + "/err", contents: nil)
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = FileHandle(forReadingAtPath: scratch + "/in")
        process.standardOutput = FileHandle(forWritingAtPath: scratch + "/out")
        process.standardError = FileHandle(forWritingAtPath: scratch + "/err")
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }

    /// Waits for the child to exit and returns what it did. Past `timeout` (generous: the
    /// thread sanitizer makes a child 5-15x slower), kills it and throws what it was doing:
    /// a hung child fails its test with that, never hangs it.
    func wait(timeout: Duration = .seconds(600)) throws -> ChildResult {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            guard ContinuousClock.now < deadline else {
                let state = describeProcessTree(pid)
                kill(pid, SIGKILL)
                throw RemoteTestError(
                    "\(process.arguments ?? []) did not exit within \(timeout); it was: \(state)\n--- stderr ---\n\(errorOutput)")
            }
            usleep(10_000)
        }
        process.waitUntilExit()
        let status = process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        return ChildResult(
            status: status, output: String(decoding: FileManager.default.contents(atPath: scratch + "/out") ?? Data(), as: UTF8.self),
            errorOutput: errorOutput)
    }

    private var errorOutput: String { String(decoding: FileManager.default.contents(atPath: scratch + "/err") ?? Data(), as: UTF8.self) }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            // Foundation notices the exit on a thread of its own: bounded, as every wait here.
            for _ in 0..<1_000 where process.isRunning { usleep(10_000) }
        }
        try? FileManager.default.removeItem(atPath: scratch)
    }
}

/// A process and its descendants, one line each: pid, state (Z: exited but not reaped), what
/// each thread waits in, and the command: what a test says about a child that did not exit.
func describeProcessTree(_ root: Int32) -> String {
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

/// Runs `archive-sync arguments` and waits for it (at most `timeout`), on a thread of its own.
func runArchiveSync(_ arguments: [String], stdin: Data? = nil, timeout: Duration = .seconds(600)) async throws -> ChildResult {
    try await offPool { try Child(archiveSyncBinary, arguments, stdin: stdin).wait(timeout: timeout) }
}

/// Runs blocking work on a thread of its own: the test runner's cooperative threads (as many
/// as cores, 2 here) stay free for the tests that run alongside.
func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

/// A `serve --stdio` child of this process, over pipes: the protocol without ssh.
func pipeReplica(_ path: String, versions: ClosedRange<UInt32> = Wire.versions) throws -> RemoteReplica {
    try RemoteReplica(command: [archiveSyncBinary, "serve", "--stdio", path], name: "pipe:\(path)", versions: versions)
}

/// An sshd of its own on 127.0.0.1: a generated host key, a generated user key, its config
/// in a temp directory, on a free port. Started by ``start()``, stopped by its pid in ``stop()``.
/// A test that needs it fails (never skips) when it cannot start: `make test` installs openssh-server.
final class SSHServer {
    let directory: String
    let port: Int
    /// sshd's pid. It is spawned with `posix_spawn`, not `Process`: sshd closes the file
    /// descriptors it inherits, which Foundation takes for an exit and then blocks its one
    /// process-watching thread in `waitpid` until sshd ends, stalling every other child's wait.
    private var pid: pid_t = 0

    /// The `--rsh` that reaches it as root with the generated key.
    var rsh: String {
        "ssh -p \(port) -i \(directory)/user_key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR"
    }

    /// `root@127.0.0.1:path`.
    func location(_ path: String) -> String { "root@127.0.0.1:\(path)" }

    static func start() throws -> SSHServer {
        let sshd = "/usr/sbin/sshd"
        guard FileManager.default.isExecutableFile(atPath: sshd) else {
            throw RemoteTestError("\(sshd) is missing: install openssh-server (make test does, through .ci/apt-install)")
        }
        var lastError = ""
        for _ in 0..<3 {
            do { return try SSHServer(sshd: sshd) } catch { lastError = "\(error)" }
        }
        throw RemoteTestError("sshd did not start on 127.0.0.1: \(lastError)")
    }

    private init(sshd: String) throws {
        directory = NSTemporaryDirectory() + "/archive-sync-sshd-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: "/run/sshd", withIntermediateDirectories: true)
        for key in ["host_key", "user_key"] {
            let keygen = try Child("/usr/bin/ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", "\(directory)/\(key)"]).wait()
            guard keygen.status == 0 else { throw RemoteTestError("ssh-keygen failed: \(keygen)") }
        }
        try FileManager.default.copyItem(atPath: "\(directory)/user_key.pub", toPath: "\(directory)/authorized_keys")
        port = try freePort()
        let config = """
            Port \(port)
            ListenAddress 127.0.0.1
            HostKey \(directory)/host_key
            AuthorizedKeysFile \(directory)/authorized_keys
            PermitRootLogin prohibit-password
            PasswordAuthentication no
            KbdInteractiveAuthentication no
            StrictModes no
            UsePAM no
            PidFile \(directory)/sshd.pid
            """
        try config.write(toFile: "\(directory)/sshd_config", atomically: true, encoding: .utf8)
        let arguments = [sshd, "-D", "-f", "\(directory)/sshd_config", "-E", "\(directory)/sshd.log"]
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        let spawned = posix_spawn(&pid, sshd, &actions, nil, &argv, environ)
        guard spawned == 0 else { throw RemoteTestError("cannot start sshd: \(String(cString: strerror(spawned)))") }
        // Ready once it accepts a connection.
        let deadline = Date().addingTimeInterval(10)
        while !canConnect(port) {
            guard isRunning, Date() < deadline else {
                stop()
                let log = (try? String(contentsOfFile: "\(directory)/sshd.log", encoding: .utf8)) ?? ""
                throw RemoteTestError("sshd on port \(port) did not come up: \(log)")
            }
            usleep(20_000)
        }
    }

    private var isRunning: Bool {
        guard pid > 0 else { return false }
        if waitpid(pid, nil, WNOHANG) == pid {
            pid = 0
            return false
        }
        return true
    }

    func stop() {
        if pid > 0 {
            kill(pid, SIGTERM)
            waitpid(pid, nil, 0)
            pid = 0
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    deinit { stop() }
}

/// A TCP port on 127.0.0.1 that nothing listens on now.
private func freePort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound else { throw RemoteTestError("cannot find a free port on 127.0.0.1") }
    return Int(UInt16(bigEndian: address.sin_port))
}

private func canConnect(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}

/// A small model for stores made in bulk.
struct Item: Codable {
    var n: Int
    var text: String
}

/// Fills `store` with `count` items of about `size` bytes, in one batch.
func fill(_ store: ArchiveStore, count: Int, size: Int, tag: String, collection: String = "Item") throws {
    try store.batch { tx in
        for n in 0..<count {
            try tx.save(Item(n: n, text: String(repeating: "x", count: size) + tag), forKey: "item\(n)", in: collection)
        }
    }
}
