// The gateway of bucket-bench: the tests' CephGateway (defined once, in TestSupport), awscli's
// environment, and the requests the gateway served, read from its log.

import BenchSupport
import Foundation
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A Ceph gateway of the benchmark's own, with the requests it served counted from its log.
///
/// radosgw logs one beast access line per request at its default level (`debug rgw = 1`):
/// `beast: ... "PUT /bucket/key HTTP/1.1" 200 ...`. Counting them costs our side nothing (a
/// counting proxy in front would add a hop to every request of both sides).
final class BenchGateway {
    let gateway: CephGateway
    let aws: String

    init() throws {
        guard let aws = findOnPath("aws") else { throw BenchError("awscli is needed (`aws` on PATH; `make bench` installs it)") }
        self.aws = aws
        gateway = try CephGateway.start()
        // Both archive-sync (ArchiveS3's S3Configuration.fromEnvironment) and aws read these.
        setenv("AWS_ACCESS_KEY_ID", CephGateway.accessKey, 1)
        setenv("AWS_SECRET_ACCESS_KEY", CephGateway.secretKey, 1)
        setenv("AWS_DEFAULT_REGION", "us-east-1", 1)
        setenv("AWS_ENDPOINT_URL", gateway.endpoint.absoluteString, 1)
        // No ~/.aws of the machine's user changes what either does: empty files of the run's own.
        let empty = "\(gateway.directory)/aws-empty"
        _ = FileManager.default.createFile(atPath: empty, contents: Data())
        setenv("AWS_CONFIG_FILE", empty, 1)
        setenv("AWS_SHARED_CREDENTIALS_FILE", empty, 1)
        _ = try newAccessLines()
    }

    func stop() { gateway.stop() }

    /// `aws --endpoint-url ... ARGUMENTS`, its status checked.
    func awsArguments(_ arguments: [String]) -> [String] { ["--endpoint-url", gateway.endpoint.absoluteString] + arguments }

    func makeBucket(_ name: String) throws {
        let result = try runCapturing(aws, awsArguments(["s3api", "create-bucket", "--bucket", name]))
        guard result.status == 0 else { throw BenchError("aws s3api create-bucket \(name) failed: \(result.output)") }
    }

    private var logPath: String { "\(gateway.directory)/log/client.rgw.a.log" }

    /// How far the log has been read, in bytes: each call reads only what was added since.
    private var offset: UInt64 = 0

    /// The access lines added to the log since the last call (whole lines only).
    private func newAccessLines() throws -> [Substring] {
        let file = try FileHandle(forReadingFrom: URL(fileURLWithPath: logPath))
        defer { try? file.close() }
        try file.seek(toOffset: offset)
        let data = try file.readToEnd() ?? Data()
        guard let end = data.lastIndex(of: UInt8(ascii: "\n")) else { return [] }
        offset += UInt64(end - data.startIndex + 1)
        let text = String(decoding: data[data.startIndex...end], as: UTF8.self)
        return text.split(separator: "\n").filter { $0.contains("beast: ") && $0.contains(" HTTP/1.1\"") }
    }

    /// The requests served since the last call: waits until the log stops growing (its lines
    /// are written by a thread of the daemon's, a little after the answers).
    func requestsSinceLast() throws -> Requests {
        var lines = try newAccessLines()
        for _ in 0..<50 {
            usleep(100_000)
            let more = try newAccessLines()
            if more.isEmpty { break }
            lines += more
        }
        return Requests(lines)
    }
}

/// Requests by kind, from the access lines.
struct Requests: CustomStringConvertible {
    var total = 0
    var blobPuts = 0
    var otherPuts = 0
    var lists = 0
    var gets = 0
    var other = 0

    init<S: Sequence>(_ lines: S) where S.Element == Substring {
        for line in lines {
            guard let quote = line.firstIndex(of: "\"") else { continue }
            let request = line[line.index(after: quote)...].prefix { $0 != "\"" }.split(separator: " ")
            guard request.count >= 2 else { continue }
            let (method, target) = (request[0], request[1])
            total += 1
            switch method {
            case "PUT" where target.contains("/blobs/"): blobPuts += 1
            case "PUT": otherPuts += 1
            case "GET" where target.contains("list-type") || target.contains("prefix="): lists += 1
            case "GET": gets += 1
            default: other += 1
            }
        }
    }

    var description: String {
        "\(grouped(total)) (\(grouped(blobPuts)) blob PUTs, \(otherPuts) other PUTs, \(lists) LISTs, \(grouped(gets)) GETs, \(other) other)"
    }
}
