import ArchiveStore
import ArgumentParser

struct Init: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create a store (or adopt an existing directory of archives as one).",
        discussion: """
            Creates STORE and its manifest. On a directory that already holds archives, run `archive-sync scan STORE` next to record them. On an existing store, changes nothing but the history limit, if given.

            STORE may be s3://BUCKET/PREFIX: makes the prefix a bucket replica that stores sync with (`archive-sync sync ./store s3://BUCKET/PREFIX`), once the server has shown that it enforces conditional writes (a server that ignores them is refused). Credentials, region and endpoint come as for the AWS tools: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION, AWS_ENDPOINT_URL, AWS_PROFILE, ~/.aws/credentials and ~/.aws/config. See docs/bucket.md.

            Examples:
              archive-sync init ./store --history 20
              archive-sync init s3://team-data/archive
            """
    )

    @Argument(help: "The directory to make a store (created when missing), or s3://BUCKET/PREFIX to make a bucket replica.")
    var store: String

    @Option(help: "How many versions of each object to keep (default 10).")
    var history: Int?

    func validate() throws {
        if let history, history < 1 { throw ValidationError("--history must be at least 1, not \(history)") }
    }

    func run() throws {
        if isBucketURL(store) { return try initBucket(store) }
        let opened = try ArchiveStore(directory: store, options: .init(historyLimit: history))
        printLine("store \(store) ready: replica \(opened.replica), history keeps \(opened.historyLimit) versions")
    }
}
