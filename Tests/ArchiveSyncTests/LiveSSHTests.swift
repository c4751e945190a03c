import ArchiveStore
import Foundation
import TestSupport
import Testing

@testable import ArchiveSync

#if canImport(Glibc)
    import Glibc
#endif

/// The archive-sync processes whose command line holds every one of `words` (not the shell
/// that started one).
private func processes(with words: [String]) -> [Int32] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap { Int32($0) }.filter { pid in
        guard let comm = try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8), comm.hasPrefix("archive-sync"),
            let raw = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline")
        else { return false }
        let line = String(decoding: raw.map { $0 == 0 ? 32 : $0 }, as: UTF8.self)
        return words.allSatisfy { line.contains($0) }
    }
}

/// Two new stores, `a` here and `b` behind `server`, and a live session between them
/// (`sync a host:b --watch --json`) that has connected.
private func connectedSession(
    _ server: SSHServer, in dir: String, options: [String] = []
) throws -> (a: ArchiveStore, b: ArchiveStore, session: LiveCommand) {
    let a = try ArchiveStore(directory: dir + "/a")
    let b = try ArchiveStore(directory: dir + "/b")
    let session = try LiveCommand(
        ["sync", a.path, server.location(b.path), "--watch", "--json", "--debounce", "10", "--rsh", server.rsh, "--remote-cmd", archiveSyncProgram]
            + options)
    #expect(eventually { session.count(event: "connected") == 1 }, "\(session.command.outputSoFar)\(session.command.errorOutputSoFar)")
    return (a, b, session)
}

@Suite("Live sessions over a real sshd: edits cross, faults reconnect and converge")
struct LiveSSHTests {
    @Test func editsCrossAndTheSessionReconnectsAfterEachFault() async throws {
        // Off the cooperative threads: it waits on processes and files.
        try await offPool {
            let server = try SSHServer.start()
            defer { server.stop() }
            try withTemporaryDirectory { dir in
                let (a, b, session) = try connectedSession(server, in: dir, options: ["--keepalive", "1"])
                try makeDirectory(a.path + "/P")
                try makeDirectory(b.path + "/P")
                try writeFile(a.path + "/P/near.json", "{\"n\":1}")
                try writeFile(b.path + "/P/far.json", "{\"n\":1}")  // recorded by the far side's watcher
                #expect(eventually { (try? a.liveContents()) == (try? b.liveContents()) && (try? a.liveObjectCount()) == 2 })
                // One connection for the session's life: one far side.
                #expect(processes(with: ["serve", "--stdio", b.path]).count == 1)

                var round = 1
                /// A fault, then writes on both sides meanwhile: the session reconnects and converges.
                func survives(_ what: String, _ fault: () -> Void) {
                    let connections = session.count(event: "connected")
                    fault()
                    round += 1
                    _ = try? a.put(json("{\"n\":\(round)}"), as: id("P/near"))
                    _ = try? b.put(json("{\"n\":\(round)}"), as: id("P/far"))
                    #expect(
                        eventually { session.count(event: "connected") > connections && session.count(event: "disconnected") >= connections },
                        "\(what): \(session.command.outputSoFar)")
                    #expect(
                        eventually { (try? a.liveContents()) == (try? b.liveContents()) && (try? a.liveContents()["P/far"]) == "{\"n\":\(round)}" },
                        "\(what): \(session.command.outputSoFar)\n\(session.command.errorOutputSoFar.suffix(6000))\n\(String(describing: try? a.liveContents())) \(String(describing: try? b.liveContents()))"
                    )
                }
                survives("the far side killed") {
                    for pid in processes(with: ["serve", "--stdio", b.path]) { kill(pid, SIGKILL) }
                }
                survives("ssh killed") {
                    for pid in children(of: session.command.pid, named: "ssh") { kill(pid, SIGKILL) }
                }
                // A link gone silent, not closed: ssh here stops forwarding (SIGSTOP). Both ends
                // notice by their keepalives: the session gives the link up and reconnects, the far
                // side ends itself (and its locks with it).
                var silenced: [Int32] = []
                survives("the link silent") {
                    silenced = children(of: session.command.pid, named: "ssh")
                    for pid in silenced { kill(pid, SIGSTOP) }
                }
                let gaveUp = session.lines.first { ($0["error"] as? String)?.contains("no word from the far side") == true }
                #expect(gaveUp != nil, "\(session.command.outputSoFar)")
                // The far side of the silent link ended itself: one far side is left, the new one.
                #expect(eventually { processes(with: ["serve", "--stdio", b.path]).count == 1 })
                for pid in silenced { kill(pid, SIGKILL) }
                #expect(try session.stop().status == 0)
            }
        }
    }

    /// A cycle cut short after some of its pages landed (the far side killed) still prints a
    /// line for each object that landed: no later cycle carries those again, so it is the
    /// only report of them. At most the page whose reply the kill lost goes unreported.
    @Test func objectsThatLandedBeforeTheFarSideWasKilledAreEachReported() async throws {
        try await offPool {
            let server = try SSHServer.start()
            defer { server.stop() }
            try withTemporaryDirectory { dir in
                let (a, b, session) = try connectedSession(server, in: dir)
                // One commit of 8,000: one cycle of eight pages, landing one at a time.
                let total = 8_000
                try a.batch { batch in
                    for n in 0..<total { try batch.save(["n": n], forKey: "o\(n)", in: "P") }
                }
                #expect(eventually(within: .seconds(60)) { ((try? b.liveObjectCount()) ?? 0) >= 2_000 })
                for pid in processes(with: ["serve", "--stdio", b.path]) { kill(pid, SIGKILL) }
                let landedBeforeTheKill = try b.liveObjectCount()
                #expect(landedBeforeTheKill < total, "the cycle ended before the kill: the test proves nothing")
                #expect(
                    eventually(within: .seconds(60)) { session.count(event: "connected") >= 2 && (try? b.liveObjectCount()) == total },
                    "\(session.command.outputSoFar.suffix(2000))")
                // A cycle's lines come once its checkpoints have moved, a moment after its objects land.
                func reported() -> Int {
                    Set(
                        session.lines.filter { $0["event"] as? String == "object" && $0["direction"] as? String == "a-to-b" }.compactMap {
                            $0["id"] as? String
                        }
                    )
                    .count
                }
                #expect(
                    eventually { reported() >= total - 1_000 },
                    "\(reported()) of \(total) reported; \(landedBeforeTheKill) had landed before the kill; \(session.lines.filter { $0["event"] as? String != "object" })"
                )
                #expect(try session.stop().status == 0)
            }
        }
    }
}
