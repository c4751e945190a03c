import ArchiveStore

/// A store's sync lock: an exclusive lock on `.archive-sync/sync.lock`, which the kernel drops
/// if the process dies. One sync of a store at a time; released when the object goes.
package typealias SyncLock = LockFile

extension ArchiveStore {
    /// Takes the store's sync lock, or throws ``ArchiveError/busy(_:)`` when another sync holds
    /// it (after waiting up to ``LockFile/patience`` for it to let go).
    package func acquireSyncLock() throws -> SyncLock {
        try refuseIfReadOnly()
        let lock = try lockFile(named: "sync.lock")!
        guard try lock.lockExclusively() else {
            throw ArchiveError.busy("another sync of \(path) is running; try again when it has finished")
        }
        return lock
    }
}
