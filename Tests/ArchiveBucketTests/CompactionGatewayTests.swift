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

/// Compaction on the real Ceph RADOS Gateway (TestSupport's CephGateway), a bucket per test.
@Suite struct CompactionGatewayTests {
    private let location = "s3://test/replica"

    private func madeBucket() async throws -> (CephGateway, S3Client) {
        let gateway = try await CephGateway.shared()
        let client = S3Client(gateway.configuration(bucket: try await gateway.makeBucket()))
        _ = try await BucketReplica.create(storage: client, prefix: "replica", name: location)
        return (gateway, client)
    }

    private func compact(_ client: S3Client, grace: Duration) async throws -> CompactionReport {
        var compaction = BucketCompaction(storage: client, prefix: "replica", location: location)
        compaction.grace = grace
        return try await compaction.run()
    }

    /// Compacted with nothing new since: each log's newest segment is all that is left of it.
    private func expectOneSegmentPerLog(_ client: S3Client) async throws {
        let segments = try await client.list(prefix: "replica/log/").compactMap { BucketLayout(prefix: "replica").segmentName($0.key) }
        #expect(Set(segments.map(\.replica)).count == segments.count, "\(segments.map(\.key))")
    }

    private func lease(host: String, expires: Date) -> Data {
        let record = LeaseRecord(
            holder: "\(host) pid 4242", host: host, pid: 4242, token: "0123456789abcdef", expires: Int64(expires.timeIntervalSince1970 * 1e9))
        return try! JSONEncoder().encode(record)
    }

    @Test func compactionRunningWhileStoresSyncLosesNothingAndShrinksTheBlobsAfterTheGrace() async throws {
        let (_, client) = try await madeBucket()
        defer { Task { try? await client.shutdown() } }
        try await withTemporaryDirectory { dir in
            var world = World(stores: try (0..<4).map { try ArchiveStore(directory: dir + "/s\($0)") }, seed: 2301)
            var compactions = 0
            for _ in 0..<4 {
                world.editAll(operations: 3)
                // The stores sync at once while a compaction with a short grace deletes what
                // earlier rounds marked: a sync may read a segment or blob deleted under it.
                try await withThrowingTaskGroup(of: Bool.self) { group in
                    for store in world.stores.shuffled(using: &world.rng) {
                        group.addTask {
                            _ = try await sync(store, with: client, prefix: "replica"); return false
                        }
                    }
                    group.addTask {
                        do {
                            _ = try await compact(client, grace: .milliseconds(200))
                            return true
                        } catch let error as CompactionError {
                            Issue.record("\(error)")
                            return false
                        }
                    }
                    for try await compacted in group where compacted { compactions += 1 }
                }
                for store in world.stores + world.stores { _ = try await sync(store, with: client, prefix: "replica") }
                try world.checkConverged()
            }
            #expect(compactions == 4)
            let before = try await client.list(prefix: "replica/blobs/").count
            _ = try await compact(client, grace: .milliseconds(200))
            try await Task.sleep(for: .milliseconds(300))
            let last = try await compact(client, grace: .milliseconds(200))
            let after = try await client.list(prefix: "replica/blobs/").count
            #expect(after < before, "\(before) blobs before, \(after) after: \(last)")
            try await expectOneSegmentPerLog(client)
            // A store new to the bucket reads the snapshot and converges with the others.
            let fresh = try ArchiveStore(directory: dir + "/fresh")
            let report = try await sync(fresh, with: client, prefix: "replica")
            #expect(report.skipped.isEmpty)
            #expect(try fresh.liveContents() == world.stores[0].liveContents())
        }
    }

    /// A store that synced once, long ago: the segments after its cache's positions are gone
    /// (folded into snapshots, then deleted); it reads the newest snapshot instead.
    @Test func aStoreFarBehindTheSnapshotsConverges() async throws {
        let (_, client) = try await madeBucket()
        defer { Task { try? await client.shutdown() } }
        try await withTemporaryDirectory { dir in
            var world = World(stores: try (0..<2).map { try ArchiveStore(directory: dir + "/s\($0)") }, seed: 77)
            let behind = try ArchiveStore(directory: dir + "/behind")
            world.editAll(operations: 6)
            for store in world.stores + [behind] + world.stores { _ = try await sync(store, with: client, prefix: "replica") }
            #expect(try behind.liveContents() == world.stores[0].liveContents())
            for _ in 0..<3 {
                world.editAll(operations: 4)
                for store in world.stores + world.stores { _ = try await sync(store, with: client, prefix: "replica") }
                _ = try await compact(client, grace: .zero)
            }
            _ = try await compact(client, grace: .zero)
            try await expectOneSegmentPerLog(client)
            _ = try await sync(behind, with: client, prefix: "replica")
            try world.checkConverged()
            #expect(try behind.liveContents() == world.stores[0].liveContents())
        }
    }

    @Test func aStaleLeaseIsTakenOverAfterItsExpiry() async throws {
        let (gateway, client) = try await madeBucket()
        defer { Task { try? await client.shutdown() } }
        try await client.put("replica/lease", lease(host: "elsewhere", expires: Date() - 5))
        let result = try await runArchiveSyncOffPool(
            ["compact", "s3://\(client.configuration.bucket)/replica", "--grace", "0s", "--json"], environment: gatewayEnvironment(gateway.endpoint))
        #expect(result.status == 0, "\(result)")
        #expect(result.output.contains("\"deletedBlobs\""), "\(result)")
        #expect(try await client.get("replica/lease") == nil)
    }

    @Test func aLiveLeaseIsRefusedNamingItsHolderAndExpiry() async throws {
        let (gateway, client) = try await madeBucket()
        defer { Task { try? await client.shutdown() } }
        let expires = Date() + 600
        try await client.put("replica/lease", lease(host: "elsewhere", expires: expires))
        let result = try await runArchiveSyncOffPool(
            ["compact", "s3://\(client.configuration.bucket)/replica"], environment: gatewayEnvironment(gateway.endpoint))
        #expect(result.status == 3, "\(result)")
        #expect(result.errorOutput.contains("is being compacted by elsewhere pid 4242, whose lease runs until"), "\(result)")
        #expect(result.errorOutput.contains(expires.formatted(.iso8601)), "\(result)")
        #expect(try await client.get("replica/lease") != nil)
    }

    /// Two compactions at once, and two takers of one expired lease: one wins each time, the
    /// other is refused naming the winner.
    @Test func twoCompactionsRacingOneWins() async throws {
        let (_, client) = try await madeBucket()
        defer { Task { try? await client.shutdown() } }
        let layout = BucketLayout(prefix: "replica")
        for round in 0..<6 {
            if round % 2 == 1 { try await client.put(layout.lease, lease(host: "elsewhere", expires: Date() - 1)) }
            let won = try await withThrowingTaskGroup(of: BucketLease?.self) { group in
                for _ in 0..<2 {
                    // Ten minutes: on a loaded machine the other taker's requests may come
                    // later than a short lease's expiry, and then take it over rightly.
                    group.addTask {
                        do {
                            return try await BucketLease.take(storage: client, layout: layout, location: location, duration: .seconds(600))
                        } catch is CompactionError { return nil }
                    }
                }
                return try await group.reduce(into: [BucketLease]()) { if let lease = $1 { $0.append(lease) } }
            }
            #expect(won.count == 1, "round \(round): \(won.count) takers won")
            try await won.first?.release()
        }
        // Whole compactions: at least one runs, and a loser is refused by the lease.
        let results = try await withThrowingTaskGroup(of: Result<CompactionReport, any Error>.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    do { return .success(try await compact(client, grace: .zero)) } catch { return .failure(error) }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.contains { (try? $0.get()) != nil })
        for case .failure(let error) in results { #expect(error is CompactionError, "\(error)") }
    }

    @Test func aCompactKilledAtRandomMomentsAndRunAgainLeavesAReadableBucket() async throws {
        let (gateway, client) = try await madeBucket()
        defer { Task { try? await client.shutdown() } }
        try await withTemporaryDirectory { dir in
            let a = try ArchiveStore(directory: dir + "/a")
            let url = "s3://\(client.configuration.bucket)/replica"
            let environment = gatewayEnvironment(gateway.endpoint)
            var rng = SeededGenerator(seed: 2323)
            var killed = 0
            for round in 0..<5 {
                try await offPool {
                    for n in 0..<40 { _ = try a.put(Data("{\"v\":\"\(round) \(n)\"}".utf8), as: try ObjectID(collection: "Person", key: "p\(n)")) }
                }
                _ = try await sync(a, with: client, prefix: "replica")
                let delay = UInt32(Int.random(in: 10...250, using: &rng))
                let status = try await offPool {
                    let command = try RunningCommand(environment + [archiveSyncProgram, "compact", url, "--grace", "0s"], executable: "/usr/bin/env")
                    usleep(delay * 1_000)
                    command.send(SIGKILL)
                    return command.wait().status
                }
                if status == 128 + SIGKILL { killed += 1 }
            }
            #expect(killed >= 2, "only \(killed) of 5 runs were killed before they finished")
            // The killed holder's lease names a process of this host that is gone: taken over at once.
            let last = try await runArchiveSyncOffPool(["compact", url, "--grace", "0s"], environment: environment)
            #expect(last.status == 0, "\(last)")
            #expect(last.output.contains("; deleted ") && last.output.contains("; marked "), "\(last)")
            let b = try ArchiveStore(directory: dir + "/b")
            _ = try await sync(b, with: client, prefix: "replica")
            #expect(try b.liveContents() == a.liveContents())
            #expect(try b.liveContents().count == 40)
            _ = try a.put(Data("{\"v\":\"later\"}".utf8), as: try ObjectID(collection: "Person", key: "p0"))
            for store in [a, b] { _ = try await sync(store, with: client, prefix: "replica") }
            #expect(try b.liveContents() == a.liveContents())
        }
    }
}
