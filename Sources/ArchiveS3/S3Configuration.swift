import Foundation
import NIOCore

/// The keys that sign requests.
public struct S3Credentials: Sendable, Hashable {
    public var accessKeyID: String
    public var secretAccessKey: String
    /// A temporary credential's token, sent as `x-amz-security-token`.
    public var sessionToken: String?

    public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
        self.accessKeyID = accessKeyID
        self.secretAccessKey = secretAccessKey
        self.sessionToken = sessionToken
    }
}

/// Where the bucket goes in a request.
public enum S3Addressing: String, Sendable {
    /// `https://endpoint/bucket/key`: what self-hosted servers (Ceph, MinIO, Garage) expect.
    case pathStyle = "path"
    /// `https://bucket.endpoint/key`: AWS's default, which needs a DNS name per bucket.
    case virtualHosted = "virtual"
}

/// How often and how long a request is tried again after a 5xx, a 429 or `SlowDown`, or a
/// connection error: capped exponential backoff with full jitter (a random wait between 0 and
/// `min(maxDelay, baseDelay * 2^attempt)`), so writers that failed together do not retry together.
public struct S3RetryPolicy: Sendable {
    /// Tries in all, the first included.
    public var maxAttempts: Int
    public var baseDelay: Duration
    public var maxDelay: Duration

    public init(maxAttempts: Int = 6, baseDelay: Duration = .milliseconds(100), maxDelay: Duration = .seconds(5)) {
        self.maxAttempts = max(1, maxAttempts)
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
    }

    /// The wait before try `attempt + 1` (attempt counts from 1).
    func delay(after attempt: Int) -> Duration {
        let exponent = min(attempt - 1, 20)
        let cap = min(maxDelay, baseDelay * (1 << exponent))
        return .nanoseconds(Int64.random(in: 0...max(0, cap.timeAmount.nanoseconds)))
    }
}

/// Everything a ``S3Client`` needs: the endpoint, the region, the credentials, the addressing,
/// the bucket, and the limits of its requests.
///
/// ```swift
/// let location = try S3Location(parsing: "s3://backups/laptops")
/// var configuration = try S3Configuration.fromEnvironment()
/// configuration.bucket = location.bucket
/// let client = S3Client(configuration)
/// ```
public struct S3Configuration: Sendable {
    /// `scheme://host[:port]`, with no path.
    public var endpoint: URL
    public var region: String
    public var credentials: S3Credentials
    public var addressing: S3Addressing
    /// The bucket every request of the client goes to.
    public var bucket: String
    /// Objects larger than this are uploaded in parts (multipart upload).
    public var multipartThreshold: Int = 16 << 20
    /// The size of each part but the last (S3's minimum is 5 MiB).
    public var partSize: Int = 8 << 20
    /// The largest object body the client reads into memory.
    public var maxObjectSize: Int = 1 << 30
    /// How long one request (one try) may take.
    public var requestTimeout: Duration = .seconds(60)
    /// How long a try waits for a connection. The HTTP client keeps trying to connect (a
    /// refused connection included) until then, so this bounds how soon a server that is down
    /// counts as one failed try.
    public var connectTimeout: Duration = .seconds(10)
    public var retry = S3RetryPolicy()

    /// A configuration from its parts; `addressing` defaults to path-style when `endpoint` is
    /// given and virtual-hosted for AWS's own endpoint.
    public init(
        endpoint: URL? = nil, region: String = "us-east-1", credentials: S3Credentials, bucket: String = "",
        addressing: S3Addressing? = nil
    ) {
        self.endpoint = endpoint ?? URL(string: "https://s3.\(region).amazonaws.com")!
        self.region = region
        self.credentials = credentials
        self.bucket = bucket
        self.addressing = addressing ?? (endpoint == nil ? .virtualHosted : .pathStyle)
    }

    /// The standard AWS configuration, as the AWS CLI reads it: the profile `profile`, else
    /// `AWS_PROFILE`, else `default`, from `~/.aws/config` and `~/.aws/credentials` (or
    /// `AWS_CONFIG_FILE`, `AWS_SHARED_CREDENTIALS_FILE`); `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN` over the profile's keys unless `profile`
    /// names one; `AWS_REGION`, then `AWS_DEFAULT_REGION`, then the profile's `region`, then
    /// `us-east-1`; `AWS_ENDPOINT_URL_S3`, then `AWS_ENDPOINT_URL`, then the profile's
    /// `s3.endpoint_url` or `endpoint_url`; the profile's `s3.addressing_style` (`path`,
    /// `virtual`), else path-style with an endpoint URL and virtual-hosted without.
    ///
    /// Throws ``S3Error/configuration(_:)`` for a profile that is not there, missing
    /// credentials, or a malformed file or endpoint. Set ``bucket`` before use.
    public static func fromEnvironment(profile: String? = nil) throws -> S3Configuration {
        try fromEnvironment(
            profile: profile, environment: ProcessInfo.processInfo.environment,
            home: ProcessInfo.processInfo.environment["HOME"] ?? NSHomeDirectory())
    }

    /// ``fromEnvironment(profile:)`` over the given variables and home directory.
    public static func fromEnvironment(profile: String?, environment: [String: String], home: String) throws -> S3Configuration {
        let variable = { (name: String) -> String? in environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        let files = try AWSConfigFiles(environment: environment, home: home)
        let profileName = profile ?? variable("AWS_PROFILE") ?? "default"
        let settings = files.settings(profile: profileName)
        if settings == nil && (profile != nil || variable("AWS_PROFILE") != nil) {
            throw S3Error.configuration(
                "the AWS profile \(profileName) is in neither ~/.aws/config nor ~/.aws/credentials: add it or name another")
        }
        let setting = { (name: String) -> String? in settings?[name].flatMap { $0.isEmpty ? nil : $0 } }

        let credentials: S3Credentials
        if profile == nil, let key = variable("AWS_ACCESS_KEY_ID"), let secret = variable("AWS_SECRET_ACCESS_KEY") {
            credentials = S3Credentials(accessKeyID: key, secretAccessKey: secret, sessionToken: variable("AWS_SESSION_TOKEN"))
        } else if let key = setting("aws_access_key_id"), let secret = setting("aws_secret_access_key") {
            credentials = S3Credentials(accessKeyID: key, secretAccessKey: secret, sessionToken: setting("aws_session_token"))
        } else {
            throw S3Error.configuration(
                "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or give the profile \(profileName) aws_access_key_id and aws_secret_access_key"
            )
        }
        let region = variable("AWS_REGION") ?? variable("AWS_DEFAULT_REGION") ?? setting("region") ?? "us-east-1"
        let endpoint = try
            (variable("AWS_ENDPOINT_URL_S3") ?? variable("AWS_ENDPOINT_URL") ?? setting("s3.endpoint_url")
            ?? setting("endpoint_url")).map(parseEndpoint)
        var addressing: S3Addressing?
        if let style = setting("s3.addressing_style"), style != "auto" {
            guard let parsed = S3Addressing(rawValue: style) else {
                throw S3Error.configuration("the AWS profile \(profileName) has s3.addressing_style = \(style): write path, virtual or auto")
            }
            addressing = parsed
        }
        return S3Configuration(endpoint: endpoint, region: region, credentials: credentials, addressing: addressing)
    }

    /// `http(s)://host[:port]` with no path, query or user.
    static func parseEndpoint(_ text: String) throws -> URL {
        let trimmed = text.hasSuffix("/") ? String(text.dropLast()) : text
        guard let url = URL(string: trimmed), let scheme = url.scheme, ["http", "https"].contains(scheme), url.host != nil,
            url.path.isEmpty, url.query == nil, url.user == nil
        else {
            throw S3Error.configuration("the S3 endpoint \(text) is not a URL like https://host:port with no path")
        }
        return url
    }
}
