import ArchiveStore
import Foundation
import TestSupport
import Testing

@testable import ArchiveSync

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Live sessions: a hub and two spokes converge, deletes travel, an offline spoke resurrects nothing")
struct LiveHubTests {
    @Test func randomWritesOnAHubAndTwoSpokesConverge() async throws {
        // Off the cooperative threads: it waits on processes and files.
        try await offPool {
            try withTemporaryDirectory { dir in
                let hub = try ArchiveStore(directory: dir + "/hub")
                let spokes = [try ArchiveStore(directory: dir + "/one"), try ArchiveStore(directory: dir + "/two")]
                let stores = [hub] + spokes
                // Each spoke runs its own session with the hub: the first takes the hub's lease, the
                // other follows its manifest.
                var sessions = try spokes.map { try LiveCommand(["sync", $0.path, hub.path, "--watch", "--json", "--debounce", "10"]) }
                var random = SeededGenerator(seed: 19)
                // What each store last did to each of its own objects: contents, or nil for a delete.
                var own: [String: String?] = [:]
                for round in 0..<150 {
                    let (index, store) = stores.enumerated().randomElement(using: &random)!
                    let key = "P/s\(index)-\(Int.random(in: 0..<15, using: &random))"
                    if Bool.random(using: &random) || own[key] == nil || own[key]! == nil {
                        let text = "{\"round\":\(round)}"
                        _ = try store.put(json(text), as: id(key))
                        own[key] = .some(text)
                    } else {
                        try store.remove(id(key))
                        own[key] = .some(nil)
                    }
                    // A shared object written by all: concurrent edits are kept as conflict copies.
                    if round % 10 == 0 { _ = try store.put(json("{\"shared\":\(round)}"), as: id("S/shared")) }
                    if round % 5 == 0 { usleep(20_000) }
                }
                let expected = own.compactMapValues { $0 }
                func converged() -> Bool {
                    guard let contents = try? stores.map({ try $0.liveContents() }), contents[1] == contents[0], contents[2] == contents[0] else {
                        return false
                    }
                    return expected.allSatisfy { contents[0][$0.key] == $0.value }
                        && own.filter({ $0.value == nil }).allSatisfy { contents[0][$0.key] == nil }
                }
                #expect(eventually(within: .seconds(60), converged), "\(sessions.map(\.command.outputSoFar))")

                // The second spoke goes offline; the first deletes what it owns; the hub follows.
                #expect(try sessions[1].stop().status == 0)
                let owned = try spokes[0].liveContents().keys.filter { $0.hasPrefix("P/s1-") }
                #expect(!owned.isEmpty)
                for key in owned { try spokes[0].remove(id(key)) }
                #expect(eventually { (try? hub.liveContents().keys.contains { $0.hasPrefix("P/s1-") }) == false })
                #expect(try spokes[1].liveContents().keys.contains { $0.hasPrefix("P/s1-") })
                // Back online: the deletes reach it; nothing comes back.
                sessions[1] = try LiveCommand(["sync", spokes[1].path, hub.path, "--watch", "--json", "--debounce", "10"])
                #expect(
                    eventually {
                        guard let contents = try? stores.map({ try $0.liveContents() }) else { return false }
                        return contents[1] == contents[0] && contents[2] == contents[0] && !contents[0].keys.contains { $0.hasPrefix("P/s1-") }
                    })
                for session in sessions { #expect(try session.stop().status == 0) }
            }
        }
    }
}
