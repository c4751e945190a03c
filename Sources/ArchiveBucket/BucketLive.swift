import ArchiveS3
import ArchiveStore
import ArchiveSync
import Foundation

extension BucketReplicas {
    /// A live session that keeps `store` in step with the bucket replica at `location`, as
    /// `archive-sync watch STORE --sync-with s3://...` does: a change of the store is pushed
    /// after ``LiveOptions/debounce``, and the bucket's logs are listed every
    /// ``LiveOptions/poll`` (one request when nothing is new; object storage has no push).
    /// A failing request gives the bucket up and tries again after ``LiveOptions/reconnectDelay``,
    /// doubling to ``LiveOptions/maximumReconnectDelay``, as with a far store; writes to the
    /// store keep working meanwhile.
    ///
    /// ```swift
    /// let session = BucketReplicas.liveSession(store, with: location, configuration: configuration)
    /// for await event in session.events() { print(event) }      // cancel the task to stop
    /// ```
    public static func liveSession(
        _ store: ArchiveStore, with location: S3Location, configuration: S3Configuration, options: LiveOptions = LiveOptions()
    ) -> LiveSession {
        var configuration = configuration
        configuration.bucket = location.bucket
        return LiveSession(store, polled: BucketPeer(location: location, configuration: configuration), options: options)
    }
}

/// A bucket replica as a live session's polled peer: a client and a replica per connection.
struct BucketPeer: PolledPeer {
    let location: S3Location
    let configuration: S3Configuration

    var name: String { location.description }

    func connect(for store: ArchiveStore) throws -> any PolledReplica {
        let client = S3Client(configuration)
        do {
            return try BucketReplicas.replica(for: store, at: location, client: client, close: { try await client.shutdown() }, closesAtEnd: false)
        } catch {
            _ = try? blocking { try await client.shutdown() }
            throw error
        }
    }
}
