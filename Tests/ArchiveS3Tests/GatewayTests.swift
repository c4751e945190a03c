import ArchiveS3
import Foundation
import TestSupport
import Testing

/// The client against a real Ceph RADOS Gateway on 127.0.0.1 (TestSupport's CephGateway).
@Suite struct GatewayTests {
    @Test func test_putGetListDeleteRoundTrip() async throws {
        try await withBucket { client, _ in
            let data = Data("hello, bucket".utf8)
            let etag = try await client.put("p/a b+é", data)
            #expect(!etag.hasPrefix("\""))
            let object = try #require(try await client.get("p/a b+é"))
            #expect(object.data == data)
            #expect(object.etag == etag)
            try await client.put("p/empty", Data())
            #expect(try await client.get("p/empty")?.data == Data())
            try await client.put("q/other", data)
            #expect(try await client.list(prefix: "p/").map(\.key) == ["p/a b+é", "p/empty"])
            #expect(try await client.list(prefix: "p/").first?.size == data.count)
            try await client.delete("p/a b+é")
            #expect(try await client.get("p/a b+é") == nil)
            try await client.delete("p/never-there")
            #expect(try await client.list(prefix: "p/").map(\.key) == ["p/empty"])
        }
    }

    @Test func test_listingFollowsContinuationAcrossPages() async throws {
        try await withBucket { client, _ in
            let keys = (0..<7).map { "log/r1/\(String(format: "%04d", $0))" }
            for key in keys { try await client.put(key, Data(key.utf8)) }
            #expect(try await client.list(prefix: "log/", limit: 3).map(\.key) == keys)
            #expect(try await client.list(prefix: "log/", startAfter: keys[2], limit: 2).map(\.key) == Array(keys[3...]))
        }
    }

    @Test func test_ifNoneMatchRacingWritersExactlyOneWins() async throws {
        try await withBucket { client, _ in
            let outcomes = try await withThrowingTaskGroup(of: Bool.self) { group in
                for writer in 0..<8 {
                    group.addTask {
                        do {
                            try await client.put("log/r1/0001", Data("writer \(writer)".utf8), condition: .ifNoneMatch)
                            return true
                        } catch S3Error.preconditionFailed {
                            return false
                        }
                    }
                }
                return try await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(outcomes.filter { $0 }.count == 1)
            #expect(try await client.get("log/r1/0001")?.data.starts(with: Data("writer ".utf8)) == true)
        }
    }

    @Test func test_ifMatchWithStaleETagFailsAndCurrentOneWins() async throws {
        try await withBucket { client, _ in
            let first = try await client.put("lease", Data("holder a".utf8), condition: .ifNoneMatch)
            let second = try await client.put("lease", Data("holder a, renewed".utf8), condition: .ifMatch(etag: "\"\(first)\""))
            await #expect(throws: S3Error.self) { try await client.put("lease", Data("holder b".utf8), condition: .ifMatch(etag: first)) }
            do {
                try await client.put("missing", Data("x".utf8), condition: .ifMatch(etag: second))
                Issue.record("If-Match on a missing key succeeded")
            } catch S3Error.preconditionFailed(let key) {
                #expect(key == "missing")
            }
            #expect(try await client.get("lease")?.data == Data("holder a, renewed".utf8))
        }
    }

    @Test func test_wrongSecretIsAccessDeniedSentence() async throws {
        let gateway = try await CephGateway.shared()
        var configuration = gateway.configuration(bucket: try await gateway.makeBucket())
        configuration.credentials.secretAccessKey = "not-the-secret"
        try await withClient(configuration) { client in
            do {
                _ = try await client.get("anything")
                Issue.record("a wrong secret was accepted")
            } catch let error as S3Error {
                guard case .accessDenied = error else { throw error }
                #expect(error.description.contains("SignatureDoesNotMatch"))
                #expect(error.description.contains("check the access key and secret"))
                #expect(error.exitStatus == 2)
            }
        }
    }

    @Test func test_missingBucketIsNoSuchBucketSentence() async throws {
        let gateway = try await CephGateway.shared()
        try await withClient(gateway.configuration(bucket: "no-such-bucket-here")) { client in
            do {
                try await client.put("a", Data("x".utf8))
                Issue.record("a put into a missing bucket succeeded")
            } catch let error as S3Error {
                guard case .noSuchBucket = error else { throw error }
                #expect(
                    error.description
                        == "the bucket no-such-bucket-here does not exist at \(gateway.endpoint.absoluteString): create it, or check the s3:// URL and AWS_ENDPOINT_URL"
                )
            }
            await #expect(throws: S3Error.self) { _ = try await client.get("a") }
            await #expect(throws: S3Error.self) { _ = try await client.list(prefix: "") }
        }
    }

    @Test func test_multipartUploadAboveThreshold() async throws {
        try await withBucket({
            $0.multipartThreshold = 5 << 20; $0.partSize = 5 << 20
        }) { client, _ in
            var generator = SeededGenerator(seed: 23)
            var data = Data(count: 11 << 20)
            data.withUnsafeMutableBytes { bytes in
                for offset in stride(from: 0, to: bytes.count, by: 8) {
                    bytes.storeBytes(of: generator.next(), toByteOffset: offset, as: UInt64.self)
                }
            }
            let etag = try await client.put("blobs/large", data)
            // A multipart ETag is the MD5 of the parts' MD5s and their count.
            #expect(etag.hasSuffix("-3"))
            let object = try #require(try await client.get("blobs/large"))
            #expect(object.data == data)
            #expect(try await client.list(prefix: "blobs/").first?.size == data.count)
        }
    }

    @Test func test_probeAcceptsGatewayThatEnforcesConditionalWrites() async throws {
        try await withBucket { client, _ in
            try await client.probeConditionalWrites(prefix: "replica/")
            #expect(try await client.list(prefix: "replica/").isEmpty)
        }
    }
}
