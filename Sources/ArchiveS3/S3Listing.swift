import Foundation

extension S3Client {
    /// Every object whose key begins with `prefix` and sorts after `startAfter`, in key order
    /// (ListObjectsV2, following continuation tokens to the last page).
    ///
    /// - Parameter limit: the most keys one request asks for (S3's `max-keys`, at most 1,000):
    ///   a page size, not a cap on the result.
    public func list(prefix: String, startAfter: String? = nil, limit: Int? = nil) async throws -> [S3ListedObject] {
        var objects: [S3ListedObject] = []
        var continuation: String?
        repeat {
            let page = try await listPage(prefix: prefix, startAfter: startAfter, limit: limit, continuation: continuation)
            objects += page.objects
            continuation = page.nextContinuationToken
        } while continuation != nil
        return objects
    }

    /// One page (one request) of the listing of `prefix` after `startAfter`, and whether more
    /// follow it: for a reader that picks where the next page starts.
    public func listPage(prefix: String, startAfter: String?, limit: Int? = nil) async throws -> (objects: [S3ListedObject], truncated: Bool) {
        let page = try await listPage(prefix: prefix, startAfter: startAfter, limit: limit, continuation: nil)
        return (page.objects, page.nextContinuationToken != nil)
    }

    private func listPage(prefix: String, startAfter: String?, limit: Int?, continuation: String?) async throws -> S3ListPage {
        var query = [("list-type", "2"), ("prefix", prefix), ("encoding-type", "url")]
        if let startAfter { query.append(("start-after", startAfter)) }
        if let limit { query.append(("max-keys", String(limit))) }
        if let continuation { query.append(("continuation-token", continuation)) }
        let request = S3Request(method: .GET, key: nil, query: query)
        return try S3ListPage(try await send(request).body, request: request, bucket: configuration.bucket)
    }
}

/// One page of a ListObjectsV2 answer.
struct S3ListPage {
    var objects: [S3ListedObject]
    /// The token of the next page; nil on the last.
    var nextContinuationToken: String?

    init(_ body: Data, request: S3Request, bucket: String) throws {
        let root = try S3XMLElement.parse(body)
        let subject = request.subject(bucket: bucket)
        guard root.name == "ListBucketResult" else {
            throw S3Error.invalidResponse("the answer to \(subject) is a <\(root.name)>, not a listing")
        }
        // Keys come encoded only when the server honoured encoding-type=url and says so; like
        // form data, a space is then `+` and a `+` is `%2B` (botocore decodes them the same way).
        let encoded = root.text(of: "EncodingType") == "url"
        objects = try root.children("Contents").map { entry in
            guard let rawKey = entry.text(of: "Key"),
                let key = encoded ? rawKey.replacingOccurrences(of: "+", with: " ").removingPercentEncoding : rawKey,
                let size = entry.text(of: "Size").flatMap(Int.init)
            else {
                throw S3Error.invalidResponse("the answer to \(subject) lists an object with no key or size")
            }
            return S3ListedObject(key: key, size: size, etag: S3Response.unquoted(entry.text(of: "ETag") ?? ""))
        }
        if root.text(of: "IsTruncated") == "true" {
            guard let token = root.text(of: "NextContinuationToken"), !token.isEmpty else {
                throw S3Error.invalidResponse("the answer to \(subject) is truncated but names no next page")
            }
            nextContinuationToken = token
        }
    }
}
