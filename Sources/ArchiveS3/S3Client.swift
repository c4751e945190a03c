import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1

/// What a conditional write asks of the server.
public enum S3WriteCondition: Sendable, Equatable {
    /// Write whatever is there.
    case none
    /// Write only if no object has the key (`If-None-Match: *`).
    case ifNoneMatch
    /// Write only if the object's ETag is still `etag` (`If-Match`); quoted or not.
    case ifMatch(etag: String)
}

/// An object read in full.
public struct S3Object: Sendable {
    public var key: String
    public var data: Data
    /// The ETag, without quotes.
    public var etag: String

    public init(key: String, data: Data, etag: String) {
        self.key = key
        self.data = data
        self.etag = etag
    }
}

/// One entry of a listing.
public struct S3ListedObject: Sendable, Hashable {
    public var key: String
    public var size: Int
    /// The ETag, without quotes.
    public var etag: String

    public init(key: String, size: Int, etag: String) {
        self.key = key
        self.size = size
        self.etag = etag
    }
}

/// A client of one bucket of an S3-compatible server (AWS S3, Ceph's RADOS Gateway, MinIO,
/// Garage, R2...): Signature V4, retries with backoff, every answer checked.
///
/// Keys are full object keys: the caller adds its ``S3Location/prefix``.
///
/// ```swift
/// var configuration = try S3Configuration.fromEnvironment()
/// configuration.bucket = "backups"
/// let client = S3Client(configuration)
/// let etag = try await client.put("notes/log/0001", data, condition: .ifNoneMatch)
/// let object = try await client.get("notes/log/0001")
/// try await client.shutdown()
/// ```
///
/// Call ``shutdown()`` once done: it closes the connections.
public final class S3Client: Sendable {
    public let configuration: S3Configuration
    let httpClient: HTTPClient
    let signer: SignatureV4

    public init(_ configuration: S3Configuration) {
        self.configuration = configuration
        signer = SignatureV4(credentials: configuration.credentials, region: configuration.region)
        var http = HTTPClient.Configuration(
            redirectConfiguration: .disallow, timeout: .init(connect: configuration.connectTimeout.timeAmount), decompression: .disabled)
        http.httpVersion = .http1Only
        httpClient = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: http)
    }

    /// Writes `data` at `key` if `condition` holds and returns the new ETag (without quotes).
    ///
    /// Objects over ``S3Configuration/multipartThreshold`` go up in parts; the condition is then
    /// sent on `CompleteMultipartUpload`, which AWS enforces but Ceph's gateway ignores: use a
    /// conditional multipart write only where any writer's bytes are right (content-addressed
    /// blobs, whose key is the hash of their bytes).
    ///
    /// An `.ifNoneMatch` write refused on a retry (after a try whose answer was lost) reads the
    /// key back: its own bytes there are the first try having landed, and it returns their
    /// ETag. A refusal of the first try is one: no read-back, so a refused write costs one
    /// request. Throws ``S3Error/preconditionFailed(key:)`` when the condition does not hold.
    @discardableResult
    public func put(_ key: String, _ data: Data, condition: S3WriteCondition = .none) async throws -> String {
        if data.count > configuration.multipartThreshold {
            return try await putInParts(key, data, condition: condition)
        }
        let request = S3Request(method: .PUT, key: key, headers: Self.headers(for: condition), body: data)
        guard condition == .ifNoneMatch else { return try Self.etag(of: try await send(request), for: request, bucket: configuration.bucket) }
        let response = try await send(request, accepting: [412])
        guard response.status == 412 else { return try Self.etag(of: response, for: request, bucket: configuration.bucket) }
        if response.attempt > 1, let existing = try await get(key), existing.data == data { return existing.etag }
        throw S3Error.preconditionFailed(key: key)
    }

    /// The object at `key`, or nil when there is none.
    public func get(_ key: String) async throws -> S3Object? {
        let request = S3Request(method: .GET, key: key)
        let response = try await send(request, accepting: [404])
        if response.status == 404 {
            if S3ErrorAnswer(response).code == "NoSuchBucket" {
                throw S3ErrorAnswer(response).s3Error(for: request, configuration: configuration)
            }
            return nil
        }
        return S3Object(key: key, data: response.body, etag: try Self.etag(of: response, for: request, bucket: configuration.bucket))
    }

    /// Deletes the object at `key`; a missing key is no error (S3 answers 204 either way).
    public func delete(_ key: String) async throws {
        _ = try await send(S3Request(method: .DELETE, key: key))
    }

    /// Checks that the server enforces conditional writes: writes a probe object under
    /// `prefix` twice with `If-None-Match: *` and once with a stale `If-Match`, expects the
    /// last two refused, and deletes the probe.
    ///
    /// Throws ``S3Error/conditionalWritesIgnored(_:)`` when the server took a write it should
    /// have refused: two writers could then overwrite each other's segments and leases.
    public func probeConditionalWrites(prefix: String) async throws {
        let key = "\(prefix)probe/\(UUID().uuidString)"
        do {
            let etag = try await put(key, Data("probe 1".utf8), condition: .ifNoneMatch)
            try await expectRefused(key, Data("probe 2".utf8), condition: .ifNoneMatch, header: "If-None-Match: *")
            // Wholly unlike the real ETag: Ceph's gateway took one with a character added at the end.
            let stale = etag.hasPrefix("0") ? String(repeating: "f", count: 32) : String(repeating: "0", count: 32)
            try await expectRefused(key, Data("probe 3".utf8), condition: .ifMatch(etag: stale), header: "a stale If-Match")
        } catch {
            try? await delete(key)
            throw error
        }
        try await delete(key)
    }

    private func expectRefused(_ key: String, _ data: Data, condition: S3WriteCondition, header: String) async throws {
        do {
            try await put(key, data, condition: condition)
        } catch S3Error.preconditionFailed {
            return
        }
        throw S3Error.conditionalWritesIgnored(
            "the S3 server at \(configuration.endpoint.absoluteString) overwrote \(key) despite \(header): it ignores conditional writes, so two hosts could overwrite each other's data; use a server that enforces them (AWS S3, Ceph's RADOS Gateway, MinIO)"
        )
    }

    /// Creates the bucket (in the configured region); one that exists already and is the
    /// caller's is no error.
    public func createBucket() async throws {
        let constraint =
            configuration.region == "us-east-1"
            ? Data()
            : Data(
                "<CreateBucketConfiguration><LocationConstraint>\(configuration.region.xmlEscaped)</LocationConstraint></CreateBucketConfiguration>"
                    .utf8)
        let request = S3Request(method: .PUT, key: nil, body: constraint)
        let response = try await send(request, accepting: [409])
        if response.status == 409, S3ErrorAnswer(response).code != "BucketAlreadyOwnedByYou" {
            throw S3ErrorAnswer(response).s3Error(for: request, configuration: configuration)
        }
    }

    /// Closes the connections; the client is not used after.
    public func shutdown() async throws {
        try await httpClient.shutdown()
    }

    static func headers(for condition: S3WriteCondition) -> [(String, String)] {
        switch condition {
        case .none: return []
        case .ifNoneMatch: return [("if-none-match", "*")]
        // Ceph's gateway matches only the bare ETag (a quoted one always gets 412); AWS takes both.
        case .ifMatch(let etag): return [("if-match", S3Response.unquoted(etag))]
        }
    }

    static func etag(of response: S3Response, for request: S3Request, bucket: String) throws -> String {
        guard let etag = response.etag, !etag.isEmpty else {
            throw S3Error.invalidResponse("the answer to \(request.subject(bucket: bucket)) had no ETag")
        }
        return etag
    }
}
