import Foundation
import Testing

@testable import ArchiveS3

@Suite struct SignatureV4Tests {
    /// AWS's documented example, "GET Object" in "Signature Calculations for the Authorization
    /// Header: Transferring Payload in a Single Chunk": the first 10 bytes of test.txt.
    @Test func test_signsAWSDocumentedGetObjectExample() {
        let signer = SignatureV4(
            credentials: S3Credentials(accessKeyID: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
            region: "us-east-1")
        let headers = signer.signingHeaders(
            method: "GET", path: "/test.txt", query: [], headers: [("Host", "examplebucket.s3.amazonaws.com"), ("Range", "bytes=0-9")],
            payloadHash: SignatureV4.payloadHash(Data()), date: Date(timeIntervalSince1970: 1_369_353_600))
        let byName = Dictionary(uniqueKeysWithValues: headers)
        #expect(byName["x-amz-date"] == "20130524T000000Z")
        #expect(byName["x-amz-content-sha256"] == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(
            byName["authorization"]
                == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        )
    }

    @Test func test_signsSessionTokenOfTemporaryCredentials() {
        let signer = SignatureV4(credentials: S3Credentials(accessKeyID: "AK", secretAccessKey: "SK", sessionToken: "TOKEN"), region: "us-east-1")
        let headers = Dictionary(
            uniqueKeysWithValues: signer.signingHeaders(
                method: "GET", path: "/b/k", query: [], headers: [("host", "127.0.0.1:7480")], payloadHash: SignatureV4.payloadHash(Data()),
                date: Date(timeIntervalSince1970: 0)))
        #expect(headers["x-amz-security-token"] == "TOKEN")
        #expect(headers["authorization"]?.contains("SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token,") == true)
    }

    @Test func test_encodesKeysAndQueriesAsS3Does() {
        #expect(SignatureV4.uriEncode("log/a b+c~é", keepSlash: true) == "log/a%20b%2Bc~%C3%A9")
        #expect(SignatureV4.uriEncode("a/b", keepSlash: false) == "a%2Fb")
        #expect(SignatureV4.canonicalQuery([("prefix", "x/"), ("list-type", "2"), ("uploads", "")]) == "list-type=2&prefix=x%2F&uploads=")
    }
}
