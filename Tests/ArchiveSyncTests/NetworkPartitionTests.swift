import ArchiveStore
import Foundation
import TestSupport
import Testing

@testable import ArchiveSync

#if canImport(Glibc)
    import Glibc
#endif

/// Sync with a host behind a link of its own (a network namespace joined by a veth pair, sshd
/// in it), and that link cut: silent, not closed, as a partition or a pulled cable leaves it.
/// One at a time; each blocks only threads of its own (``offPool(_:)``).
@Suite("Sync across a network namespace, the link cut", .serialized)
struct NetworkPartitionTests {
    /// The harness itself: the far address answers, goes silent when the link is cut (neither
    /// accepted nor refused), answers again when it is restored, and nothing is left behind.
    @Test func theLinkGoesSilentWhenCutAndComesBack() async throws {
        // Off the cooperative threads, as every test here: each waits on processes and the network.
        try await offPool {
            let far = try NetworkNamespace.make()
            let server = try SSHServer.start(address: far.farAddress, launcher: far.launcher)
            #expect(probeTCP(far.farAddress, server.port, timeout: .seconds(5)) == true)
            #expect(!far.processes().isEmpty, "sshd runs in the namespace")
            try far.cutLink()
            #expect(probeTCP(far.farAddress, server.port, timeout: .milliseconds(500)) == nil)
            try far.restoreLink()
            #expect(probeTCP(far.farAddress, server.port, timeout: .seconds(5)) == true)
            server.stop()
            far.remove()
            let namespaces = try run("/usr/sbin/ip", ["netns", "list"])
            let links = try run("/usr/sbin/ip", ["link", "show", far.hostInterface])
            #expect(!namespaces.output.contains(far.name) && links.status != 0, "\(namespaces)\n\(links)")
        }
    }

    /// Today's one-shot sync, both ways, to a store that only a route through the veth reaches.
    @Test func aOneShotSyncCrossesTheLink() async throws {
        try await offPool {
            try withFarHost { far, server in
                try withTemporaryDirectory { dir in
                    let a = try ArchiveStore(directory: dir + "/a")
                    let b = try ArchiveStore(directory: dir + "/b")
                    try fill(a, count: 50, size: 100, tag: "a")
                    try fill(b, count: 20, size: 100, tag: "b", collection: "Other")
                    let sync = try RunningCommand(
                        ["sync", dir + "/a", server.location(dir + "/b"), "--rsh", server.rsh, "--remote-cmd", archiveSyncProgram]
                    ).finish(within: .seconds(120))
                    #expect(
                        sync.status == 0 && sync.output.contains("20 copied to A, 50 copied to B")
                            || sync.output.contains("50 copied to B, 20 copied to A"),
                        "\(sync)")
                    #expect(try a.liveHashes() == b.liveHashes() && a.liveHashes().count == 70)
                }
            }
        }
    }

    /// The link cut while the objects cross: the sync ends within ssh's keepalive (three
    /// intervals of silence) with ssh's words, instead of waiting out TCP for 15 minutes or
    /// more; the store here is untouched, and a run after the link is back converges.
    @Test func aLinkCutMidSyncFailsWithinTheKeepaliveAndARerunConverges() async throws {
        try await offPool {
            try withFarHost { far, server in
                // 1 MB/s out of here: the 4 MB below take seconds to cross, so the cut lands mid-transfer.
                try far.limitRate(megabitsPerSecond: 8)
                try withTemporaryDirectory { dir in
                    let a = try ArchiveStore(directory: dir + "/a")
                    _ = try ArchiveStore(directory: dir + "/b")
                    try fill(a, count: 400, size: 10_000, tag: "a")
                    let before = try a.liveHashes()
                    // ssh's own words this time (the harness's `LogLevel=ERROR` would hide its timeout).
                    let shell = server.rsh.replacingOccurrences(of: " -o LogLevel=ERROR", with: "").split(separator: " ").map(String.init)
                    let remote = RemoteStore(
                        host: "root@" + far.farAddress, path: dir + "/b", shell: shell, program: archiveSyncProgram, keepaliveInterval: 1)
                    let syncing = InThread { try Sync(.directory(dir + "/a"), .remote(remote)).runNow() }
                    let sent = Date().addingTimeInterval(30)
                    while far.bytesSent() < 1_000_000 && Date() < sent { usleep(10_000) }
                    try far.cutLink()
                    let cut = ContinuousClock.now
                    // Without a keepalive the sync waits for TCP to give up: the bound below fails it.
                    let outcome = syncing.result(within: .seconds(20))
                    let took = ContinuousClock.now - cut
                    try far.restoreLink()
                    switch outcome {
                    case nil:
                        Issue.record("the sync still waited 20 s after the link was cut")
                        _ = syncing.result(within: .seconds(600))
                    case .success(let report)?:
                        Issue.record("the sync finished although the link was cut: \(report.summary)")
                    case .failure(let error)?:
                        #expect(took < .seconds(15), "noticed after \(took)")
                        #expect("\(error)".contains("not responding"), "\(error)")
                    }
                    #expect(try a.liveHashes() == before)

                    // The far side's `serve` outlives its client until its sshd hears of the close (the
                    // next TCP retransmission after the link is back): until then it holds the store's
                    // sync lock, and a run says so. One that gets through converges.
                    try far.unlimitRate()
                    // The neighbour entry failed while the link was down: "No route to host" until it is probed again.
                    let reachable = Date().addingTimeInterval(30)
                    while probeTCP(far.farAddress, server.port, timeout: .seconds(1)) != true && Date() < reachable { usleep(100_000) }
                    let (location, rsh) = (server.location(dir + "/b"), server.rsh)
                    let rerun = try { () throws -> CommandResult in
                        let deadline = Date().addingTimeInterval(60)
                        while true {
                            let result = try RunningCommand(
                                ["sync", dir + "/a", location, "--rsh", rsh, "--remote-cmd", archiveSyncProgram]
                            ).finish(within: .seconds(60))
                            if result.status == 0 || !result.errorOutput.contains("another sync") || Date() > deadline { return result }
                            usleep(500_000)
                        }
                    }()
                    #expect(rerun.status == 0, "\(rerun)")
                    #expect(try ArchiveStore(directory: dir + "/b").liveHashes() == before)
                }
            }
        }
    }
}

/// Work on a thread of its own, whose outcome is waited for with a bound.
private final class InThread<T: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    private var outcome: Result<T, any Error>?

    init(_ body: @escaping @Sendable () throws -> T) {
        Thread { [self] in
            let result = Result { try body() }
            condition.withLock {
                outcome = result
                condition.broadcast()
            }
        }.start()
    }

    /// What the work ended with, or nil when it has not ended within `timeout`.
    func result(within timeout: Duration) -> Result<T, any Error>? {
        let (seconds, attoseconds) = timeout.components
        let deadline = Date().addingTimeInterval(Double(seconds) + Double(attoseconds) / 1e18)
        return condition.withLock {
            while outcome == nil && condition.wait(until: deadline) {}
            return outcome
        }
    }
}
