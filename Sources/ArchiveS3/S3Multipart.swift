import Foundation

extension S3Client {
    /// A multipart upload: `CreateMultipartUpload`, one `UploadPart` per ``S3Configuration/partSize``
    /// bytes (each retried on its own), `CompleteMultipartUpload` with `condition`; aborted when
    /// any step fails, so no parts are left behind to be billed.
    ///
    /// Ceph's gateway (16) ignores `If-None-Match` on `CompleteMultipartUpload`: there the
    /// condition is not enforced, which is harmless only for content-addressed objects.
    func putInParts(_ key: String, _ data: Data, condition: S3WriteCondition) async throws -> String {
        let bucket = configuration.bucket
        let create = S3Request(method: .POST, key: key, query: [("uploads", "")])
        let created = try S3XMLElement.parse(try await send(create).body)
        guard let uploadID = created.text(of: "UploadId"), !uploadID.isEmpty else {
            throw S3Error.invalidResponse("the answer to \(create.subject(bucket: bucket))?uploads names no UploadId")
        }
        let reported: String?
        do {
            var parts: [(number: Int, etag: String)] = []
            var offset = 0
            while offset < data.count {
                let end = min(offset + max(configuration.partSize, 5 << 20), data.count)
                let number = parts.count + 1
                let request = S3Request(
                    method: .PUT, key: key, query: [("partNumber", String(number)), ("uploadId", uploadID)],
                    body: data.subdata(in: (data.startIndex + offset)..<(data.startIndex + end)))
                parts.append((number, try Self.etag(of: try await send(request), for: request, bucket: bucket)))
                offset = end
            }
            let manifest =
                "<CompleteMultipartUpload>"
                + parts.map { "<Part><PartNumber>\($0.number)</PartNumber><ETag>\"\($0.etag.xmlEscaped)\"</ETag></Part>" }.joined()
                + "</CompleteMultipartUpload>"
            let complete = S3Request(
                method: .POST, key: key, query: [("uploadId", uploadID)], headers: Self.headers(for: condition), body: Data(manifest.utf8))
            let response = try await send(complete)
            // S3 may answer 200 and put the error in the body, once the upload took long.
            let result = try S3XMLElement.parse(response.body)
            if result.name == "Error" {
                throw S3ErrorAnswer(S3Response(status: 500, headers: response.headers, body: response.body))
                    .s3Error(for: complete, configuration: configuration)
            }
            reported = result.text(of: "ETag").map(S3Response.unquoted) ?? response.etag
        } catch {
            _ = try? await send(S3Request(method: .DELETE, key: key, query: [("uploadId", uploadID)]))
            throw error
        }
        if let reported, !reported.isEmpty { return reported }
        // Ceph's gateway (16) answers with an empty <ETag>: the object's HEAD has it.
        let head = S3Request(method: .HEAD, key: key)
        return try Self.etag(of: try await send(head), for: head, bucket: bucket)
    }
}
