import ArchiveBucket
import ArchiveStore
import ArchiveSync
import Foundation
import TestSupport
import Testing

/// Compaction's logic on an in-memory bucket: snapshots, the two phases of deletion, the lease.
@Suite struct BucketCompactionTests {
    private func id(_ key: String) -> ObjectID { try! ObjectID(collection: "Person", key: key) }
    private func json(_ text: String) -> Data { Data("{\"v\":\"\(text)\"}".utf8) }

    private func compact(_ bucket: MemoryBucket, grace: Duration = .zero) async throws -> CompactionReport {
        var compaction = BucketCompaction(storage: bucket, prefix: "p", location: "s3://test/p")
        compaction.grace = grace
        return try await compaction.run()
    }

    /// `edits` rounds of puts by `store`, each round synced: one segment each.
    private func pushRounds(_ store: ArchiveStore, _ bucket: MemoryBucket, _ rounds: [[(String, String)]]) async throws {
        for round in rounds {
            for (key, text) in round { _ = try store.put(json(text), as: id(key)) }
            _ = try await sync(store, with: bucket)
        }
    }

    @Test func segmentsAndBlobsAreMarkedAndDeletedOnlyByACompactionAfterTheGrace() async throws {
        try await withTemporaryDirectory { dir in
            let bucket = try await MemoryBucket.made()
            let a = try ArchiveStore(directory: dir + "/a")
            try await pushRounds(a, bucket, [(0..<6).map { ("k\($0)", "\($0)") }, (0..<3).map { ("k\($0)", "e\($0)") }, [("k0", "f0")]])
            let blobs = bucket.stored(under: "p/blobs/").count
            #expect(blobs == 10)
            // The two older segments folded; the newest stays, and so do the blobs the snapshot names.
            let first = try await compact(bucket, grace: .seconds(3600))
            #expect(first.snapshot == "p/snapshot/0000000000000001")
            #expect(first.markedSegments == 2 && first.markedBlobs == 3 && first.markedSnapshots == 0, "\(first)")
            #expect(first.deletedSegments + first.deletedBlobs == 0)
            // Within the grace: nothing deleted, the mark waits, nothing marked twice.
            let second = try await compact(bucket, grace: .seconds(3600))
            #expect(second.snapshot == nil && second.pendingMarks == 1 && second.markedBlobs + second.markedSegments == 0, "\(second)")
            #expect(bucket.stored(under: "p/blobs/").count == blobs)
            let third = try await compact(bucket)
            #expect(third.deletedBlobs == 3 && third.deletedSegments == 2, "\(third)")
            #expect(bucket.stored(under: "p/log/").count == 1)
            #expect(bucket.stored(under: "p/blobs/").count == blobs - 3)
            #expect(bucket.stored(under: "p/marks/").isEmpty && bucket.stored(under: "p/lease").isEmpty)
            // A new store reads the snapshot, and after it the segments pushed since.
            _ = try a.put(json("after"), as: id("k9"))
            _ = try await sync(a, with: bucket)
            let c = try ArchiveStore(directory: dir + "/c")
            let report = try await sync(c, with: bucket)
            #expect(report.skipped.isEmpty)
            #expect(try c.liveContents() == a.liveContents())
            #expect(try c.liveContents().count == 7)
            #expect(try c.data(for: id("k0")) == json("f0"))
        }
    }

    /// A store that last synced before the segments were folded and deleted reads the
    /// snapshot: a delete made since stays a delete (its tombstone is in the snapshot).
    @Test func aStoreWhoseCacheIsBehindTheSnapshotConvergesWithoutResurrecting() async throws {
        try await withTemporaryDirectory { dir in
            let bucket = try await MemoryBucket.made()
            let (a, c) = (try ArchiveStore(directory: dir + "/a"), try ArchiveStore(directory: dir + "/c"))
            for n in 0..<6 { _ = try a.put(json("\(n)"), as: id("k\(n)")) }
            for store in [a, c] { _ = try await sync(store, with: bucket) }
            try a.remove(id("k1"))
            _ = try await sync(a, with: bucket)
            try await pushRounds(a, bucket, [[("k2", "edited")], [("k3", "edited")]])
            _ = try await compact(bucket)
            _ = try await compact(bucket)
            // Only a's newest segment is left: c's position is before a gap.
            #expect(bucket.stored(under: "p/log/").count == 1)
            for store in [c, a, c] { _ = try await sync(store, with: bucket) }
            #expect(try c.liveContents() == a.liveContents())
            #expect(try c.liveContents()[id("k1")] == nil)
            #expect(try c.liveContents()[id("k2")] == json("edited"))
        }
    }

    /// A blob deleted as unreferenced, whose bytes a store writes again later: the store's
    /// cache has seen the hash, and the push must write the blob anew all the same.
    @Test func contentsWrittenAgainAfterTheirBlobWasDeletedArePushedAgain() async throws {
        try await withTemporaryDirectory { dir in
            let bucket = try await MemoryBucket.made()
            let (a, b) = (try ArchiveStore(directory: dir + "/a"), try ArchiveStore(directory: dir + "/b"))
            try await pushRounds(a, bucket, [[("k", "x")], [("k", "y")], [("k", "z")]])
            _ = try await compact(bucket)
            let second = try await compact(bucket)
            #expect(second.deletedBlobs == 1)
            try await pushRounds(a, bucket, [[("k", "x")]])
            let report = try await sync(b, with: bucket)
            #expect(report.skipped.isEmpty, "\(report.skipped)")
            #expect(try b.data(for: id("k")) == json("x"))
        }
    }

    @Test func aLiveLeaseIsRefusedAndAnExpiredOneTakenOverByOneTakerOnly() async throws {
        let bucket = try await MemoryBucket.made()
        let layout = BucketLayout(prefix: "p")
        let live = LeaseRecord(
            holder: "elsewhere pid 7", host: "elsewhere", pid: 7, token: "t", expires: Int64(Date().timeIntervalSince1970 + 600) * 1_000_000_000)
        _ = try await bucket.write(layout.lease, try JSONEncoder().encode(live), ifAbsent: false)
        await #expect(throws: CompactionError.leaseHeld(location: "s3://test/p", holder: "elsewhere pid 7", expires: live.expiry)) {
            try await compact(bucket)
        }
        var expired = live
        expired.expires = 1
        _ = try await bucket.write(layout.lease, try JSONEncoder().encode(expired), ifAbsent: false)
        let takers = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    do {
                        _ = try await BucketLease.take(storage: bucket, layout: layout, location: "s3://test/p", duration: .seconds(60))
                        return true
                    } catch is CompactionError { return false }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(takers.filter { $0 }.count == 1, "\(takers)")
    }
}
