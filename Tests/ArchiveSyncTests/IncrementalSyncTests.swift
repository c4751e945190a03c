import ArchiveStore
import Foundation
import TestSupport
import Testing

@testable import ArchiveSync

#if canImport(Glibc)
    import Glibc
#endif

/// A store here whose file of one object another program rewrites while a sync writes into it.
private final class InterferingReplica: SyncReplica, @unchecked Sendable {
    let local: LocalReplica
    let file: String
    var interfered = false

    init(_ store: ArchiveStore, rewriting file: String) {
        local = LocalReplica(store)
        self.file = file
    }

    var replica: ReplicaID { local.replica }
    var name: String { local.name }
    func begin() throws { try local.begin() }
    func end() { local.end() }
    func makeCurrent() throws -> Bool { try local.makeCurrent() }
    func changeSequence() throws -> Int { try local.changeSequence() }
    func liveObjectCount() throws -> Int { try local.liveObjectCount() }
    func checkpoint(for peer: ReplicaID) throws -> Int? { try local.checkpoint(for: peer) }
    func setCheckpoint(for peer: ReplicaID, to sequence: Int) throws { try local.setCheckpoint(for: peer, to: sequence) }
    func sequenceAfterOwnWrites(since sequence: Int) throws -> Int { try local.sequenceAfterOwnWrites(since: sequence) }
    func entries(after id: ObjectID?, limit: Int) throws -> [ReplicaEntry] { try local.entries(after: id, limit: limit) }
    func entries(changedAfter after: Int, through: Int, limit: Int) throws -> [ReplicaEntry] {
        try local.entries(changedAfter: after, through: through, limit: limit)
    }
    func entries(for ids: [ObjectID]) throws -> [ReplicaEntry?] { try local.entries(for: ids) }
    func contents(of entries: [ReplicaEntry]) throws -> [Data?] { try local.contents(of: entries) }
    func mergeVectors(_ merges: [VectorMerge]) throws { try local.mergeVectors(merges) }

    /// Rewrites the file just before the sync's write, then puts its bytes back (an edit
    /// undone): afterwards the object holds what it held, with only a new stamp.
    func apply(_ objects: [IncomingObject]) throws -> [Bool] {
        guard !interfered else { return try local.apply(objects) }
        interfered = true
        let original = try Data(contentsOf: URL(fileURLWithPath: file))
        try Data("{\"v\":\"edited during the sync\"}".utf8).write(to: URL(fileURLWithPath: file))
        defer { try? original.write(to: URL(fileURLWithPath: file)) }
        return try local.apply(objects)
    }
}

private func put(_ store: ArchiveStore, _ key: String, _ text: String) throws {
    try store.put(Data(text.utf8), as: ObjectID(collection: "P", key: key))
}

private func text(_ store: ArchiveStore, _ key: String) throws -> String {
    String(decoding: try store.data(for: ObjectID(collection: "P", key: key)), as: UTF8.self)
}

@Suite("Sync: skipped writes, merged vectors, deletes after the latest, and synced stamps")
struct IncrementalSyncTests {
    /// A write skipped because the object changed during the sync is taken by the next sync,
    /// even when the change left no new version (undone): the checkpoints did not move past it.
    @Test func aWriteSkippedDuringASyncIsTakenByTheNextOne() async throws {
        try await withTemporaryDirectory { dir in
            let a = try ArchiveStore(directory: dir + "/a")
            let b = try ArchiveStore(directory: dir + "/b")
            try put(a, "x", "{\"v\":0}")
            _ = try await Sync(local: a, remote: b).run()
            try put(a, "x", "{\"v\":1}")
            let interfering = InterferingReplica(b, rewriting: dir + "/b/P/x.json")
            let first = try Sync(a: LocalReplica(a), b: interfering, options: SyncOptions()).runNow()
            #expect(first.skipped.map(\.id) == ["P/x"])
            #expect(try text(b, "x") == "{\"v\":0}")
            // The edit was undone, so the object has no new version on B: only the sync's own
            // checkpoints can bring A's version over.
            let second = try await Sync(local: a, remote: b).run()
            #expect(second.copiedToB == 1, "\(second)")
            #expect(try text(b, "x") == "{\"v\":1}")
            #expect(try a.liveHashes() == b.liveHashes())
            let third = try await Sync(local: a, remote: b).run()
            #expect(third.changes == 0 && third.vectorsMerged == 0, "\(third)")
        }
    }

    /// A no-op sync writes neither checkpoint again (each would keep its sequence): no durable
    /// commit on either side. The peers table's `updated` time would change with each write.
    @Test func aNoOpSyncLeavesBothCheckpointsUnwritten() async throws {
        try await withTemporaryDirectory { dir in
            let (a, b) = (try ArchiveStore(directory: dir + "/a"), try ArchiveStore(directory: dir + "/b"))
            try put(a, "x", "{\"v\":0}")
            try put(b, "y", "{\"v\":1}")
            _ = try await Sync(local: a, remote: b).run()
            _ = try await Sync(local: a, remote: b).run()
            func written() throws -> [Int64?] {
                try ["a", "b"].map { side in
                    try SQLiteConnection(path: dir + "/\(side)/.archive-sync/manifest.sqlite").first("SELECT updated FROM peers") { $0.int(0) }
                }
            }
            let before = try written()
            #expect(before.allSatisfy { $0 != nil })
            let noOp = try await Sync(local: a, remote: b).run()
            #expect(noOp.incremental && noOp.changes == 0 && noOp.vectorsMerged == 0, "\(noOp)")
            #expect(try written() == before)
            // A change still moves both.
            try put(a, "x", "{\"v\":2}")
            _ = try await Sync(local: a, remote: b).run()
            #expect(try written().allSatisfy { $0 != nil } && written() != before)
            #expect(try a.liveHashes() == b.liveHashes())
        }
    }

    /// Vectors merged by one sync reach a third store: C's later edit is then a plain copy, not
    /// a conflict.
    @Test func mergedVectorsReachAThirdStore() async throws {
        try await withTemporaryDirectory { dir in
            let (a, b, c) = (
                try ArchiveStore(directory: dir + "/a"), try ArchiveStore(directory: dir + "/b"), try ArchiveStore(directory: dir + "/c")
            )
            try put(a, "x", "{\"v\":\"s\"}")
            _ = try await Sync(local: c, remote: a).run()
            try put(b, "x", "{\"v\":\"s\"}")
            let merged = try await Sync(local: a, remote: b).run()
            #expect(merged.vectorsMerged == 1)
            _ = try await Sync(local: c, remote: a).run()
            try put(c, "x", "{\"v\":\"c\"}")
            let report = try await Sync(local: c, remote: a).run()
            #expect(report.conflicts.isEmpty && report.copiedToB == 1, "\(report)")
            #expect(try text(a, "x") == "{\"v\":\"c\"}")
        }
    }

    /// A delete made after seeing the latest contents is not undone by an older vector.
    @Test func aDeleteAfterSeeingTheLatestStaysDeleted() async throws {
        try await withTemporaryDirectory { dir in
            let (a, b, c) = (
                try ArchiveStore(directory: dir + "/a"), try ArchiveStore(directory: dir + "/b"), try ArchiveStore(directory: dir + "/c")
            )
            let id = try ObjectID(collection: "P", key: "x")
            try put(a, "x", "{\"v\":0}")
            _ = try await Sync(local: a, remote: b).run()
            _ = try await Sync(local: b, remote: c).run()
            try a.remove(id)
            try put(b, "x", "{\"v\":\"b\"}")
            _ = try await Sync(local: b, remote: c).run()
            _ = try await Sync(local: a, remote: b, options: SyncOptions(force: true)).run()  // the edit beats the delete
            _ = try await Sync(local: b, remote: c).run()
            try c.remove(id)
            _ = try await Sync(local: b, remote: c, options: SyncOptions(force: true)).run()
            #expect(try b.liveHashes()[id] == nil)
            #expect(try c.liveHashes()[id] == nil)
        }
    }

    /// A synced file keeps its object's modification time, so the next scan trusts its stamp
    /// and reads nothing; an edit made right after the sync, same size, is still seen.
    @Test func aSyncedFileKeepsItsTimeAndItsStampIsTrusted() async throws {
        try await withTemporaryDirectory { dir in
            let (a, b) = (try ArchiveStore(directory: dir + "/a"), try ArchiveStore(directory: dir + "/b"))
            for key in ["x", "y", "z"] { try put(a, key, "{\"v\":\"\(key)\"}") }
            try await Task.sleep(for: .milliseconds(2_100))  // past the racy window of the versions' times
            _ = try await Sync(local: a, remote: b).run()

            let id = try ObjectID(collection: "P", key: "x")
            let modified = try #require(a.replicaEntries(for: [id]).first??.modified)
            var info = stat()
            #expect(lstat(dir + "/b/P/x.json", &info) == 0)
            #expect(Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec) == modified)
            let scan = try b.scan()
            #expect(scan.changes.isEmpty)
            #expect(scan.unchanged == 3)
            #expect(scan.touched == 0)

            try Data("{\"v\":\"X\"}".utf8).write(to: URL(fileURLWithPath: dir + "/b/P/x.json"))  // same size
            #expect(try b.scan().changes.map(\.id) == [id])
            #expect(try text(b, "x") == "{\"v\":\"X\"}")
        }
    }
}
