import ArchiveStore
import Foundation
import TestSupport
import Testing

@testable import ArchiveSync

#if canImport(Glibc)
    import Glibc
#endif

/// Live sessions with a far host behind a link of its own (``NetworkNamespace``): the link cut
/// for real, silent rather than closed, for longer than the keepalive, and a far host that
/// does not answer at all when the session starts.
@Suite("Live sessions across a network namespace, the link cut", .serialized)
struct LiveNetworkTests {
    /// A session with the far side in a namespace of its own; `body` gets the stores and the session.
    private func withSession(
        cutBeforeStart: Bool = false, _ body: @escaping @Sendable (NetworkNamespace, ArchiveStore, ArchiveStore, LiveCommand) throws -> Void
    ) async throws {
        try await offPool {
            try withFarHost { far, server in
                try withTemporaryDirectory { dir in
                    let a = try ArchiveStore(directory: dir + "/a")
                    let b = try ArchiveStore(directory: dir + "/b")
                    if cutBeforeStart { try far.cutLink() }
                    let session = try LiveCommand(
                        [
                            "sync", a.path, server.location(b.path), "--watch", "--json", "--debounce", "10", "--keepalive", "1", "--rsh", server.rsh,
                            "--remote-cmd", archiveSyncProgram,
                        ])
                    try body(far, a, b, session)
                    #expect(try session.stop().status == 0)
                }
            }
        }
    }

    /// The link cut for several keepalives while both sides write: the session says it lost
    /// the far side (silence, not an error of the far side), keeps its side's writes, and once
    /// the link is back reconnects and converges with every write of both sides.
    @Test func aLinkCutLongerThanTheKeepaliveReconnectsAndConverges() async throws {
        try await withSession { far, a, b, session in
            #expect(eventually { session.count(event: "connected") == 1 }, "\(session.command.outputSoFar)\(session.command.errorOutputSoFar)")
            try a.put(json("{\"n\":1}"), as: id("P/near1"))
            try b.put(json("{\"n\":1}"), as: id("P/far1"))
            #expect(eventually { (try? a.liveContents()) == (try? b.liveContents()) && (try? a.liveObjectCount()) == 2 })

            try far.cutLink()
            let cut = ContinuousClock.now
            try a.put(json("{\"n\":2}"), as: id("P/near2"))
            try b.put(json("{\"n\":2}"), as: id("P/far2"))
            try a.remove(id("P/far1"))
            #expect(eventually { session.count(event: "disconnected") >= 1 }, "\(session.command.outputSoFar)")
            // Given up for silence within the keepalive's bound (2.5 intervals), with a margin for a loaded machine.
            #expect(ContinuousClock.now - cut < .seconds(15))
            let lost = session.lines.first { $0["event"] as? String == "disconnected" }
            #expect((lost?["error"] as? String)?.contains("no word from the far side") == true, "\(session.command.outputSoFar)")
            // Longer than the keepalive: the attempts meanwhile fail too (ssh's connect timeout follows it).
            usleep(4_000_000)
            try a.put(json("{\"n\":3}"), as: id("P/near3"))
            try far.restoreLink()

            #expect(eventually(within: .seconds(60)) { session.count(event: "connected") >= 2 }, "\(session.command.outputSoFar)")
            let expected = ["P/near1": "{\"n\":1}", "P/near2": "{\"n\":2}", "P/near3": "{\"n\":3}", "P/far2": "{\"n\":2}"]
            #expect(
                eventually(within: .seconds(60)) { (try? a.liveContents()) == expected && (try? b.liveContents()) == expected },
                "\(session.command.outputSoFar)\n\(String(describing: try? a.liveContents()))\n\(String(describing: try? b.liveContents()))")
        }
    }

    /// A far host that does not answer when the session starts: the attempt fails within the
    /// keepalive's bound, the session says so and retries; the side here is synced once the
    /// link comes up.
    @Test func aFarHostUnreachableAtStartIsRetriedUntilItAnswers() async throws {
        try await withSession(cutBeforeStart: true) { far, a, b, session in
            try a.put(json("{\"n\":1}"), as: id("P/near"))
            #expect(eventually { session.count(event: "disconnected") >= 1 }, "\(session.command.outputSoFar)\(session.command.errorOutputSoFar)")
            #expect(session.count(event: "connected") == 0)
            try far.restoreLink()
            #expect(
                eventually(within: .seconds(60)) { session.count(event: "connected") == 1 },
                "\(session.command.outputSoFar)\(session.command.errorOutputSoFar)")
            #expect(eventually { (try? b.liveContents()) == ["P/near": "{\"n\":1}"] }, "\(session.command.outputSoFar)")
        }
    }
}
