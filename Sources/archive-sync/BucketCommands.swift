import ArchiveBucket
import ArchiveS3
import ArchiveStore
import ArchiveSync
import ArgumentParser
import Foundation

/// `s3://bucket/prefix` names a bucket replica; anything else a store.
func isBucketURL(_ text: String) -> Bool { text.hasPrefix("s3://") }

/// The client for the bucket `location` names, configured as the AWS tools are (variables,
/// `~/.aws/credentials` and `~/.aws/config`).
private func s3Client(for location: S3Location) throws -> S3Client {
    var configuration = try S3Configuration.fromEnvironment()
    configuration.bucket = location.bucket
    return S3Client(configuration)
}

/// `archive-sync init s3://bucket/prefix`: makes the prefix a bucket replica.
func initBucket(_ url: String) throws {
    let location = try S3Location(parsing: url)
    let client = try s3Client(for: location)
    defer { _ = try? blocking { try await client.shutdown() } }
    let (replica, created) = try blocking { try await BucketReplica.create(storage: client, prefix: location.prefix, name: location.description) }
    printLine(created ? "bucket replica \(location) ready: replica \(replica)" : "\(location) already is a bucket replica: replica \(replica)")
}

/// The live session of `watch STORE --sync-with s3://...`. A prefix that is no replica, or a
/// server that ignores conditional writes, is refused here, at once; a server that does not
/// answer is the session's to retry.
func bucketLiveSession(_ store: ArchiveStore, _ url: String, options: LiveOptions) throws -> LiveSession {
    let location = try S3Location(parsing: url)
    var configuration = try S3Configuration.fromEnvironment()
    configuration.bucket = location.bucket
    let client = S3Client(configuration)
    defer { _ = try? blocking { try await client.shutdown() } }
    do {
        let replica = try BucketReplicas.replica(for: store, at: location, client: client)
        try replica.begin()
        replica.end()
    } catch let error as BucketError {
        throw error
    } catch {
        // Not an answer about the bucket (the server is down, say): the session retries it.
    }
    return BucketReplicas.liveSession(store, with: location, configuration: configuration, options: options)
}

extension StorePairArguments {
    /// The sync of a store here with a bucket replica, when one of the two is an `s3://` URL.
    func bucketSync(options: SyncOptions, create: Bool, remote: RemoteOptions) throws -> Sync? {
        guard isBucketURL(a) || isBucketURL(b) else { return nil }
        guard !(isBucketURL(a) && isBucketURL(b)) else {
            throw ValidationError("two buckets cannot sync with each other directly: sync each with a store in a directory")
        }
        let (url, path) = isBucketURL(a) ? (a, b) : (b, a)
        guard case .directory = remote.location(path) else {
            throw ValidationError("a bucket syncs with a store in a directory on this host, not with \(path)")
        }
        let location = try S3Location(parsing: url)
        // The client, the bucket's cache and the sync's two first requests are made on a
        // thread of their own while this one opens the store (a store that has synced with
        // the bucket before names it in its cache), and the requests are answered meanwhile.
        let starting = InBackground { () throws -> (S3Client, BucketOpening?) in
            let made = try s3Client(for: location)
            return (made, try? BucketReplicas.opening(forStoreAt: path, at: location, client: made))
        }
        let opened = Result { try Sync.openStore(path, create: create) }
        let (client, opening) = try starting.value()
        let store: ArchiveStore
        let bucket: BucketReplica
        do {
            store = try opened.get()
            // No shutdown at the sync's end: this process exits then, and its connections
            // close with it. The client is kept until then, as AsyncHTTPClient takes one
            // deinitialized before its shutdown for a leak.
            bucket = try BucketReplicas.replica(for: store, at: location, client: client, opening: opening)
            _ = Unmanaged.passRetained(client)
        } catch {
            opening?.cancel()
            _ = try? blocking { try await client.shutdown() }
            throw error
        }
        if opening == nil { bucket.sendOpeningRequests() }
        let local = LocalReplica(store)
        return isBucketURL(a) ? Sync(a: bucket, b: local, options: options) : Sync(a: local, b: bucket, options: options)
    }
}
