import Foundation
import NIOHTTP1
import Testing

@testable import ArchiveS3

/// How requests are addressed and how answers become errors, without a server.
@Suite struct RequestTests {
    private func configuration(addressing: S3Addressing?, endpoint: URL? = nil) -> S3Configuration {
        S3Configuration(
            endpoint: endpoint, region: "eu-west-1", credentials: S3Credentials(accessKeyID: "AK", secretAccessKey: "SK"), bucket: "backups",
            addressing: addressing)
    }

    @Test func test_addressesPathStyleAndVirtualHosted() throws {
        let local = S3Client(configuration(addressing: nil, endpoint: URL(string: "http://127.0.0.1:7480")))
        defer { try? local.httpClient.syncShutdown() }
        #expect(local.address(of: "log/a b") == ("127.0.0.1:7480", "/backups/log/a%20b"))
        #expect(local.address(of: nil) == ("127.0.0.1:7480", "/backups"))
        let aws = S3Client(configuration(addressing: nil))
        defer { try? aws.httpClient.syncShutdown() }
        #expect(aws.configuration.addressing == .virtualHosted)
        #expect(aws.address(of: "log/a") == ("backups.s3.eu-west-1.amazonaws.com", "/log/a"))
    }

    private func error(status: Int, body: String, headers request: [(String, String)] = []) -> S3Error {
        let response = S3Response(status: status, headers: HTTPHeaders(), body: Data(body.utf8))
        return S3ErrorAnswer(response).s3Error(
            for: S3Request(method: .PUT, key: "lease", headers: request), configuration: configuration(addressing: nil))
    }

    /// Ceph answers 412 to If-Match on a missing key, AWS 404 NoSuchKey: one error for both.
    @Test func test_ifMatchOnMissingKeyIsPreconditionFailedFromEitherServer() {
        let noSuchKey = "<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message></Error>"
        guard case .preconditionFailed(key: "lease") = error(status: 404, body: noSuchKey, headers: [("if-match", "abc")]) else {
            Issue.record("AWS's 404 to If-Match is not preconditionFailed")
            return
        }
        guard case .preconditionFailed(key: "lease") = error(status: 412, body: "") else {
            Issue.record("Ceph's 412 is not preconditionFailed")
            return
        }
        guard case .http(status: 404, code: "NoSuchKey", _) = error(status: 404, body: noSuchKey) else {
            Issue.record("a 404 without If-Match became something else")
            return
        }
    }

    @Test func test_retriesOnlyWhatMaySucceedLater() {
        let answer = { (status: Int, code: String?) in
            S3ErrorAnswer(
                S3Response(status: status, headers: HTTPHeaders(), body: Data((code.map { "<Error><Code>\($0)</Code></Error>" } ?? "").utf8)))
        }
        #expect(answer(503, "SlowDown").isRetryable)
        #expect(answer(500, nil).isRetryable)
        #expect(answer(429, nil).isRetryable)
        #expect(answer(400, "RequestTimeout").isRetryable)
        #expect(!answer(403, "AccessDenied").isRetryable)
        #expect(!answer(412, nil).isRetryable)
        #expect(!answer(404, "NoSuchBucket").isRetryable)
    }

    @Test func test_backoffIsCappedAndJittered() {
        let policy = S3RetryPolicy(maxAttempts: 10, baseDelay: .milliseconds(100), maxDelay: .seconds(1))
        let delays = (1...10).map { policy.delay(after: $0) }
        #expect(delays.allSatisfy { $0 >= .zero && $0 <= .seconds(1) })
        #expect((0..<50).map { _ in policy.delay(after: 1) }.allSatisfy { $0 <= .milliseconds(100) })
        #expect(Set((0..<20).map { _ in policy.delay(after: 8) }).count > 1)
    }
}
