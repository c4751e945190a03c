import ArchiveLocking
import ArchiveStore
import Foundation
import TestSupport
import Testing

@testable import ArchiveSync

@Suite("Live sessions from Swift: cycles as an AsyncSequence, quiet when nothing moves")
struct LiveSessionTests {
    /// Collects a session's events on a task of its own.
    final class Collector: Sendable {
        let events = TracedMutex<[LiveEvent]>([])
        var cycles: [LiveCycle] { events.withLock { $0.compactMap { if case .cycle(let c) = $0 { c } else { nil } } } }
    }

    @Test func changesOnEitherSideCrossAndTheSessionGoesQuiet() async throws {
        try await withTemporaryDirectory { dir in
            let a = try ArchiveStore(directory: dir + "/a")
            let b = try ArchiveStore(directory: dir + "/b")
            _ = try a.put(json("{\"n\":1}"), as: id("P/one"))
            let session = LiveSession(.directory(a.path), .directory(b.path), options: LiveOptions(debounce: .milliseconds(10)))
            let collector = Collector()
            let events = session.events()
            let task = collectOffPool(events) { event in collector.events.withLock { $0.append(event) } }
            // The first cycle compares everything.
            #expect(await eventually { (try? b.liveContents()["P/one"]) == "{\"n\":1}" })
            #expect(await eventually { collector.cycles.first?.full == true })
            // Another process's save on B (the test's, through its own store) crosses to A.
            _ = try b.put(json("{\"n\":2}"), as: id("P/two"))
            #expect(await eventually { (try? a.liveContents()["P/two"]) == "{\"n\":2}" })
            // A program's write into A's directory: A's watcher (the session's) records it.
            try writeFile(a.path + "/P/three.json", "{\"n\":3}")
            #expect(
                await eventually { (try? b.liveContents()["P/three"]) == "{\"n\":3}" },
                "\(collector.events.withLock { $0 }) \(String(describing: try? a.status())) \(String(describing: try? a.liveContents()))")
            // Each cycle's event comes once its writes have landed.
            #expect(await eventually { collector.cycles.flatMap(\.objects).contains { $0.id == "P/three" && $0.direction == .aToB } })
            let objects = collector.cycles.flatMap(\.objects)
            #expect(objects.contains { $0.id == "P/two" && $0.direction == .bToA && $0.kind == .copy && $0.version == 1 }, "\(objects)")

            // Quiet: nothing changes, so no cycle runs (its own writes woke both followers).
            try await Task.sleep(for: .milliseconds(300))
            let settled = collector.cycles.count
            let sequences = (try a.changeSequence(), try b.changeSequence())
            try await Task.sleep(for: .milliseconds(500))
            #expect(collector.cycles.count == settled, "\(collector.cycles.suffix(3))")
            let now = (try a.changeSequence(), try b.changeSequence())
            #expect(now == sequences)

            // Cancelling the task stops the session: the watcher's lease is free again.
            task.cancel()
            _ = await task.value
            #expect(await eventually { (try? a.status().watcher) == nil })
            #expect(await eventually { a.liveSessions().isEmpty })
        }
    }

    @Test func aFarSideOfAnOlderProtocolServesOneShotSyncsButNoLiveSession() async throws {
        // Off the cooperative threads: it waits on processes and files.
        try await offPool {
            try withTemporaryDirectory { dir in
                let b = try ArchiveStore(directory: dir + "/b")
                let old = try pipeReplica(b.path, versions: 1...2)
                #expect {
                    try old.goLive(keepalive: .seconds(10), debounce: .milliseconds(10), notice: { _ in }, lost: { _ in })
                } throws: { "\($0)".contains("speaks protocol version 2, which has no live sessions (version 3)") }
                // The one-shot requests still work on it.
                #expect(try old.changeSequence() == b.changeSequence())
                old.end()
            }
        }
    }

    @Test func theFarSideNoticesItsChangesOverTheOpenConnection() async throws {
        // Off the cooperative threads: it waits on processes and files.
        try await offPool {
            try withTemporaryDirectory { dir in
                let b = try ArchiveStore(directory: dir + "/b")
                let far = try pipeReplica(b.path)
                let notices = TracedMutex<[Int]>([])
                try far.goLive(
                    keepalive: .milliseconds(200), debounce: .milliseconds(10), notice: { n in notices.withLock { $0.append(n) } }, lost: { _ in })
                _ = try b.put(json("{\"n\":1}"), as: id("P/x"))
                let sequence = try b.changeSequence()
                #expect(eventually(within: .seconds(10)) { notices.withLock { $0.contains(sequence) } })
                // Requests still get their replies between notices and pings, past several keepalives.
                usleep(700_000)
                #expect(try far.changeSequence() == sequence)
                far.close()
            }
        }
    }
}
