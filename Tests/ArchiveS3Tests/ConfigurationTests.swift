import Foundation
import TestSupport
import Testing

@testable import ArchiveS3

@Suite struct ConfigurationTests {
    @Test func test_parsesBucketAndPrefix() throws {
        let location = try S3Location(parsing: "s3://backups/laptops/archive")
        #expect(location.bucket == "backups")
        #expect(location.prefix == "laptops/archive/")
        #expect(try S3Location(parsing: "s3://backups").prefix == "")
        #expect(try S3Location(parsing: "s3://backups/a/").prefix == "a/")
    }

    @Test(arguments: ["backups/x", "s3://", "s3://Bad_Bucket/x", "s3://ab/x", "s3://backups/a//b", "s3://backups/../x"])
    func test_refusesMalformedLocationWithOneSentence(url: String) {
        #expect {
            try S3Location(parsing: url)
        } throws: { error in
            guard case S3Error.configuration(let sentence) = error else { return false }
            return sentence.contains(url) && !sentence.contains("\n") && (error as? S3Error)?.exitStatus == 2
        }
    }

    @Test func test_environmentCredentialsRegionAndEndpoint() throws {
        try withTemporaryDirectory { home in
            let configuration = try S3Configuration.fromEnvironment(
                profile: nil,
                environment: [
                    "AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK", "AWS_SESSION_TOKEN": "TOKEN", "AWS_DEFAULT_REGION": "eu-west-1",
                    "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
                ], home: home)
            #expect(configuration.credentials == S3Credentials(accessKeyID: "AK", secretAccessKey: "SK", sessionToken: "TOKEN"))
            #expect(configuration.region == "eu-west-1")
            #expect(configuration.endpoint.absoluteString == "http://127.0.0.1:9000")
            #expect(configuration.addressing == .pathStyle)
        }
    }

    @Test func test_profileFromConfigAndCredentialsFiles() throws {
        try withTemporaryDirectory { home in
            try FileManager.default.createDirectory(atPath: "\(home)/.aws", withIntermediateDirectories: true)
            try """
            [default]
            aws_access_key_id = DEFAULTKEY
            aws_secret_access_key = DEFAULTSECRET
            # a comment
            [work]
            aws_access_key_id = WORKKEY
            aws_secret_access_key = WORKSECRET
            """.write(toFile: "\(home)/.aws/credentials", atomically: true, encoding: .utf8)
            try """
            [default]
            region = us-west-2
            [profile work]
            region = eu-central-1
            s3 =
              addressing_style = virtual
              endpoint_url = https://objects.example.net
            """.write(toFile: "\(home)/.aws/config", atomically: true, encoding: .utf8)
            let byDefault = try S3Configuration.fromEnvironment(profile: nil, environment: [:], home: home)
            #expect(byDefault.credentials.accessKeyID == "DEFAULTKEY")
            #expect(byDefault.region == "us-west-2")
            #expect(byDefault.addressing == .virtualHosted)
            #expect(byDefault.endpoint.absoluteString == "https://s3.us-west-2.amazonaws.com")
            // A named profile wins over the environment's keys, as with the AWS CLI's --profile.
            let work = try S3Configuration.fromEnvironment(
                profile: "work", environment: ["AWS_ACCESS_KEY_ID": "ENVKEY", "AWS_SECRET_ACCESS_KEY": "ENVSECRET"], home: home)
            #expect(work.credentials.accessKeyID == "WORKKEY")
            #expect(work.region == "eu-central-1")
            #expect(work.addressing == .virtualHosted)
            #expect(work.endpoint.absoluteString == "https://objects.example.net")
            #expect(try S3Configuration.fromEnvironment(profile: nil, environment: ["AWS_PROFILE": "work"], home: home).region == "eu-central-1")
        }
    }

    @Test func test_missingProfileOrCredentialsIsOneSentence() throws {
        try withTemporaryDirectory { home in
            #expect(throws: S3Error.self) { try S3Configuration.fromEnvironment(profile: "nowhere", environment: [:], home: home) }
            do {
                _ = try S3Configuration.fromEnvironment(profile: nil, environment: [:], home: home)
                Issue.record("no credentials were accepted")
            } catch let error as S3Error {
                #expect(error.description.hasPrefix("no S3 credentials: set AWS_ACCESS_KEY_ID"))
                #expect(error.exitStatus == 2)
            }
        }
    }

    @Test func test_parsesListingPageWithEntitiesAndEncodedKeys() throws {
        let xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>b</Name><EncodingType>url</EncodingType>
            <IsTruncated>true</IsTruncated><NextContinuationToken>tok&amp;en</NextContinuationToken>
            <Contents><Key>log/a+b%2Bc</Key><Size>12</Size><ETag>&quot;abc&quot;</ETag></Contents>
            <Contents><Key>log/d</Key><Size>0</Size><ETag>&#34;def&#x22;</ETag></Contents></ListBucketResult>
            """
        let page = try S3ListPage(Data(xml.utf8), request: S3Request(method: .GET, key: nil), bucket: "b")
        #expect(page.objects == [S3ListedObject(key: "log/a b+c", size: 12, etag: "abc"), S3ListedObject(key: "log/d", size: 0, etag: "def")])
        #expect(page.nextContinuationToken == "tok&en")
        #expect(throws: S3Error.self) { try S3XMLElement.parse(Data("<a><b></a>".utf8)) }
    }
}
