import ArchiveStore

/// What went wrong talking to an S3-compatible server: each case says it in one sentence
/// (``description``) and maps to an exit status of `archive-sync` (``exitStatus``).
public enum S3Error: ExitStatusError {
    /// A conditional write lost: `If-None-Match: *` on a key that exists, or `If-Match` with an
    /// ETag that is no longer the object's, or on a key that is missing (Ceph's RADOS Gateway
    /// answers 412 there, AWS 404: both land here).
    case preconditionFailed(key: String)
    /// The server accepted a write it should have refused (``S3Client/probeConditionalWrites(prefix:)``).
    case conditionalWritesIgnored(String)
    /// The server refused the credentials or the signature (403).
    case accessDenied(String)
    /// The bucket does not exist.
    case noSuchBucket(String)
    /// Any other answer that was not a success: the status, S3's error code when the body had
    /// one, and a sentence.
    case http(status: Int, code: String?, message: String)
    /// The request never got an answer (connection refused or reset, a time-out), after the
    /// retries; `cause` is what the HTTP client threw.
    case transport(String, cause: any Error)
    /// An answer that breaks the protocol: a missing ETag, a body shorter than its
    /// Content-Length, XML that does not parse.
    case invalidResponse(String)
    /// Bad input before any request: an `s3://` URL, a profile, missing credentials.
    case configuration(String)

    public var description: String {
        switch self {
        case .preconditionFailed(let key):
            return "the write of \(key) was refused because the object changed or appeared since it was read (412 Precondition Failed)"
        case .conditionalWritesIgnored(let sentence), .accessDenied(let sentence), .noSuchBucket(let sentence),
            .invalidResponse(let sentence), .configuration(let sentence):
            return sentence
        case .http(let status, let code, let message):
            return "the S3 server answered \(status)\(code.map { " \($0)" } ?? ""): \(message)"
        case .transport(let sentence, let cause):
            return "\(sentence): \(cause)"
        }
    }

    public var exitStatus: Int32 {
        switch self {
        // Another writer got there first; nothing was changed and the command can be run again.
        case .preconditionFailed: return ExitStatus.busy
        case .conditionalWritesIgnored, .accessDenied, .noSuchBucket, .configuration: return ExitStatus.badInput
        case .http, .transport, .invalidResponse: return ExitStatus.failure
        }
    }
}
