import ArchiveProcess
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// An sshd of the benchmark's own on 127.0.0.1.
public final class SSHD {
    public let directory: String
    public let port: Int
    private var process: ChildProcess?

    /// The `--rsh` (and `rsync -e`) that reaches it as root with the generated key.
    public var rsh: String {
        "ssh -p \(port) -i \(directory)/user_key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR"
    }

    public init(in directory: String) throws {
        self.directory = directory
        let sshd = "/usr/sbin/sshd"
        guard access(sshd, X_OK) == 0, let keygen = findOnPath("ssh-keygen") else {
            throw BenchError("openssh-server is needed (`make bench` installs it)")
        }
        try FileManager.default.createDirectory(atPath: "/run/sshd", withIntermediateDirectories: true)
        for key in ["host_key", "user_key"] {
            guard try runCapturing(keygen, ["-q", "-t", "ed25519", "-N", "", "-f", "\(directory)/\(key)"]).status == 0 else {
                throw BenchError("ssh-keygen failed")
            }
        }
        try FileManager.default.copyItem(atPath: "\(directory)/user_key.pub", toPath: "\(directory)/authorized_keys")
        port = 20_000 + Int(getpid() % 20_000)
        try """
        Port \(port)
        ListenAddress 127.0.0.1
        HostKey \(directory)/host_key
        AuthorizedKeysFile \(directory)/authorized_keys
        PermitRootLogin prohibit-password
        PasswordAuthentication no
        StrictModes no
        UsePAM no
        PidFile \(directory)/sshd.pid
        """.write(toFile: "\(directory)/sshd_config", atomically: true, encoding: .utf8)
        process = try ChildProcess(
            sshd, ["-D", "-f", "\(directory)/sshd_config", "-E", "\(directory)/sshd.log"], stdin: .null, stdout: .inherit, stderr: .inherit)
        for _ in 0..<500 {
            if try runCapturing("/usr/bin/env", rsh.split(separator: " ").map(String.init) + ["root@127.0.0.1", "true"]).status == 0 { return }
            usleep(20_000)
        }
        stop()
        throw BenchError("sshd did not come up on 127.0.0.1:\(port); see \(directory)/sshd.log")
    }

    public func stop() {
        process?.stop()
        process = nil
    }
}
