import ArchiveProcess
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// An sshd of its own on 127.0.0.1 (or on an address of a network namespace: see
/// ``NetworkNamespace``): a generated host key, a generated user key, its config in a temp
/// directory, on a free port. Started by ``start(address:launcher:)``, stopped by ``stop()``.
/// A test that needs it fails (never skips) when it cannot start: `make test` installs openssh-server.
public final class SSHServer {
    /// Its temp directory: keys, config, log.
    public let directory: String
    /// The port it listens on.
    public let port: Int
    /// The address it listens on: 127.0.0.1 unless it was started in a network namespace.
    public let address: String
    /// sshd, until ``stop()`` (a ``ChildProcess``, not Foundation's `Process`: that type says why).
    private var sshd: ChildProcess?

    /// The `--rsh` that reaches it as root with the generated key.
    public var rsh: String {
        "ssh -p \(port) -i \(directory)/user_key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR"
    }

    /// `root@ADDRESS:path`.
    public func location(_ path: String) -> String { "root@\(address):\(path)" }

    /// Starts one listening on `address`, sshd run through `launcher` (such as
    /// `ip netns exec NAME`, which then also runs each session's commands in that namespace);
    /// tries three ports before it gives up.
    public static func start(address: String = "127.0.0.1", launcher: [String] = []) throws -> SSHServer {
        let sshd = "/usr/sbin/sshd"
        guard FileManager.default.isExecutableFile(atPath: sshd) else {
            throw TestSupportError("\(sshd) is missing: install openssh-server (make test does, through .ci/apt-install)")
        }
        var lastError = ""
        for _ in 0..<3 {
            do { return try SSHServer(sshd: sshd, address: address, launcher: launcher) } catch { lastError = "\(error)" }
        }
        throw TestSupportError("sshd did not start on \(address): \(lastError)")
    }

    private init(sshd: String, address: String, launcher: [String]) throws {
        self.address = address
        directory = NSTemporaryDirectory() + "/archive-sync-sshd-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: "/run/sshd", withIntermediateDirectories: true)
        for key in ["host_key", "user_key"] {
            let keygen = try RunningCommand(["-q", "-t", "ed25519", "-N", "", "-f", "\(directory)/\(key)"], executable: "/usr/bin/ssh-keygen")
                .finish()
            guard keygen.status == 0 else { throw TestSupportError("ssh-keygen failed: \(keygen)") }
        }
        try FileManager.default.copyItem(atPath: "\(directory)/user_key.pub", toPath: "\(directory)/authorized_keys")
        port = try freePort()
        let config = """
            Port \(port)
            ListenAddress \(address)
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
        do {
            let command = launcher + [sshd, "-D", "-f", "\(directory)/sshd_config", "-E", "\(directory)/sshd.log"]
            // Not this process's stdout and stderr: a session sshd forked could outlive a test
            // process that crashed, and hold the test runner's pipe open (it logs to its file).
            self.sshd = try ChildProcess(command[0], Array(command.dropFirst()), stdin: .null, stdout: .null, stderr: .null)
        } catch {
            throw TestSupportError("cannot start sshd: \(String(cString: strerror(error.errno)))")
        }
        // Ready once it accepts a connection.
        let deadline = Date().addingTimeInterval(10)
        while !canConnect(address, port) {
            guard isRunning, Date() < deadline else {
                stop()
                let log = (try? String(contentsOfFile: "\(directory)/sshd.log", encoding: .utf8)) ?? ""
                throw TestSupportError("sshd on port \(port) did not come up: \(log)")
            }
            usleep(20_000)
        }
    }

    private var isRunning: Bool { sshd?.isRunning ?? false }

    /// Stops sshd (SIGTERM), waits for it, and removes its directory.
    public func stop() {
        if let sshd {
            sshd.send(SIGTERM)
            sshd.wait()
            self.sshd = nil
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    deinit { stop() }
}

/// A TCP port on 127.0.0.1 that nothing listens on now.
func freePort() throws -> Int {
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
    guard bound else { throw TestSupportError("cannot find a free port on 127.0.0.1") }
    return Int(UInt16(bigEndian: address.sin_port))
}

func canConnect(_ port: Int) -> Bool { canConnect("127.0.0.1", port) }

func canConnect(_ host: String, _ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr(host)
    address.sin_port = UInt16(port).bigEndian
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}
