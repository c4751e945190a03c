import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1

/// One S3 request before it is signed: what ``S3Client/send(_:accepting:)`` tries, retries
/// and checks.
struct S3Request: Sendable {
    var method: HTTPMethod
    /// The full object key, or nil for a request on the bucket (a listing).
    var key: String?
    var query: [(String, String)] = []
    /// Headers sent unsigned (`If-None-Match`, `If-Match`: SignatureV4.swift's caller says why).
    var headers: [(String, String)] = []
    var body = Data()

    /// What the request is about, for error sentences: `PUT s3://bucket/key`.
    func subject(bucket: String) -> String { "\(method.rawValue) s3://\(bucket)/\(key ?? "")" }
}

/// An answer whose body was read in full and checked against its Content-Length.
struct S3Response: Sendable {
    var status: Int
    var headers: HTTPHeaders
    var body: Data
    /// The try that got this answer, from 1: a later one follows tries whose fate is unknown.
    var attempt = 1

    /// The ETag without its quotes: the form Ceph's gateway takes back in `If-Match`.
    var etag: String? { headers.first(name: "etag").map(S3Response.unquoted) }

    static func unquoted(_ etag: String) -> String {
        etag.count >= 2 && etag.hasPrefix("\"") && etag.hasSuffix("\"") ? String(etag.dropFirst().dropLast()) : etag
    }
}

extension S3Client {
    /// Sends `request`, retried per ``S3Configuration/retry`` on 5xx, 429, `SlowDown`,
    /// `RequestTimeout` and connection errors; returns a 2xx answer or one whose status is in
    /// `accepting`, and throws the ``S3Error`` of any other.
    func send(_ request: S3Request, accepting: Set<Int> = []) async throws -> S3Response {
        var attempt = 1
        while true {
            try Task.checkCancellation()
            let outcome: Result<S3Response, any Error>
            do {
                outcome = .success(try await sendOnce(request))
            } catch {
                outcome = .failure(error)
            }
            switch outcome {
            case .success(var response) where (200..<300).contains(response.status) || accepting.contains(response.status):
                response.attempt = attempt
                return response
            case .success(let response):
                let error = S3ErrorAnswer(response)
                if error.isRetryable && attempt < configuration.retry.maxAttempts { break }
                throw error.s3Error(for: request, configuration: configuration)
            case .failure(let error as ShortAnswer):
                // An answer that broke off is retried like a lost connection.
                if attempt < configuration.retry.maxAttempts { break }
                throw S3Error.invalidResponse(error.sentence)
            case .failure(let error as S3Error):
                throw error
            case .failure(let error):
                if error is CancellationError { throw error }
                if attempt < configuration.retry.maxAttempts { break }
                throw S3Error.transport(
                    "\(request.subject(bucket: configuration.bucket)) got no answer from \(configuration.endpoint.absoluteString) in \(attempt) tries",
                    cause: error)
            }
            try await Task.sleep(for: configuration.retry.delay(after: attempt))
            attempt += 1
        }
    }

    /// One try: signs the request at this moment, sends it, reads the whole body.
    private func sendOnce(_ request: S3Request) async throws -> S3Response {
        let (host, path) = address(of: request.key)
        let payloadHash = SignatureV4.payloadHash(request.body)
        var signed: [(String, String)] = [("host", host)]
        if !request.body.isEmpty || request.method == .PUT || request.method == .POST {
            signed.append(("content-md5", Data(Insecure.MD5.hash(data: request.body)).base64EncodedString()))
        }
        signed += signer.signingHeaders(
            method: request.method.rawValue, path: path, query: request.query, headers: signed, payloadHash: payloadHash, date: Date())
        let query = SignatureV4.canonicalQuery(request.query)
        var http = HTTPClientRequest(url: "\(configuration.endpoint.scheme ?? "https")://\(host)\(path)\(query.isEmpty ? "" : "?" + query)")
        http.method = request.method
        for (name, value) in signed + request.headers { http.headers.add(name: name, value: value) }
        if !request.body.isEmpty { http.body = .bytes(ByteBuffer(bytes: request.body)) }

        let response = try await httpClient.execute(http, timeout: configuration.requestTimeout.timeAmount)
        let subject = request.subject(bucket: configuration.bucket)
        let length = response.headers.first(name: "content-length").flatMap(Int.init)
        let tooLarge = S3Error.invalidResponse(
            "the answer to \(subject) is larger than the client's maxObjectSize, \(configuration.maxObjectSize) bytes")
        if request.method != .HEAD, let length, length > configuration.maxObjectSize { throw tooLarge }
        let body: ByteBuffer
        do {
            body = try await response.body.collect(upTo: configuration.maxObjectSize)
        } catch is NIOTooManyBytesError {
            throw tooLarge
        }
        // A HEAD answer has the object's length and no body.
        if request.method != .HEAD, let length, length != body.readableBytes {
            throw ShortAnswer(sentence: "the answer to \(subject) had \(body.readableBytes) bytes where its Content-Length said \(length)")
        }
        return S3Response(status: Int(response.status.code), headers: response.headers, body: Data(body.readableBytesView))
    }

    /// The Host header and the encoded path of a request on `key` (nil: the bucket).
    func address(of key: String?) -> (host: String, path: String) {
        let endpoint = configuration.endpoint
        let port = endpoint.port.map { ":\($0)" } ?? ""
        let encodedKey = key.map { SignatureV4.uriEncode($0, keepSlash: true) } ?? ""
        switch configuration.addressing {
        case .pathStyle:
            return ("\(endpoint.host ?? "")\(port)", "/\(configuration.bucket)\(key == nil ? "" : "/" + encodedKey)")
        case .virtualHosted:
            return ("\(configuration.bucket).\(endpoint.host ?? "")\(port)", "/\(encodedKey)")
        }
    }
}

/// An answer whose body is shorter than its Content-Length: retried, then an
/// ``S3Error/invalidResponse(_:)``.
private struct ShortAnswer: Error {
    var sentence: String
}

/// A non-2xx answer, read: its status and S3's `<Error>` code and message when it has them.
struct S3ErrorAnswer {
    var status: Int
    var code: String?
    var message: String?

    init(_ response: S3Response) {
        status = response.status
        let error = response.body.isEmpty ? nil : try? S3XMLElement.parse(response.body)
        code = error?.text(of: "Code")
        message = error?.text(of: "Message")
    }

    var isRetryable: Bool {
        status >= 500 || status == 429 || ["SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable"].contains(code ?? "")
    }

    /// The error a caller sees, in a sentence that names the request and what to check.
    func s3Error(for request: S3Request, configuration: S3Configuration) -> S3Error {
        let subject = request.subject(bucket: configuration.bucket)
        let server = configuration.endpoint.absoluteString
        let detail = [code, message].compactMap { $0 }.joined(separator: ": ")
        switch (status, code) {
        case (412, _):
            return .preconditionFailed(key: request.key ?? "")
        case (404, "NoSuchKey") where request.headers.contains(where: { $0.0.lowercased() == "if-match" }):
            // AWS answers 404 to If-Match on a missing key where Ceph answers 412: one error for both.
            return .preconditionFailed(key: request.key ?? "")
        case (_, "NoSuchBucket"):
            return .noSuchBucket(
                "the bucket \(configuration.bucket) does not exist at \(server): create it, or check the s3:// URL and AWS_ENDPOINT_URL")
        case (403, _), (_, "AccessDenied"), (_, "SignatureDoesNotMatch"), (_, "InvalidAccessKeyId"):
            return .accessDenied(
                "the S3 server at \(server) refused \(subject) (\(detail.isEmpty ? "403 Forbidden" : detail)): check the access key and secret (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY or the profile) and the bucket's permissions"
            )
        default:
            return .http(status: status, code: code, message: "\(subject) failed\(detail.isEmpty ? "" : " (\(detail))")")
        }
    }
}

extension Duration {
    /// The same span as NIO's `TimeAmount`.
    var timeAmount: TimeAmount {
        .nanoseconds(components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000)
    }
}
