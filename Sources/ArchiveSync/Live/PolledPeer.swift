import ArchiveStore
import Foundation

/// A peer that a live session asks for news because it cannot be told: a bucket of object
/// storage (ArchiveBucket's), which has no push. The session treats it as a far side:
/// connected at the start, polled every ``LiveOptions/poll`` while nothing else happens, and,
/// when a request fails, given up and connected again with the same capped backoff as a far
/// store.
package protocol PolledPeer: Sendable {
    /// The peer as named (`s3://bucket/prefix`).
    var name: String { get }
    /// The replica `store` syncs with; made again after each loss. Called on the session's
    /// thread (it may block on requests).
    func connect(for store: ArchiveStore) throws -> any PolledReplica
}

/// The replica of a ``PolledPeer`` for one connection.
package protocol PolledReplica: SyncReplica {
    /// Reads what is new since the last read (one request when nothing is).
    /// - Returns: the replica's change sequence afterwards.
    func poll() throws -> Int
    /// Releases what ``PolledPeer/connect(for:)`` opened; the replica is not used after.
    func disconnect()
}

/// An error of a peer after which trying again cannot help (a bucket prefix that is no
/// replica, a server that ignores conditional writes): the session stops syncing with that
/// peer, as after a safety valve, instead of retrying.
package protocol LiveStoppingError: Error {
    var stopsLiveSession: Bool { get }
}
