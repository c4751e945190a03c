import Crypto
import Foundation

/// AWS Signature Version 4 in the `Authorization` header, for S3: the payload's SHA-256 in
/// `x-amz-content-sha256`, the canonical request, the string to sign and the derived key, as
/// AWS's "Signature Calculations for the Authorization Header" documents them.
///
/// Pure: the time is passed in, so a test checks it against AWS's published example.
package struct SignatureV4: Sendable {
    var credentials: S3Credentials
    var region: String
    var service = "s3"

    /// The headers to add to a request so that it is signed: `x-amz-date`,
    /// `x-amz-content-sha256`, `x-amz-security-token` (with a session token) and `authorization`.
    ///
    /// - Parameters:
    ///   - method: `GET`, `PUT`, ...
    ///   - path: the request's path exactly as sent, already percent-encoded (``uriEncode(_:keepSlash:)``).
    ///   - query: the query's parameters, not encoded.
    ///   - headers: the other headers to sign, `host` among them (names in any case).
    ///   - payloadHash: the lowercase hex SHA-256 of the body.
    func signingHeaders(
        method: String, path: String, query: [(String, String)], headers: [(String, String)], payloadHash: String, date: Date
    ) -> [(String, String)] {
        let (amzDate, day) = Self.timestamps(date)
        var added = [("x-amz-date", amzDate), ("x-amz-content-sha256", payloadHash)]
        if let token = credentials.sessionToken { added.append(("x-amz-security-token", token)) }
        let signed = (headers + added).map { (name: $0.0.lowercased(), value: Self.trimmed($0.1)) }.sorted { $0.name < $1.name }
        let signedHeaders = signed.map(\.name).joined(separator: ";")
        let canonicalRequest = [
            method,
            path,
            Self.canonicalQuery(query),
            signed.map { "\($0.name):\($0.value)\n" }.joined(),
            signedHeaders,
            payloadHash,
        ].joined(separator: "\n")
        let scope = "\(day)/\(region)/\(service)/aws4_request"
        let stringToSign = ["AWS4-HMAC-SHA256", amzDate, scope, Self.hex(SHA256.hash(data: Data(canonicalRequest.utf8)))]
            .joined(separator: "\n")
        var key = SymmetricKey(data: Data("AWS4\(credentials.secretAccessKey)".utf8))
        for part in [day, region, service, "aws4_request"] {
            key = SymmetricKey(data: Data(HMAC<SHA256>.authenticationCode(for: Data(part.utf8), using: key)))
        }
        let signature = Self.hex(HMAC<SHA256>.authenticationCode(for: Data(stringToSign.utf8), using: key))
        let authorization =
            "AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyID)/\(scope),SignedHeaders=\(signedHeaders),Signature=\(signature)"
        return added + [("authorization", authorization)]
    }

    /// The lowercase hex SHA-256 of `data`, as `x-amz-content-sha256` wants it.
    static func payloadHash(_ data: Data) -> String { hex(SHA256.hash(data: data)) }

    /// S3's URI encoding: every byte but the unreserved `A-Z a-z 0-9 - _ . ~` as `%XX`
    /// (uppercase), and `/` kept in paths.
    static func uriEncode(_ string: String, keepSlash: Bool) -> String {
        var encoded = ""
        encoded.reserveCapacity(string.utf8.count)
        for byte in string.utf8 {
            if isUnreserved(byte) || (keepSlash && byte == UInt8(ascii: "/")) {
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                encoded += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return encoded
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        default: byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "~")
        }
    }

    /// The query as signed and as sent: each name and value encoded, sorted by name then value.
    static func canonicalQuery(_ query: [(String, String)]) -> String {
        let encoded: [(name: String, value: String)] = query.map { (uriEncode($0.0, keepSlash: false), uriEncode($0.1, keepSlash: false)) }
        return encoded.sorted { $0.name == $1.name ? $0.value < $1.value : $0.name < $1.name }
            .map { $0.name + "=" + $0.value }
            .joined(separator: "&")
    }

    /// `20130524T000000Z` and `20130524`, in UTC.
    static func timestamps(_ date: Date) -> (amzDate: String, day: String) {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let dayParts: [Int32] = [parts.tm_mon + 1, parts.tm_mday]
        let day = String(parts.tm_year + 1900) + dayParts.map { String($0).leftPadded(to: 2) }.joined()
        let timeParts: [Int32] = [parts.tm_hour, parts.tm_min, parts.tm_sec]
        let time = timeParts.map { String($0).leftPadded(to: 2) }.joined()
        return ("\(day)T\(time)Z", day)
    }

    /// A header value as signed: no space at either end, runs of spaces as one.
    private static func trimmed(_ value: String) -> String {
        value.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
    }

    /// `bytes` in lower-case hex, two digits each (the encoding SigV4 signs and names hashes in).
    package static func hex<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        bytes.map { String($0, radix: 16).leftPadded(to: 2) }.joined()
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
