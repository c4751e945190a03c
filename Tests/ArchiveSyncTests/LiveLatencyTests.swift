import ArchiveLocking
import ArchiveStore
import ArchiveWatch
import Foundation
import TestSupport
import Testing

@testable import ArchiveSync

@Suite("Live sessions wait on nothing but the change: no timed re-reads, no probes")
struct LiveLatencyTests {
    @Test func aCommitByAnotherProcessIsNoticedWithoutPolling() async throws {
        try await offPool {
            try withTemporaryDirectory { dir in
                let store = try ArchiveStore(directory: dir + "/s")
                // Each look: the sequence it found.
                let looks = TracedMutex<[Int]>([])
                let follower = try ManifestFollower(
                    storePath: store.path, changed: { looks.withLock { $0.append((try? store.changeSequence()) ?? -1) } })
                defer { follower.stop() }
                let result = try runArchiveSync(["put", store.path, "P/one"], stdin: json("{\"n\":1}"))
                #expect(result.status == 0, "\(result.errorOutput)")
                let sequence = try store.changeSequence()
                // The other process's commit is seen at once, by its announcement (`writer.lock`
                // opened and closed once the commit is visible); without it, only at the
                // follower's check a second after the WAL's writes...
                #expect(eventually(within: .milliseconds(700)) { looks.withLock { $0.contains(sequence) } }, "\(looks.withLock { $0 })")
                // ...and not looked for again and again afterwards (the manifest's writes were
                // followed by up to six timed re-reads over 4 s: 2, 10, 50, 250, 1000 ms...).
                usleep(1_500_000)
                let all = looks.withLock { $0 }
                let wasted = all.count - Set(all).count
                #expect(wasted <= 1, "looks after one commit: \(all)")
            }
        }
    }

    @Test func anIncrementalCycleDoesNotProbeTheWatchers() async throws {
        try await offPool {
            try withTemporaryDirectory { dir in
                let a = try ArchiveStore(directory: dir + "/a")
                let b = try ArchiveStore(directory: dir + "/b")
                // A's watcher is the test's: the session follows it, and its statistics count
                // the probes (each a file made in A and a wait for the watcher's answer).
                let watcher = try a.startWatching(WatchOptions(debounce: .milliseconds(10)))
                defer {
                    watcher.stop()
                    _ = watcher.waitUntilStopped(timeout: .seconds(5))
                }
                let session = LiveSession(.directory(a.path), .directory(b.path), options: LiveOptions(debounce: .milliseconds(10)))
                let cycles = TracedMutex<[LiveCycle]>([])
                let ended = TracedMutex(false)
                let events = session.events()
                _ = collectOffPool(events, { event in if case .cycle(let cycle) = event { cycles.withLock { $0.append(cycle) } } }) {
                    ended.withLock { $0 = true }
                }
                defer {
                    session.stop()
                    _ = eventually(within: .seconds(10)) { ended.withLock { $0 } }
                }
                #expect(eventually(within: .seconds(60)) { !cycles.withLock { $0 }.isEmpty })
                let probes = watcher.statistics.probes
                for n in 0..<3 {
                    _ = try b.put(json("{\"n\":\(n)}"), as: id("P/n\(n)"))
                    #expect(eventually(within: .seconds(60)) { (try? a.liveContents()["P/n\(n)"]) == "{\"n\":\(n)}" })
                }
                // Events come after the objects land: waited for.
                #expect(eventually(within: .seconds(60)) { cycles.withLock { $0 }.contains { !$0.full } })
                #expect(watcher.statistics.probes == probes, "\(cycles.withLock { $0 }.map(\.full))")
            }
        }
    }
}

/// A store here whose manifest reads are counted: how often a sync asks a side for rows.
final class CountingReplica: SyncReplica {
    let inner: LocalReplica
    let changedReads = TracedMutex(0)

    init(_ store: ArchiveStore) { inner = LocalReplica(store) }

    var replica: ReplicaID { inner.replica }
    var name: String { inner.name }
    func begin() throws { try inner.begin() }
    func end() { inner.end() }
    func makeCurrent() throws -> Bool { try inner.makeCurrent() }
    func changeSequence() throws -> Int { try inner.changeSequence() }
    func liveObjectCount() throws -> Int { try inner.liveObjectCount() }
    func checkpoint(for peer: ReplicaID) throws -> Int? { try inner.checkpoint(for: peer) }
    func setCheckpoint(for peer: ReplicaID, to sequence: Int) throws { try inner.setCheckpoint(for: peer, to: sequence) }
    func sequenceAfterOwnWrites(since sequence: Int) throws -> Int { try inner.sequenceAfterOwnWrites(since: sequence) }
    func entries(after id: ObjectID?, limit: Int) throws -> [ReplicaEntry] { try inner.entries(after: id, limit: limit) }

    func entries(changedAfter after: Int, through: Int, limit: Int) throws -> [ReplicaEntry] {
        changedReads.withLock { $0 += 1 }
        return try inner.entries(changedAfter: after, through: through, limit: limit)
    }

    func entries(for ids: [ObjectID]) throws -> [ReplicaEntry?] { try inner.entries(for: ids) }
    func contents(of entries: [ReplicaEntry]) throws -> [Data?] { try inner.contents(of: entries) }
    func apply(_ objects: [IncomingObject]) throws -> [Bool] { try inner.apply(objects) }
    func mergeVectors(_ merges: [VectorMerge]) throws { try inner.mergeVectors(merges) }
    func mergeBases(_ queries: [MergeBaseQuery]) throws -> [MergeBaseAnswer] { try inner.mergeBases(queries) }
}

@Suite("A sync's plan of one page is carried out as planned")
struct KeptPlanTests {
    @Test func aSmallIncrementalSyncReadsEachSidesChangesOnce() throws {
        try withTemporaryDirectory { dir in
            let a = try ArchiveStore(directory: dir + "/a")
            let b = try ArchiveStore(directory: dir + "/b")
            _ = try a.put(json("{\"n\":0}"), as: id("P/zero"))
            _ = try Sync(local: a, remote: b).runNow()
            for n in 1...3 { _ = try a.put(json("{\"n\":\(n)}"), as: id("P/a\(n)")) }
            _ = try b.put(json("{\"n\":9}"), as: id("P/b9"))
            let (countedA, countedB) = (CountingReplica(a), CountingReplica(b))
            let report = try Sync(a: countedA, b: countedB, options: SyncOptions()).runNow()
            #expect(report.incremental && report.copiedToB == 3 && report.copiedToA == 1, "\(report)")
            #expect(try b.liveContents()["P/a3"] == "{\"n\":3}")
            // One walk: a page of changes and the empty page after it, per side (walking the
            // plan a second time to carry it out read each twice).
            #expect(countedA.changedReads.withLock { $0 } == 2)
            #expect(countedB.changedReads.withLock { $0 } == 2)
        }
    }
}
