/// A bucket and a key prefix, as `s3://bucket/prefix` names them.
///
/// ```swift
/// let location = try S3Location(parsing: "s3://backups/laptops/archive")
/// // location.bucket == "backups", location.prefix == "laptops/archive/"
/// ```
public struct S3Location: Sendable, Hashable, CustomStringConvertible {
    /// The bucket's name.
    public var bucket: String
    /// The prefix of every key under this location: empty, or ending with `/`.
    public var prefix: String

    /// A location from its parts; a non-empty `prefix` gets a trailing `/` when it has none.
    public init(bucket: String, prefix: String) {
        self.bucket = bucket
        self.prefix = prefix.isEmpty || prefix.hasSuffix("/") ? prefix : prefix + "/"
    }

    /// Parses `s3://bucket` or `s3://bucket/prefix`; throws ``S3Error/configuration(_:)`` with a
    /// sentence that says what is wrong with `url`.
    public init(parsing url: String) throws {
        guard url.hasPrefix("s3://") else {
            throw S3Error.configuration("\(url) is not an S3 location: write it as s3://bucket/prefix")
        }
        let rest = url.dropFirst("s3://".count)
        let bucket = String(rest.prefix { $0 != "/" })
        var prefix = String(rest.dropFirst(bucket.count).drop { $0 == "/" })
        while prefix.hasSuffix("//") { prefix.removeLast() }
        if let problem = Self.problem(withBucketName: bucket) {
            throw S3Error.configuration("\(url) names no valid bucket: \(problem)")
        }
        if prefix.contains("//") || prefix.split(separator: "/").contains(where: { $0 == "." || $0 == ".." }) {
            throw S3Error.configuration("\(url) has an empty, . or .. part in its prefix: name each folder of the prefix")
        }
        self.init(bucket: bucket, prefix: prefix)
    }

    /// `s3://bucket/prefix`.
    public var description: String { "s3://\(bucket)/\(prefix)" }

    /// The full key of `name` under the prefix.
    public func key(_ name: String) -> String { prefix + name }

    /// S3's rules for bucket names (3-63 characters; lowercase letters, digits, `.` and `-`;
    /// a letter or digit at each end), which path-style and virtual-hosted addressing both need.
    private static func problem(withBucketName name: String) -> String? {
        if name.isEmpty { return "the bucket name is empty" }
        guard (3...63).contains(name.count) else { return "a bucket name has 3 to 63 characters, \(name) has \(name.count)" }
        let allowed = name.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "." || $0 == "-" }
        guard allowed else { return "a bucket name has only lowercase letters, digits, dots and hyphens" }
        guard let first = name.first, let last = name.last, first.isLetter || first.isNumber, last.isLetter || last.isNumber else {
            return "a bucket name begins and ends with a letter or a digit"
        }
        return nil
    }
}
