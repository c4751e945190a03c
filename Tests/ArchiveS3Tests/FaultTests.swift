import ArchiveS3
import Foundation
import TestSupport
import Testing

/// The client against a misbehaving server: 503s (TestSupport's FaultyS3Proxy), a server that
/// ignores conditional writes (the same proxy dropping the headers), a gateway stopped and started.
@Suite struct FaultTests {
    @Test func test_503IsAnsweredByRetry() async throws {
        try await withProxiedBucket { client, proxy in
            proxy.failNext(2)
            try await client.put("a", Data("after two 503s".utf8))
            #expect(proxy.counts.requests == 3)
            #expect(proxy.counts.failed == 2)
            proxy.failNext(2)
            #expect(try await client.get("a")?.data == Data("after two 503s".utf8))
            // Past the retries, the last answer is the error.
            proxy.failNext(client.configuration.retry.maxAttempts)
            do {
                _ = try await client.list(prefix: "")
                Issue.record("a listing succeeded through \(client.configuration.retry.maxAttempts) 503s")
            } catch S3Error.http(let status, let code, _) {
                #expect(status == 503)
                #expect(code == "SlowDown")
            }
        }
    }

    @Test func test_conditionalPutWhoseAnswerWasLostSucceedsOnRetry() async throws {
        try await withProxiedBucket { client, proxy in
            // The first try lands and its answer is lost; the retry meets 412 on its own bytes.
            proxy.loseNextAnswers(1)
            let etag = try await client.put("log/r1/0001", Data("segment".utf8), condition: .ifNoneMatch)
            #expect(try await client.get("log/r1/0001")?.etag == etag)
            // Other bytes at the key are still a lost race.
            await #expect(throws: S3Error.self) {
                try await client.put("log/r1/0001", Data("another segment".utf8), condition: .ifNoneMatch)
            }
        }
    }

    @Test func test_conditionalPutRefusedAtItsFirstTryIsOneRequest() async throws {
        try await withProxiedBucket { client, proxy in
            try await client.put("marker", Data("marker".utf8), condition: .ifNoneMatch)
            let before = proxy.counts.requests
            // A refusal of the first try is one (no earlier try can have landed): no read-back,
            // even of the same bytes.
            await #expect(throws: S3Error.self) { try await client.put("marker", Data("marker".utf8), condition: .ifNoneMatch) }
            #expect(proxy.counts.requests - before == 1)
        }
    }

    @Test func test_probeRefusesServerThatIgnoresConditionalWrites() async throws {
        try await withProxiedBucket { client, proxy in
            proxy.stripConditionalHeaders = true
            do {
                try await client.probeConditionalWrites(prefix: "replica/")
                Issue.record("the probe accepted a server that drops If-None-Match")
            } catch let error as S3Error {
                guard case .conditionalWritesIgnored = error else { throw error }
                #expect(error.description.contains("it ignores conditional writes"))
                #expect(error.exitStatus == 2)
            }
            // The probe leaves nothing behind.
            #expect(try await client.list(prefix: "replica/").isEmpty)
        }
    }

    @Test func test_gatewayStoppedAndRestartedMidSequence() async throws {
        // A cluster of its own: stopping the shared gateway would fail the tests running beside.
        let gateway = try await offPool { try CephGateway.start() }
        defer { gateway.stop() }
        let bucket = try await gateway.makeBucket()
        var configuration = gateway.configuration(bucket: bucket)
        configuration.retry = S3RetryPolicy(maxAttempts: 40, baseDelay: .milliseconds(100), maxDelay: .milliseconds(500))
        try await withClient(configuration) { client in
            try await client.put("log/0001", Data("one".utf8))
            gateway.stopGateway()
            // With the gateway down and few retries: a clear error that names the request.
            var impatient = configuration
            impatient.retry = S3RetryPolicy(maxAttempts: 2, baseDelay: .milliseconds(10), maxDelay: .milliseconds(10))
            try await withClient(impatient) { impatientClient in
                do {
                    _ = try await impatientClient.get("log/0001")
                    Issue.record("a get succeeded with the gateway stopped")
                } catch let error as S3Error {
                    guard case .transport = error else { throw error }
                    #expect(
                        error.description.hasPrefix("GET s3://\(bucket)/log/0001 got no answer from \(gateway.endpoint.absoluteString) in 2 tries"))
                }
            }
            // A put that starts while it is down and lands once it is back.
            async let put = client.put("log/0002", Data("two".utf8), condition: .ifNoneMatch)
            try await Task.sleep(for: .milliseconds(500))
            try await offPool { try gateway.startGateway() }
            _ = try await put
            #expect(try await client.list(prefix: "log/").map(\.key) == ["log/0001", "log/0002"])
        }
    }
}
