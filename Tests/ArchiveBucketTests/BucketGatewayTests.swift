import ArchiveBucket
import ArchiveS3
import ArchiveStore
import ArchiveSync
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Bucket replicas on a real Ceph RADOS Gateway on 127.0.0.1 (TestSupport's CephGateway): a
/// bucket of its own per test, on the process's shared gateway.
@Suite struct BucketGatewayTests {
    /// A client of a new bucket whose prefix `replica` is a bucket replica.
    private func madeBucket() async throws -> (CephGateway, S3Client) {
        let gateway = try await CephGateway.shared()
        let client = S3Client(gateway.configuration(bucket: try await gateway.makeBucket()))
        _ = try await BucketReplica.create(storage: client, prefix: "replica", name: "s3://test/replica")
        return (gateway, client)
    }

    @Test func twoDirectoriesConvergeThroughTheGateway() async throws {
        let (_, client) = try await madeBucket()
        defer { Task { try? await client.shutdown() } }
        try await withTemporaryDirectory { dir in
            var world = World(stores: try (0..<2).map { try ArchiveStore(directory: dir + "/s\($0)") }, seed: 23)
            for _ in 0..<6 {
                world.editAll(operations: 3)
                for store in [0, 1, 0] { _ = try await sync(world.stores[store], with: client, prefix: "replica") }
                try world.checkConverged()
            }
        }
    }

    @Test func tenStoresConvergeThroughOneBucketInRandomOrder() async throws {
        let (_, client) = try await madeBucket()
        defer { Task { try? await client.shutdown() } }
        try await withTemporaryDirectory { dir in
            var world = World(stores: try (0..<10).map { try ArchiveStore(directory: dir + "/s\($0)") }, seed: 10)
            for _ in 0..<3 {
                world.editAll(operations: 2)
                // All ten at once, in a random order: pushes of concurrent edits race.
                let order = world.stores.shuffled(using: &world.rng)
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for store in order { group.addTask { _ = try await sync(store, with: client, prefix: "replica") } }
                    try await group.waitForAll()
                }
                // Quiet: each once more in turn, then once more, sees everything.
                for store in world.stores + world.stores { _ = try await sync(store, with: client, prefix: "replica") }
                try world.checkConverged()
            }
        }
    }

    @Test func twoPushesRacingForOneSegmentNumberBothLand() async throws {
        let (_, client) = try await madeBucket()
        defer { Task { try? await client.shutdown() } }
        try await withTemporaryDirectory { dir in
            let layout = BucketLayout(prefix: "replica")
            let writer = ReplicaID(rawValue: "00000000000000aa")
            let bucketID = ReplicaID(rawValue: "00000000000000bb")
            func entries(_ tag: String, _ count: Int) -> [BucketEntry] {
                (0..<count).map { n in
                    let data = Data("{\"v\":\"\(tag)\(n)\"}".utf8)
                    return BucketEntry(
                        id: try! ObjectID(collection: "Person", key: "\(tag)\(n)"), kind: "json", vector: VersionVector([writer: 1]),
                        hash: ContentHash(of: data), size: data.count, modified: 1, author: writer)
                }
            }
            var expected: Set<String> = []
            for round in 0..<4 {
                // Two caches of one log at the same position: both take the same next number.
                let one = BucketLog(storage: client, layout: layout, cache: try BucketCache(path: dir + "/a\(round).sqlite", replica: bucketID))
                let two = BucketLog(storage: client, layout: layout, cache: try BucketCache(path: dir + "/b\(round).sqlite", replica: bucketID))
                try await one.catchUp()
                try await two.catchUp()
                // Same lengths in even rounds (one conditional write refused), other lengths in odd ones.
                let (first, second) = (entries("a\(round)-", 2), entries("b\(round)-", round % 2 == 0 ? 2 : 3))
                async let pushedOne = one.append(first, to: writer, blobs: [:])
                async let pushedTwo = two.append(second, to: writer, blobs: [:])
                _ = try await (pushedOne, pushedTwo)
                expected.formUnion((first + second).map(\.key))
            }
            let reader = try BucketCache(path: dir + "/reader.sqlite", replica: bucketID)
            try await BucketLog(storage: client, layout: layout, cache: reader).catchUp()
            #expect(Set(try reader.shown(after: nil, limit: 1_000).map(\.id.key)) == expected)
            // Each push left one segment: in even rounds the loser took the next number, in odd
            // ones both took the same number for other lengths (other keys, both written).
            let segments = try await client.list(prefix: "replica/log/").count
            #expect(segments == 8, "\(segments) segments")
        }
    }

    @Test func aSyncKilledAtRandomMomentsAndRunAgainCompletes() async throws {
        let (gateway, client) = try await madeBucket()
        defer { Task { try? await client.shutdown() } }
        try await withTemporaryDirectory { dir in
            let a = try ArchiveStore(directory: dir + "/a")
            // Off the test pool: hundreds of durable writes would hold one of its two threads.
            try await offPool {
                for n in 0..<400 { _ = try a.put(Data("{\"v\":\"\(n)\"}".utf8), as: try ObjectID(collection: "Person", key: "p\(n)")) }
            }
            let url = "s3://\(client.configuration.bucket)/replica"
            let environment = gatewayEnvironment(gateway.endpoint)
            var rng = SeededGenerator(seed: 99)
            var killed = 0
            for round in 0..<5 {
                let delay = UInt32(Int.random(in: 30...700, using: &rng))
                // Timed on a thread of its own: a sleep on the test pool, busy with the whole
                // suite, can wake long after the sync has finished.
                let status = try await offPool {
                    let command = try RunningCommand(environment + [archiveSyncProgram, "sync", a.path, url], executable: "/usr/bin/env")
                    usleep(delay * 1_000)
                    command.send(SIGKILL)
                    return command.wait().status
                }
                if status == 128 + SIGKILL { killed += 1 }
                // Edits between runs: the next run takes them too.
                _ = try a.put(Data("{\"v\":\"edit \(round)\"}".utf8), as: try ObjectID(collection: "Person", key: "p\(round)"))
            }
            #expect(killed >= 2, "only \(killed) of 5 runs were killed before they finished")
            let last = try await runArchiveSyncOffPool(["sync", a.path, url], environment: environment)
            #expect(last.status == 0, "\(last)")
            let b = try ArchiveStore(directory: dir + "/b")
            _ = try await sync(b, with: client, prefix: "replica")
            #expect(try b.liveContents() == a.liveContents())
            #expect(try a.liveContents().count == 400)
        }
    }

    @Test func aNoOpSyncIsTwoRequests() async throws {
        let gateway = try await CephGateway.shared()
        let proxy = try await FaultyS3Proxy.start(upstream: gateway.endpoint)
        defer { Task { try? await proxy.stop() } }
        var configuration = gateway.configuration(bucket: try await gateway.makeBucket())
        configuration.endpoint = proxy.endpoint
        let client = S3Client(configuration)
        defer { Task { try? await client.shutdown() } }
        _ = try await BucketReplica.create(storage: client, prefix: "replica", name: "s3://test/replica")
        try await withTemporaryDirectory { dir in
            let a = try ArchiveStore(directory: dir + "/a")
            // Off the test pool: hundreds of durable writes would hold one of its two threads.
            try await offPool {
                for n in 0..<200 { _ = try a.put(Data("{\"v\":\"\(n)\"}".utf8), as: try ObjectID(collection: "Person", key: "p\(n)")) }
            }
            _ = try await sync(a, with: client, prefix: "replica")
            let before = proxy.counts.requests
            let report = try await sync(a, with: client, prefix: "replica")
            #expect(report.changes == 0)
            // The probe's PUT (refused at its first try: no read-back) and one listing of `log/`.
            #expect(proxy.counts.requests - before == 2)
        }
    }

    /// The command's no-op sync sends the probe and the listing at once, before it opens the
    /// store (its cache names the bucket): the proxy holds the first request until the second
    /// is in flight, which a sync that sends them one after the other never gets to.
    @Test func theCommandSendsTheProbeAndTheListingAtOnce() async throws {
        let gateway = try await CephGateway.shared()
        let proxy = try await FaultyS3Proxy.start(upstream: gateway.endpoint)
        defer { Task { try? await proxy.stop() } }
        let bucket = try await gateway.makeBucket()
        let environment = gatewayEnvironment(proxy.endpoint)
        let url = "s3://\(bucket)/replica"
        try await withTemporaryDirectory { dir in
            let a = try await syncedStore(dir + "/a", with: url, environment: environment)
            let before = proxy.counts.requests
            proxy.gather(2)
            let noOp = try await runArchiveSyncOffPool(["sync", a.path, url], environment: environment)
            #expect(noOp.status == 0, "\(noOp)")
            #expect(proxy.counts.requests - before == 2)
            #expect(proxy.maxInFlight == 2)
        }
    }

    /// A sync that finds nothing to do commits nothing to the store: its checkpoint of the
    /// bucket, already where it would move it, is not written again.
    @Test func aNoOpSyncDoesNotWriteTheStoresCheckpoint() async throws {
        let gateway = try await CephGateway.shared()
        let bucket = try await gateway.makeBucket()
        let environment = gatewayEnvironment(gateway.endpoint)
        let url = "s3://\(bucket)/replica"
        try await withTemporaryDirectory { dir in
            let a = try await syncedStore(dir + "/a", with: url, environment: environment)
            // When each checkpoint was last written, in ns: a write sets it to the time.
            func written() throws -> [Int64] {
                try a.readManifest { sql in
                    var times: [Int64] = []
                    try sql.query("SELECT updated FROM peers ORDER BY replica") { times.append($0.int(0)) }
                    return times
                }
            }
            let before = try written()
            #expect(before.count == 1)
            let noOp = try await runArchiveSyncOffPool(["sync", a.path, url], environment: environment)
            #expect(noOp.status == 0, "\(noOp)")
            #expect(try written() == before)
        }
    }

    @Test func theCommandSaysWhatIsWrongInOneSentence() async throws {
        let gateway = try await CephGateway.shared()
        let bucket = try await gateway.makeBucket()
        try await withTemporaryDirectory { dir in
            _ = try ArchiveStore(directory: dir + "/a")
            let environment = gatewayEnvironment(gateway.endpoint)
            let noReplica = try await runArchiveSyncOffPool(["sync", dir + "/a", "s3://\(bucket)/nothing"], environment: environment)
            #expect(noReplica.status == 2, "\(noReplica)")
            #expect(noReplica.errorOutput.contains("is not a bucket replica (it has no replica marker)"), "\(noReplica)")
            let twoBuckets = try await runArchiveSyncOffPool(["sync", "s3://\(bucket)/a", "s3://\(bucket)/b"], environment: environment)
            #expect(twoBuckets.status == 2, "\(twoBuckets)")
            #expect(twoBuckets.errorOutput.contains("two buckets cannot sync with each other"), "\(twoBuckets)")
        }
    }

    @Test func aServerThatDropsConditionalHeadersIsRefusedByInit() async throws {
        let gateway = try await CephGateway.shared()
        let bucket = try await gateway.makeBucket()
        let proxy = try await FaultyS3Proxy.start(upstream: gateway.endpoint)
        defer { Task { try? await proxy.stop() } }
        proxy.stripConditionalHeaders = true
        let result = try await runArchiveSyncOffPool(
            ["init", "s3://\(bucket)/replica"],
            environment: gatewayEnvironment(proxy.endpoint))
        #expect(result.status == 2, "\(result)")
        #expect(result.errorOutput.contains("ignores conditional writes"), "\(result)")
    }
}

/// A store of one object at `path`, synced by the command with the bucket replica at `url`,
/// which `init` makes.
private func syncedStore(_ path: String, with url: String, environment: [String]) async throws -> ArchiveStore {
    let store = try ArchiveStore(directory: path)
    _ = try store.put(Data("{\"v\":1}".utf8), as: try ObjectID(collection: "Person", key: "ada"))
    for arguments in [["init", url], ["sync", store.path, url]] {
        let result = try await runArchiveSyncOffPool(arguments, environment: environment)
        #expect(result.status == 0, "\(result)")
    }
    return store
}

/// The test user's keys and `endpoint`, as `NAME=value` for the command's environment.
func gatewayEnvironment(_ endpoint: URL) -> [String] {
    [
        "AWS_ACCESS_KEY_ID=\(CephGateway.accessKey)", "AWS_SECRET_ACCESS_KEY=\(CephGateway.secretKey)",
        "AWS_ENDPOINT_URL=\(endpoint.absoluteString)", "AWS_REGION=us-east-1",
    ]
}

/// `archive-sync arguments` with `environment` (`NAME=value`) added, on a thread of its own.
func runArchiveSyncOffPool(_ arguments: [String], environment: [String]) async throws -> CommandResult {
    try await offPool { try RunningCommand(environment + [archiveSyncProgram] + arguments, executable: "/usr/bin/env").finish(within: .seconds(120)) }
}
