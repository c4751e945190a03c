import ArchiveBucket
import ArchiveLocking
import ArchiveStore
import ArchiveSync
import Foundation
import TestSupport
import Testing

/// The start of a sync with a bucket: the probe sent ahead, and the cache each sync opens.
@Suite struct BucketOpeningTests {
    private func id(_ key: String) -> ObjectID { try! ObjectID(collection: "Person", key: key) }
    private func json(_ text: String) -> Data { Data("{\"v\":\"\(text)\"}".utf8) }

    /// `begin()` does not wait for a probe sent ahead (the store's side makes itself current
    /// meanwhile), and the first step that reads the bucket's side does.
    @Test func aProbeSentAheadIsWaitedForByTheFirstReadNotByBegin() async throws {
        try await withTemporaryDirectory { dir in
            let bucket = try await MemoryBucket.made()
            let a = try ArchiveStore(directory: dir + "/a")
            _ = try a.put(json("1"), as: id("one"))
            _ = try await sync(a, with: bucket)
            let gated = GatedBucket(bucket, holding: "p/replica")
            // Opens the gate after 10 s whatever happens, so that a begin() that waits cannot hang the test.
            let watchdog = Task.detached {
                try? await Task.sleep(for: .seconds(10))
                gated.open()
            }
            defer { watchdog.cancel() }
            let replica = try await onThread {
                try BucketReplica(
                    storage: gated, prefix: "p", name: "s3://test/p", cacheDirectory: a.path + "/.archive-sync", cacheKey: "test/p",
                    pusher: a.replica)
            }
            let begunWhileHeld = try await onThread {
                replica.sendOpeningRequests()
                try replica.begin()
                return !gated.isOpen
            }
            #expect(begunWhileHeld)
            // Returns only once the probe has its answer: true when the gate was open by then.
            let reading = Task.detached {
                try await onThread { () -> Bool in
                    _ = try replica.makeCurrent()
                    return gated.isOpen
                }
            }
            try await Task.sleep(for: .milliseconds(200))
            gated.open()
            #expect(try await reading.value)
            replica.end()
        }
    }

    /// With the probe sent ahead, a server that ignores conditional writes is still refused
    /// before anything is written to the bucket.
    @Test func aSyncWithTheProbeSentAheadStillRefusesAServerThatIgnoresConditionalWrites() async throws {
        try await withTemporaryDirectory { dir in
            let bucket = try await MemoryBucket.made()
            let a = try ArchiveStore(directory: dir + "/a")
            _ = try a.put(json("1"), as: id("one"))
            _ = try await sync(a, with: bucket)
            _ = try a.put(json("2"), as: id("two"))
            let keys = bucket.stored(under: "")
            let ignoring = IgnoringBucket(bucket)
            await #expect(throws: BucketError.conditionalWritesIgnored(location: "s3://test/p")) {
                try await onThread {
                    let replica = try BucketReplica(
                        storage: ignoring, prefix: "p", name: "s3://test/p", cacheDirectory: a.path + "/.archive-sync", cacheKey: "test/p",
                        pusher: a.replica)
                    replica.sendOpeningRequests()
                    return try Sync(a: LocalReplica(a), b: replica, options: SyncOptions()).runNow()
                }
            }
            #expect(bucket.stored(under: "") == keys)
        }
    }

    /// The cache's `-wal` and `-shm` files stay, the WAL emptied, once its last connection
    /// closes: the next sync does not make them again (two file creations).
    @Test func theCacheKeepsItsWALFilesEmptiedWhenClosed() throws {
        try withTemporaryDirectory { dir in
            let path = BucketCache.path(in: dir, key: "test/p")
            let replica = ReplicaID(rawValue: "0123456789abcdef")
            let peer = ReplicaID(rawValue: "fedcba9876543210")
            do {
                let cache = try BucketCache(path: path, replica: replica)
                try cache.setCheckpoint(for: peer, to: 7)
            }
            let attributes = try FileManager.default.attributesOfItem(atPath: path + "-wal")
            #expect((attributes[.size] as? NSNumber)?.intValue == 0)
            #expect(FileManager.default.fileExists(atPath: path + "-shm"))
            let reopened = try #require(try BucketCache.existing(at: path))
            #expect(reopened.replica == replica)
            #expect(try reopened.cache.checkpoint(for: peer) == 7)
        }
    }

    /// The cache's file name is what it always was: a store's existing cache is found again.
    @Test func theCacheIsNamedAfterTheFirstEightBytesOfTheKeysHash() {
        let key = "http://127.0.0.1:9000 bench a/"
        // The SHA-256 of the key, as `sha256sum` prints it, cut to 16 digits.
        let hex = ContentHash(of: Data(key.utf8)).description.prefix(16)
        #expect(BucketCache.path(in: "/d", key: key) == "/d/bucket-\(hex).sqlite")
    }
}

/// A bucket whose writes to one key wait until the test opens the gate.
private final class GatedBucket: BucketStorage {
    let inner: MemoryBucket
    let key: String
    private let opened = TracedMutex(false)

    init(_ inner: MemoryBucket, holding key: String) {
        self.inner = inner
        self.key = key
    }

    var isOpen: Bool { opened.withLock { $0 } }
    func open() { opened.withLock { $0 = true } }

    func write(_ key: String, _ data: Data, ifAbsent: Bool) async throws -> Bool {
        while key == self.key && !isOpen { try await Task.sleep(for: .milliseconds(1)) }
        return try await inner.write(key, data, ifAbsent: ifAbsent)
    }

    func read(_ key: String) async throws -> Data? { try await inner.read(key) }
    func keys(under prefix: String, after startAfter: String?) async throws -> [String] { try await inner.keys(under: prefix, after: startAfter) }
    func delete(_ key: String) async throws { try await inner.delete(key) }
}
