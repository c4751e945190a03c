import ArchiveLocking
import ArchiveProcess
import ArchiveS3
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A throw-away single-node Ceph cluster with its RADOS Gateway on 127.0.0.1, as
/// `shared/DESIGN.md` ("a real S3 engine on 127.0.0.1") says: a monitor, one OSD on memstore
/// (data in RAM), radosgw with a beast frontend, `auth ... required = none` inside the cluster
/// while the gateway still checks S3 signatures; a user with ``accessKey`` and ``secretKey``.
///
/// The daemons run in the foreground (`-f`) as this process's children, so each is stopped by
/// its pid and reaped: daemonized, they would be left as zombies where pid 1 does not reap.
/// Their pids are also written to `daemons.pids` beside an `owner` file, so a later start
/// kills what a crashed test process left behind (``start()``).
///
/// A test that needs it fails (never skips) when it cannot start: `make test` installs
/// `radosgw ceph-mon ceph-osd ceph-common`.
public final class CephGateway: Sendable {
    /// The S3 user's keys.
    public static let accessKey = "ARCHIVESYNCTEST0001"
    public static let secretKey = "archive-sync-test-secret-key-0000000000001"

    /// Its temp directory: ceph.conf, the monitor's store, logs.
    public let directory: String
    /// The gateway's S3 port on 127.0.0.1.
    public let port: Int
    private let daemons = TracedMutex<[String: ChildProcess]>([:])

    /// `http://127.0.0.1:port`.
    public var endpoint: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// A configuration of the test user for `bucket` (path-style, few quick retries).
    public func configuration(bucket: String) -> S3Configuration {
        var configuration = S3Configuration(
            endpoint: endpoint, credentials: S3Credentials(accessKeyID: Self.accessKey, secretAccessKey: Self.secretKey), bucket: bucket)
        configuration.retry = S3RetryPolicy(maxAttempts: 4, baseDelay: .milliseconds(50), maxDelay: .milliseconds(500))
        configuration.requestTimeout = .seconds(30)
        // A stopped gateway refuses at once; the client would keep trying to connect for 10 s.
        configuration.connectTimeout = .milliseconds(500)
        return configuration
    }

    /// A new bucket with a unique name, created by the test user.
    public func makeBucket() async throws -> String {
        let bucket = "test-\(UUID().uuidString.lowercased().prefix(18))"
        let client = S3Client(configuration(bucket: bucket))
        do {
            try await client.createBucket()
        } catch {
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()
        return bucket
    }

    private static let sharedGateway = TracedMutex<Result<CephGateway, any Error>?>(nil)

    /// One gateway for the whole test process (its start costs seconds), started on first use
    /// and stopped when the process exits. Tests on it use buckets of their own
    /// (``makeBucket()``); a test that stops the gateway starts one of its own instead.
    public static func shared() async throws -> CephGateway {
        try await offPool {
            try sharedGateway.withLock { shared in
                if shared == nil {
                    shared = Result { try CephGateway.start() }
                    atexit { CephGateway.stopShared() }
                }
                return try shared!.get()
            }
        }
    }

    private static func stopShared() {
        if case .success(let gateway) = sharedGateway.withLock({ $0 }) { gateway.stop() }
    }

    /// Starts a cluster of its own: mon, OSD, gateway, user. Takes a few seconds. Stop it with
    /// ``stop()`` (its deinit does too).
    public static func start() throws -> CephGateway {
        for tool in ["ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "ceph", "ceph-authtool", "monmaptool"] {
            guard FileManager.default.isExecutableFile(atPath: "/usr/bin/\(tool)") else {
                throw TestSupportError(
                    "/usr/bin/\(tool) is missing: install radosgw ceph-mon ceph-osd ceph-common (make test does, through .ci/apt-install)")
            }
        }
        reapLeftovers()
        // Three tries: a free port can be taken by another test's server before a daemon binds it.
        var failure = ""
        for _ in 0..<3 {
            let gateway = try CephGateway()
            do {
                try gateway.bringUp()
                return gateway
            } catch {
                gateway.stop()
                failure = "\(error)"
            }
        }
        throw TestSupportError("Ceph did not start in 3 tries; the last: \(failure)")
    }

    private init() throws {
        let directory = try makeTemporaryDirectory(prefix: "archive-sync-ceph")
        let port = try freePort()
        let (monitorV1, monitorV2) = (try freePort(), try freePort())
        let fsid = UUID().uuidString.lowercased()
        let monitorAddress = "[v2:127.0.0.1:\(monitorV2),v1:127.0.0.1:\(monitorV1)]"
        self.directory = directory
        self.port = port
        self.monitorAddress = monitorAddress
        self.fsid = fsid
        try "\(getpid())".write(toFile: "\(directory)/owner", atomically: true, encoding: .utf8)
        // What matters (DESIGN.md): `ms mon client mode = crc`, or radosgw loops forever on EACCES
        // with auth off; `paxos propose interval = 0.1`, start-up in 2 s instead of 13; `mon data
        // avail crit = 0`, or the monitor stops on a disk under 5% free; `tcp_nodelay=1`, or each
        // GET takes 44 ms (Nagle against delayed ACKs). Ceph's parser takes no comment here.
        let conf = """
            [global]
            fsid = \(fsid)
            mon host = \(monitorAddress)
            public addr = 127.0.0.1
            cluster addr = 127.0.0.1
            auth cluster required = none
            auth service required = none
            auth client required = none
            run dir = \(directory)/run
            admin socket = \(directory)/run/$name.asok
            pid file = \(directory)/run/$name.pid
            log file = \(directory)/log/$name.log
            keyring = \(directory)/keyring
            osd pool default size = 1
            osd pool default min size = 1
            osd pool default pg num = 8
            osd pool default pgp num = 8
            osd pool default pg autoscale mode = off
            osd crush chooseleaf type = 0
            mon allow pool size one = true
            mon max pg per osd = 1000
            osd objectstore = memstore
            memstore device bytes = 2147483648
            ms bind ipv6 = false
            ms mon client mode = crc
            paxos propose interval = 0.1
            mon data avail warn = 1
            mon data avail crit = 0
            [mon.a]
            mon data = \(directory)/mon
            [osd.0]
            osd data = \(directory)/osd
            [client.rgw.a]
            rgw frontends = beast endpoint=127.0.0.1:\(port) tcp_nodelay=1
            """
        for folder in ["run", "log", "mon", "osd"] {
            try FileManager.default.createDirectory(atPath: "\(directory)/\(folder)", withIntermediateDirectories: true)
        }
        // Ceph's parser wants the last line ended.
        try (conf + "\n").write(toFile: "\(directory)/ceph.conf", atomically: true, encoding: .utf8)
    }

    private let monitorAddress: String
    private let fsid: String

    private func bringUp() throws {
        try tool("ceph-authtool", ["--create-keyring", "\(directory)/keyring", "--gen-key", "-n", "mon.", "--cap", "mon", "allow *"])
        try tool("monmaptool", ["--create", "--fsid", fsid, "--addv", "a", monitorAddress, "\(directory)/monmap"])
        try tool("ceph-mon", ["--mkfs", "-i", "a", "--monmap", "\(directory)/monmap", "--keyring", "\(directory)/keyring"])
        try launch("mon", "ceph-mon", ["-i", "a"])
        let osdUUID = UUID().uuidString.lowercased()
        try tool("ceph", ["osd", "new", osdUUID])
        try tool("ceph-osd", ["-i", "0", "--mkfs", "--osd-uuid", osdUUID])
        try launch("osd", "ceph-osd", ["-i", "0"])
        try waitUntil("the OSD is up", timeout: 60) { (try? self.tool("ceph", ["osd", "stat"]))?.contains("1 up") == true }
        try startGateway()
        try tool(
            "radosgw-admin",
            [
                "user", "create", "--uid=test", "--display-name=test", "--access-key=\(Self.accessKey)", "--secret-key=\(Self.secretKey)",
            ])
    }

    /// Starts radosgw (again, after ``stopGateway()``) and waits until it answers HTTP.
    public func startGateway() throws {
        try launch("rgw", "radosgw", ["-n", "client.rgw.a"])
        try waitUntil("radosgw answers on port \(port)", timeout: 60) { canConnect(self.port) }
    }

    /// Stops radosgw alone (SIGTERM, then SIGKILL after 5 s); the cluster stays.
    public func stopGateway() {
        daemons.withLock { $0.removeValue(forKey: "rgw") }?.terminate(grace: .seconds(5))
    }

    /// Stops every daemon by its pid, waits for each, and removes the directory.
    public func stop() {
        let running = daemons.withLock { daemons in
            defer { daemons.removeAll() }
            return daemons
        }
        // The gateway first: it would otherwise keep retrying a monitor that is gone. The data
        // is thrown away, so a daemon slow to stop (the OSD takes seconds) is killed soon.
        for name in ["rgw", "osd", "mon"] { running[name]?.terminate(grace: .seconds(1)) }
        try? FileManager.default.removeItem(atPath: directory)
    }

    deinit { stop() }

    private func launch(_ name: String, _ program: String, _ arguments: [String]) throws {
        let child: ChildProcess
        do {
            child = try ChildProcess(
                "/usr/bin/\(program)", ["-f", "-c", "\(directory)/ceph.conf"] + arguments, stdin: .null,
                stdout: .file("\(directory)/log/\(name).out"), stderr: .standardOutput)
        } catch {
            throw TestSupportError("cannot start \(program): \(error)")
        }
        daemons.withLock { daemons in
            daemons[name] = child
            let pids = daemons.values.map { "\($0.pid)" }.joined(separator: "\n")
            try? pids.write(toFile: "\(directory)/daemons.pids", atomically: true, encoding: .utf8)
        }
    }

    /// Runs a Ceph tool to its end; its output, or an error with what it printed.
    @discardableResult
    private func tool(_ program: String, _ arguments: [String]) throws -> String {
        let result = try RunningCommand(["-c", "\(directory)/ceph.conf"] + arguments, executable: "/usr/bin/\(program)")
            .finish(within: .seconds(60))
        guard result.status == 0 else { throw TestSupportError("\(program) \(arguments.joined(separator: " ")) failed: \(result)") }
        return result.output
    }

    private func waitUntil(_ what: String, timeout: TimeInterval, _ condition: () -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition() {
            let exited = daemons.withLock { $0.filter { !$0.value.isRunning }.map(\.key) }
            guard exited.isEmpty, Date() < deadline else {
                let logs = ["mon", "osd", "rgw"].map { name in
                    "--- \(name) ---\n" + ((try? String(contentsOfFile: "\(directory)/log/\(name).out", encoding: .utf8)) ?? "").suffix(2_000)
                }
                throw TestSupportError("Ceph did not come up (\(what)); exited: \(exited)\n\(logs.joined(separator: "\n"))")
            }
            usleep(50_000)
        }
    }

    /// Kills the daemons of clusters whose test process is gone (one that crashed before its
    /// `atexit`), by the pids they recorded, and removes their directories.
    private static func reapLeftovers() {
        let temporary = FileManager.default.temporaryDirectory.path
        for name in (try? FileManager.default.contentsOfDirectory(atPath: temporary)) ?? [] where name.hasPrefix("archive-sync-ceph-") {
            let folder = "\(temporary)/\(name)"
            guard let owner = (try? String(contentsOfFile: "\(folder)/owner", encoding: .utf8)).flatMap({ pid_t($0) }),
                kill(owner, 0) != 0
            else { continue }
            let pids = ((try? String(contentsOfFile: "\(folder)/daemons.pids", encoding: .utf8)) ?? "").split(separator: "\n")
            for pid in pids.compactMap({ pid_t($0) }) where isCephDaemon(pid) { kill(pid, SIGKILL) }
            try? FileManager.default.removeItem(atPath: folder)
        }
    }

    /// Whether `pid` is still a Ceph daemon (and not a process that got the pid since).
    private static func isCephDaemon(_ pid: pid_t) -> Bool {
        let command = (try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8)) ?? ""
        return ["ceph-mon", "ceph-osd", "radosgw"].contains { command.hasPrefix("/usr/bin/\($0)") }
    }
}
