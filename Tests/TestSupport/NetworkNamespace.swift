import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A network namespace of its own joined to this one by a veth pair, each end with an address
/// of a /30 in 10.0.0.0/8: a far host that is another machine as far as TCP can tell, whose
/// link ``cutLink()`` makes go silent (no reset, no error: packets vanish) and
/// ``restoreLink()`` brings back. Made with `ip netns` and `ip link` (iproute2), as root.
///
/// ```swift
/// let far = try NetworkNamespace.make()
/// defer { far.remove() }
/// let server = try SSHServer.start(address: far.farAddress, launcher: far.launcher)
/// ```
///
/// Names are unique per instance (several tests make theirs at once). ``remove()`` (or deinit)
/// kills what still runs in the namespace, which takes the veth pair with it.
public final class NetworkNamespace: @unchecked Sendable {
    /// The namespace's name, for `ip netns exec`.
    public let name: String
    /// The veth end in this namespace, and its address.
    public let hostInterface: String
    public let hostAddress: String
    /// The veth end in the far namespace, and its address.
    public let farInterface: String
    public let farAddress: String
    private var removed = false

    /// The words that run a command in the namespace: `ip netns exec NAME`.
    public var launcher: [String] { [ip, "netns", "exec", name] }

    /// Makes the namespace and the link; tries a few names and subnets before it gives up
    /// (another test, or another user of this machine, may hold the first ones drawn).
    public static func make() throws -> NetworkNamespace {
        guard FileManager.default.isExecutableFile(atPath: ip) else {
            throw TestSupportError("\(ip) is missing: install iproute2 (make test does, through .ci/apt-install)")
        }
        removeLeftovers()
        var lastError = ""
        for _ in 0..<5 {
            let namespace = NetworkNamespace(
                tag: String(UInt32.random(in: 0...UInt32.max), radix: 16),
                // A /30 in 10.200.0.0-10.249.255.255: .1 here, .2 there.
                subnet: (Int.random(in: 200...249), Int.random(in: 0...255), 4 * Int.random(in: 0...63)))
            do {
                try namespace.setUp()
                return namespace
            } catch {
                lastError = "\(error)"
                namespace.remove()
            }
        }
        throw TestSupportError("cannot make a network namespace joined by a veth pair: \(lastError)")
    }

    private init(tag: String, subnet: (Int, Int, Int)) {
        // The pid, so that the namespaces of a test process that crashed can be told apart.
        name = "\(namespacePrefix)\(getpid())-\(tag)"
        hostInterface = "asv\(tag)h"
        farInterface = "asv\(tag)f"
        hostAddress = "10.\(subnet.0).\(subnet.1).\(subnet.2 + 1)"
        farAddress = "10.\(subnet.0).\(subnet.1).\(subnet.2 + 2)"
    }

    private func setUp() throws {
        try ipCommand(["netns", "add", name])
        try ipCommand(["link", "add", hostInterface, "type", "veth", "peer", "name", farInterface])
        try ipCommand(["link", "set", farInterface, "netns", name])
        try ipCommand(["addr", "add", hostAddress + "/30", "dev", hostInterface])
        try ipCommand(["link", "set", hostInterface, "up"])
        try inNamespace(["addr", "add", farAddress + "/30", "dev", farInterface])
        try inNamespace(["link", "set", farInterface, "up"])
        try inNamespace(["link", "set", "lo", "up"])
    }

    /// Sets the far end of the link down: from here on the far host neither answers nor
    /// refuses; what is sent to it is lost, and a TCP connection across stays open, silent.
    public func cutLink() throws {
        try inNamespace(["link", "set", farInterface, "down"])
    }

    /// Sets the far end up again; connections that outlived the cut carry on.
    public func restoreLink() throws {
        try inNamespace(["link", "set", farInterface, "up"])
    }

    /// Limits what leaves this end of the link to `megabitsPerSecond` (a token bucket, `tc
    /// qdisc ... tbf`): a transfer then takes long enough for a cut to land in its middle.
    public func limitRate(megabitsPerSecond: Int) throws {
        try ipCommand(
            ["qdisc", "replace", "dev", hostInterface, "root", "tbf", "rate", "\(megabitsPerSecond)mbit", "burst", "32kbit", "latency", "400ms"],
            program: tc)
    }

    /// Takes the limit of ``limitRate(megabitsPerSecond:)`` away.
    public func unlimitRate() throws {
        try ipCommand(["qdisc", "del", "dev", hostInterface, "root"], program: tc)
    }

    /// The bytes this end of the link has sent so far.
    public func bytesSent() -> Int {
        let text = (try? String(contentsOfFile: "/sys/class/net/\(hostInterface)/statistics/tx_bytes", encoding: .utf8)) ?? ""
        return Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }

    /// The pids of the processes in the namespace (`ip netns pids`).
    public func processes() -> [Int32] { Self.processes(in: name) }

    private static func processes(in name: String) -> [Int32] {
        guard let result = try? run(ip, ["netns", "pids", name]), result.status == 0 else { return [] }
        return result.output.split(whereSeparator: \.isWhitespace).compactMap { Int32($0) }
    }

    /// Kills every process in the namespace (sshd, its sessions, what they started) and
    /// deletes it, which deletes the veth pair. Safe to call twice.
    public func remove() {
        if removed { return }
        removed = true
        Self.delete(name)
        // Normally gone with its peer; left over when the namespace was never made.
        _ = try? run(ip, ["link", "delete", hostInterface])
    }

    private static func delete(_ name: String) {
        // Processes outside any test's hands (a session sshd forked) would keep the
        // namespace alive after its name is gone; they are ours: this namespace is.
        for _ in 0..<50 {
            let pids = processes(in: name)
            if pids.isEmpty { break }
            for pid in pids { Glibc.kill(pid, SIGKILL) }
            usleep(20_000)
        }
        _ = try? run(ip, ["netns", "delete", name])
    }

    /// Deletes the namespaces of test processes that are gone (crashed before their cleanup).
    private static func removeLeftovers() {
        guard let listed = try? run(ip, ["netns", "list"]) else { return }
        for line in listed.output.split(separator: "\n") {
            let name = String(line.split(separator: " ").first ?? "")
            guard name.hasPrefix(namespacePrefix), let pid = Int32(name.dropFirst(namespacePrefix.count).split(separator: "-").first ?? ""),
                Glibc.kill(pid, 0) != 0 && errno == ESRCH
            else { continue }
            delete(name)
        }
    }

    deinit { remove() }

    private func ipCommand(_ arguments: [String], program: String = ip) throws {
        let result = try run(program, arguments)
        guard result.status == 0 else { throw TestSupportError("\(program) \(arguments.joined(separator: " ")) failed: \(result.errorOutput)") }
    }

    private func inNamespace(_ arguments: [String]) throws {
        try ipCommand(["netns", "exec", name, ip] + arguments)
    }
}

/// How the names of the namespaces made here begin; the creating process's pid follows.
private let namespacePrefix = "as-net-"

/// iproute2's `ip`.
private let ip = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/sbin/ip"

/// iproute2's `tc`.
private let tc = ip.replacingOccurrences(of: "/ip", with: "/tc")

/// Whether something accepts a TCP connection at `host`:`port` within `timeout`: true when it
/// does, false when it refuses, nil when nothing answers at all (a silent link).
public func probeTCP(_ host: String, _ port: Int, timeout: Duration) -> Bool? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr(host)
    address.sin_port = UInt16(port).bigEndian
    let started = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    if started == 0 { return true }
    guard errno == EINPROGRESS else { return false }
    var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
    let (seconds, attoseconds) = timeout.components
    guard poll(&poller, 1, Int32(seconds * 1000 + attoseconds / 1_000_000_000_000_000)) == 1 else { return nil }
    var failure: Int32 = 0
    var length = socklen_t(MemoryLayout<Int32>.size)
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &failure, &length)
    return failure == 0
}

/// A far host for one test: a namespace of its own with sshd in it, both gone after `body`.
public func withFarHost<T>(_ body: (NetworkNamespace, SSHServer) throws -> T) throws -> T {
    let far = try NetworkNamespace.make()
    defer { far.remove() }
    let server = try SSHServer.start(address: far.farAddress, launcher: far.launcher)
    defer { server.stop() }
    return try body(far, server)
}
