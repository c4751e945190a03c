import ArchiveBucket
import ArchiveLocking
import ArchiveS3
import ArchiveStore
import ArchiveSync
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Live sessions with a bucket (`watch STORE --sync-with s3://...`, `BucketReplicas.liveSession`)
/// on a real Ceph RADOS Gateway on 127.0.0.1.
@Suite struct BucketLiveTests {
    private func person(_ key: String) -> ObjectID { try! ObjectID(collection: "Person", key: key) }

    /// Checks `condition` every 50 ms until it holds or `timeout` passes: whether it held. The
    /// patience is for a loaded machine (a full suite on 2 cores saw 27 s copies), not a speed claim.
    private func eventually(within timeout: Duration = .seconds(90), _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = ContinuousClock.now + timeout
        while true {
            if try condition() { return true }
            if ContinuousClock.now >= deadline { return false }
            usleep(50_000)
        }
    }

    @Test func twoWatchedStoresCrossEditsThroughABucketAndIdlePollsCostOneRequestEach() async throws {
        let gateway = try await CephGateway.shared()
        let proxy = try await FaultyS3Proxy.start(upstream: gateway.endpoint)
        defer { Task { try? await proxy.stop() } }
        let bucket = try await gateway.makeBucket()
        let client = S3Client(gateway.configuration(bucket: bucket))
        _ = try await BucketReplica.create(storage: client, prefix: "replica", name: "s3://\(bucket)/replica")
        try await client.shutdown()
        try await withTemporaryDirectory { dir in
            try await offPool {
                let (a, b) = (try ArchiveStore(directory: dir + "/a"), try ArchiveStore(directory: dir + "/b"))
                let url = "s3://\(bucket)/replica"
                let environment = gatewayEnvironment(proxy.endpoint)
                let poll = 0.25
                let watchers = try [a, b].map { store in
                    try RunningCommand(
                        environment + [archiveSyncProgram, "watch", store.path, "--sync-with", url, "--poll", "\(poll)"], executable: "/usr/bin/env")
                }
                defer {
                    for watcher in watchers { watcher.send(SIGTERM) }
                    for watcher in watchers { _ = watcher.wait() }
                }
                // Others beside x, so that its delete is no more than half of the objects (the safety valve).
                for n in 0..<3 { _ = try a.put(Data("{\"v\":\"\(n)\"}".utf8), as: person("o\(n)")) }
                _ = try a.put(Data("{\"v\":\"from a\"}".utf8), as: person("x"))
                // A read while a session writes the same object may find its row before its file: read again.
                let crossedToB = eventually { (try? b.liveContents())?[person("x")] != nil }
                #expect(crossedToB, "\(watchers.map { $0.outputSoFar + $0.errorOutputSoFar })")
                _ = try b.put(Data("{\"v\":\"from b\"}".utf8), as: person("y"))
                try b.remove(person("x"))
                let crossedToA = eventually {
                    guard let live = try? a.liveContents() else { return false }
                    return live[person("y")] != nil && live[person("x")] == nil
                }
                #expect(crossedToA, "\(watchers.map { $0.outputSoFar + $0.errorOutputSoFar })")
                #expect(eventually { (try? a.liveContents()) == (try? b.liveContents()) })

                let status = try RunningCommand([archiveSyncProgram, "status", a.path], executable: "/usr/bin/env").finish(within: .seconds(60))
                #expect(status.output.contains("\(url)/: connected"), "\(status)")

                // Quiet: each poll of each session is one listing (two would make this twice as many).
                sleep(2)
                let before = proxy.counts.requests
                let window = 3.0
                usleep(UInt32(window * 1_000_000))
                let idle = proxy.counts.requests - before
                let pollsAtMost = 2 * (Int(window / poll) + 2)
                #expect(idle <= pollsAtMost, "\(idle) requests in \(window) s of quiet, for at most \(pollsAtMost) polls")
                // That they poll at all is not timed: a loaded machine may stall a gateway for seconds.
                let polled = eventually { proxy.counts.requests - before >= 4 }
                #expect(polled, "\(proxy.counts.requests - before) requests since the quiet began: the sessions do not poll")
            }
        }
    }

    @Test func aGatewayStoppedAndRestartedMidSessionConvergesWithNothingLost() async throws {
        // A cluster of its own: stopping the shared gateway would fail the tests running beside.
        let gateway = try await offPool { try CephGateway.start() }
        defer { gateway.stop() }
        let configuration = gateway.configuration(bucket: try await gateway.makeBucket())
        let location = try S3Location(parsing: "s3://\(configuration.bucket)/replica")
        let client = S3Client(configuration)
        defer { Task { try? await client.shutdown() } }
        _ = try await BucketReplica.create(storage: client, prefix: "replica", name: location.description)
        try await withTemporaryDirectory { dir in
            let (a, b) = (try ArchiveStore(directory: dir + "/a"), try ArchiveStore(directory: dir + "/b"))
            var options = LiveOptions(debounce: .milliseconds(20), reconnectDelay: .milliseconds(200), maximumReconnectDelay: .seconds(1))
            options.poll = .milliseconds(200)
            let session = BucketReplicas.liveSession(a, with: location, configuration: configuration, options: options)
            let events = TracedMutex<[String]>([])
            let running = Task.detached {
                for await event in session.events() { events.withLock { $0.append("\(event)") } }
            }
            defer { session.stop() }
            try await offPool {
                _ = try a.put(Data("{\"v\":\"before\"}".utf8), as: self.person("before"))
                #expect(self.eventually { events.withLock { $0.contains { $0.contains("cycle") } } })
                gateway.stopGateway()
                // Written while the bucket is away: kept here, pushed once it is back.
                for n in 0..<5 { _ = try a.put(Data("{\"v\":\"during \(n)\"}".utf8), as: self.person("during\(n)")) }
                #expect(self.eventually { events.withLock { $0.contains { $0.contains("disconnected") } } }, "\(events.withLock { $0 })")
                try gateway.startGateway()
            }
            // Another store's push, once the gateway is back, reaches A.
            _ = try await sync(b, with: client, prefix: "replica")
            _ = try b.put(Data("{\"v\":\"from b\"}".utf8), as: person("b"))
            try await offPool {
                let converged = try self.eventually {
                    _ = try blockingSync(b, client: client)
                    return try a.liveContents() == b.liveContents() && a.liveContents().count == 7
                }
                #expect(converged, "\(events.withLock { $0 })")
            }
            session.stop()
            _ = await running.value
        }
    }
}

/// A one-shot sync of `store` with the replica at `replica` of `client`'s bucket, on this thread.
private func blockingSync(_ store: ArchiveStore, client: S3Client) throws -> SyncReport {
    let replica = try BucketReplica(
        storage: client, prefix: "replica", name: "s3://test/replica", cacheDirectory: store.path + "/.archive-sync", cacheKey: "test/replica",
        pusher: store.replica)
    return try Sync(a: LocalReplica(store), b: replica, options: SyncOptions()).runNow()
}
