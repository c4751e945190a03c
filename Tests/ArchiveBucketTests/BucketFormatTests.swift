import ArchiveBucket
import ArchiveLocking
import ArchiveStore
import ArchiveSync
import Foundation
import TestSupport
import Testing

@Suite struct BucketFormatTests {
    private func id(_ key: String) -> ObjectID { try! ObjectID(collection: "Person", key: key) }
    private func json(_ text: String) -> Data { Data("{\"v\":\"\(text)\"}".utf8) }

    @Test func twoStoresConvergeThroughABucket() async throws {
        try await withTemporaryDirectory { dir in
            let bucket = try await MemoryBucket.made()
            let a = try ArchiveStore(directory: dir + "/a")
            let b = try ArchiveStore(directory: dir + "/b")
            _ = try a.put(json("a1"), as: id("one"))
            _ = try a.put(json("a2"), as: id("two"))
            _ = try b.put(json("b3"), as: id("three"))
            for store in [a, b, a] { _ = try await sync(store, with: bucket) }
            #expect(try a.liveContents() == b.liveContents())
            #expect(try a.liveContents().count == 3)
            // An edit on each side of the same object (a conflict), an edit and a delete.
            _ = try a.put(json("a1 edited"), as: id("one"))
            _ = try b.put(json("b1 edited"), as: id("one"))
            try b.remove(id("two"))
            _ = try a.put(json("a3 edited"), as: id("three"))
            for store in [a, b, a, b] { _ = try await sync(store, with: bucket) }
            let live = try a.liveContents()
            #expect(live == (try b.liveContents()))
            #expect(live[id("two")] == nil)
            #expect(live[id("three")] == json("a3 edited"))
            // Both edits of `one` kept: one at the id, the other as its conflict copy.
            let ones = live.filter { $0.key.key.hasPrefix("one") }
            #expect(Set(ones.values) == [json("a1 edited"), json("b1 edited")])
        }
    }

    @Test func aNoOpSyncCostsOneConditionalPutAndOneListing() async throws {
        try await withTemporaryDirectory { dir in
            let bucket = try await MemoryBucket.made()
            let a = try ArchiveStore(directory: dir + "/a")
            for n in 0..<50 { _ = try a.put(json("\(n)"), as: id("k\(n)")) }
            _ = try await sync(a, with: bucket)
            bucket.requests.withLock { $0 = [:] }
            let report = try await sync(a, with: bucket)
            #expect(report.changes == 0)
            // The probe (refused at its first try: no read-back) and one listing of every log.
            #expect(bucket.requests.withLock { $0 } == ["PUT": 1, "LIST": 1])
        }
    }

    /// A store's push can make the bucket show another version than the pushed one (a delete
    /// pushed over a version that hid one made apart: an edit beats a delete). The store's
    /// checkpoint stops before that change, so that its next sync takes the edit.
    @Test func aVersionThatWinsOverAPushIsComparedByTheNextSync() async throws {
        try await withTemporaryDirectory { dir in
            let bucket = try await MemoryBucket.made()
            let (a, b, c) = (
                try ArchiveStore(directory: dir + "/a"), try ArchiveStore(directory: dir + "/b"), try ArchiveStore(directory: dir + "/c")
            )
            _ = try a.put(json("0"), as: id("x"))
            // Others, so that one delete is not more than half of the objects (the safety valve).
            for n in 0..<3 { _ = try a.put(json("\(n)"), as: id("y\(n)")) }
            for store in [a, b, c] { _ = try await sync(store, with: bucket) }
            // C's edit, then A's later one, A's listing lagging behind C's segment: made apart.
            _ = try c.put(json("c"), as: id("x"))
            _ = try await sync(c, with: bucket)
            bucket.hidden.withLock { $0 = Set(bucket.stored(under: "p/log/\(c.replica)/")) }
            _ = try a.put(json("a"), as: id("x"))
            _ = try await sync(a, with: bucket)
            bucket.hidden.withLock { $0 = [] }
            // B takes the newer, A's, and deletes it: the bucket then shows C's, which B never had.
            _ = try await sync(b, with: bucket)
            #expect(try b.data(for: id("x")) == json("a"))
            try b.remove(id("x"))
            _ = try await sync(b, with: bucket)
            _ = try await sync(b, with: bucket)
            #expect(try b.liveContents()[id("x")] == json("c"))
        }
    }

    @Test func aSegmentAfterAGapWaitsForIt() async throws {
        try await withTemporaryDirectory { dir in
            let bucket = try await MemoryBucket.made()
            let a = try ArchiveStore(directory: dir + "/a")
            let b = try ArchiveStore(directory: dir + "/b")
            _ = try a.put(json("1"), as: id("first"))
            _ = try await sync(a, with: bucket)
            _ = try a.put(json("2"), as: id("second"))
            _ = try await sync(a, with: bucket)
            let segments = bucket.stored(under: "p/log/")
            #expect(segments.count == 2)
            // The listing lags behind the first segment's write: the second is not read past the gap.
            bucket.hidden.withLock { $0 = [segments[0]] }
            _ = try await sync(b, with: bucket)
            #expect(try b.liveContents().isEmpty)
            bucket.hidden.withLock { $0 = [] }
            _ = try await sync(b, with: bucket)
            #expect(try b.liveContents() == a.liveContents())
        }
    }

    @Test func theLoserOfARaceForASegmentNumberRetriesWithTheNext() async throws {
        try await withTemporaryDirectory { dir in
            let bucket = MemoryBucket()
            let layout = BucketLayout(prefix: "p")
            let writer = ReplicaID(rawValue: "00000000000000aa")
            let bucketID = ReplicaID(rawValue: "00000000000000bb")
            func entry(_ key: String, _ text: String) -> BucketEntry {
                BucketEntry(
                    id: id(key), kind: "json", vector: VersionVector([writer: 1]), hash: ContentHash(of: json(text)), size: json(text).count,
                    modified: 1, author: writer)
            }
            // Two caches of one log (a store copied to two places), both at its start.
            let caches = try ["one", "two", "three"].map { try BucketCache(path: dir + "/\($0).sqlite", replica: bucketID) }
            let (one, two, three) = (
                BucketLog(storage: bucket, layout: layout, cache: caches[0]), BucketLog(storage: bucket, layout: layout, cache: caches[1]),
                BucketLog(storage: bucket, layout: layout, cache: caches[2])
            )
            _ = try await one.append([entry("x", "1")], to: writer, blobs: [ContentHash(of: json("1")): json("1")])
            // The same number and length: the conditional write is refused.
            _ = try await two.append([entry("y", "2")], to: writer, blobs: [ContentHash(of: json("2")): json("2")])
            // Another length at a number taken: another key, written; both segments stand.
            _ = try await three.append([entry("z", "3"), entry("w", "4")], to: writer, blobs: [:])
            #expect(
                bucket.stored(under: "p/log/").map { String($0.split(separator: "/").last!) } == [
                    "0000000000000001-0000000000000001", "0000000000000001-0000000000000002", "0000000000000002-0000000000000002",
                ])
            // A reader that comes later folds every entry.
            let reader = try BucketCache(path: dir + "/reader.sqlite", replica: bucketID)
            try await BucketLog(storage: bucket, layout: layout, cache: reader).catchUp()
            #expect(Set(try reader.shown(after: nil, limit: 10).map(\.id.key)) == ["x", "y", "z", "w"])
            #expect(try reader.logPositions()[writer]?.last == 2)
            // So do the writers at their next read, the shorter segment at their number included.
            for cache in [one, two, three] { try await cache.catchUp() }
            for cache in caches {
                #expect(Set(try cache.shown(after: nil, limit: 10).map(\.id.key)) == ["x", "y", "z", "w"])
            }
        }
    }

    @Test func theFoldIsTheSameInAnyOrder() throws {
        try withTemporaryDirectory { dir in
            let (r, s, t) = (ReplicaID(rawValue: "r"), ReplicaID(rawValue: "s"), ReplicaID(rawValue: "t"))
            func entry(_ text: String?, _ vector: [ReplicaID: Int], _ modified: Int64, _ author: ReplicaID) -> BucketEntry {
                BucketEntry(
                    id: id("x"), kind: "json", vector: VersionVector(vector), hash: text.map { ContentHash(of: json($0)) },
                    size: text.map { json($0).count } ?? 0,
                    modified: modified, author: author)
            }
            let entries = [
                entry("r1", [r: 1], 10, r), entry("s1", [s: 1], 30, s), entry(nil, [t: 1], 40, t), entry("r2", [r: 2, s: 1], 20, r),
            ]
            var shown: Set<BucketEntry> = []
            for (n, order) in [[0, 1, 2, 3], [3, 2, 1, 0], [2, 0, 3, 1], [1, 3, 0, 2]].enumerated() {
                let cache = try BucketCache(path: dir + "/\(n).sqlite", replica: ReplicaID(rawValue: "b"))
                for i in order { try cache.fold([entries[i]], log: nil) }
                let row = try #require(try cache.shown([id("x")])[0])
                shown.insert(
                    BucketEntry(
                        id: row.id, kind: "json", vector: row.vector, hash: row.hash, size: row.size, modified: row.modified, author: row.author))
            }
            // r2 has seen r1 and s1; it and t's delete were made apart, and an edit beats a delete.
            #expect(shown == [entries[3]])
        }
    }

    @Test func aBlobThatDoesNotMatchItsHashIsRefused() async throws {
        try await withTemporaryDirectory { dir in
            let bucket = try await MemoryBucket.made()
            let a = try ArchiveStore(directory: dir + "/a")
            let b = try ArchiveStore(directory: dir + "/b")
            _ = try a.put(json("1"), as: id("one"))
            _ = try await sync(a, with: bucket)
            let blob = try #require(bucket.stored(under: "p/blobs/").first)
            bucket.objects.withLock { $0[blob] = Data("{\"v\":\"tampered\"}".utf8) }
            await #expect(throws: BucketError.damagedBlob(key: blob)) { try await sync(b, with: bucket) }
            #expect(try b.liveContents().isEmpty)
        }
    }

    @Test func eachSyncChecksConditionalWritesAndTheMarker() async throws {
        try await withTemporaryDirectory { dir in
            let bucket = try await MemoryBucket.made()
            let a = try ArchiveStore(directory: dir + "/a")
            _ = try a.put(json("1"), as: id("one"))
            _ = try await sync(a, with: bucket)
            // The same bucket behind a proxy that drops the header: refused before anything is read or written.
            let keys = bucket.stored(under: "")
            await #expect(throws: BucketError.conditionalWritesIgnored(location: "s3://test/p")) {
                try await sync(a, with: IgnoringBucket(bucket))
            }
            #expect(bucket.stored(under: "") == keys)
            // The prefix emptied under the store: refused, and left empty.
            bucket.objects.withLock { $0 = [:] }
            await #expect(throws: BucketError.markerMissing(location: "s3://test/p")) { try await sync(a, with: bucket) }
            #expect(bucket.stored(under: "").isEmpty)
        }
    }

    @Test func aServerThatIgnoresConditionalWritesIsRefused() async throws {
        let bucket = IgnoringBucket()
        await #expect(throws: BucketError.conditionalWritesIgnored(location: "s3://test/p")) {
            try await BucketReplica.create(storage: bucket, prefix: "p", name: "s3://test/p")
        }
    }
}

/// A server that drops `If-None-Match`.
final class IgnoringBucket: BucketStorage {
    let inner: MemoryBucket
    init(_ inner: MemoryBucket = MemoryBucket()) { self.inner = inner }
    func write(_ key: String, _ data: Data, ifAbsent: Bool) async throws -> Bool { try await inner.write(key, data, ifAbsent: false) }
    func read(_ key: String) async throws -> Data? { try await inner.read(key) }
    func keys(under prefix: String, after startAfter: String?) async throws -> [String] { try await inner.keys(under: prefix, after: startAfter) }
    func delete(_ key: String) async throws { try await inner.delete(key) }
}

@Suite struct BucketConvergenceTests {
    @Test func fiveStoresConvergeThroughAnInMemoryBucketWithSyncsAtOnce() async throws {
        let bucket = try await MemoryBucket.made()
        try await withTemporaryDirectory { dir in
            var world = World(stores: try (0..<5).map { try ArchiveStore(directory: dir + "/s\($0)") }, seed: 7)
            for _ in 0..<4 {
                world.editAll(operations: 2)
                let order = world.stores.shuffled(using: &world.rng)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for store in order { group.addTask { _ = try await sync(store, with: bucket) } }
                    try await group.waitForAll()
                }
                for store in world.stores + world.stores { _ = try await sync(store, with: bucket) }
                try world.checkConverged()
            }
        }
    }
}

@Suite struct BucketInterruptionTests {
    /// A sync cut short at a request (its storage fails from there on, as a killed process
    /// stops) and run again converges, and loses nothing.
    @Test func aSyncCutShortAtAnyRequestAndRunAgainConverges() async throws {
        // Of the 42 requests of this sync: the probe, the listing, the segment read, a blob,
        // and the pushes at the end (blobs, segments, vector merges).
        for failAt in [1, 2, 3, 5, 6, 20, 38, 40, 41, 42] {
            try await withTemporaryDirectory { dir in
                let bucket = try await MemoryBucket.made()
                let a = try ArchiveStore(directory: dir + "/a")
                let b = try ArchiveStore(directory: dir + "/b")
                for n in 0..<30 { _ = try a.put(Data("{\"v\":\"a\(n)\"}".utf8), as: try ObjectID(collection: "Person", key: "p\(n)")) }
                for n in 20..<25 { _ = try b.put(Data("{\"v\":\"b\(n)\"}".utf8), as: try ObjectID(collection: "Person", key: "p\(n)")) }
                _ = try await sync(b, with: bucket)
                let failing = FailingBucket(inner: bucket, failAt: failAt)
                await #expect(throws: (any Error).self) { try await sync(a, with: failing) }
                for store in [a, b, a] { _ = try await sync(store, with: bucket) }
                let live = try a.liveContents()
                #expect(live == (try b.liveContents()), "cut at request \(failAt)")
                // 30 of A's, and B's 5 concurrent versions kept beside A's.
                #expect(live.count == 35, "cut at request \(failAt)")
            }
        }
    }
}

/// A bucket whose requests fail from the `failAt`th on.
private final class FailingBucket: BucketStorage {
    let inner: MemoryBucket
    let left: TracedMutex<Int>

    init(inner: MemoryBucket, failAt: Int) {
        self.inner = inner
        left = TracedMutex(failAt)
    }

    private func spend() throws {
        let go = left.withLock { left in
            left -= 1
            return left > 0
        }
        if !go { throw CancellationError() }
    }

    func write(_ key: String, _ data: Data, ifAbsent: Bool) async throws -> Bool {
        try spend()
        return try await inner.write(key, data, ifAbsent: ifAbsent)
    }
    func read(_ key: String) async throws -> Data? {
        try spend()
        return try await inner.read(key)
    }
    func keys(under prefix: String, after startAfter: String?) async throws -> [String] {
        try spend()
        return try await inner.keys(under: prefix, after: startAfter)
    }
    func delete(_ key: String) async throws {
        try spend()
        try await inner.delete(key)
    }
}
