import Foundation

#if canImport(Glibc)
    import Glibc
#endif

extension ManifestTransaction {
    /// The hash of `id`'s live contents; nil when it has no row or a tombstone.
    func liveHash(_ id: ObjectID) throws -> ContentHash? {
        guard let row = try object(id), !row.isDeleted else { return nil }
        return row.hash
    }
}

extension ArchiveStore {
    /// True when a watcher holds the store's lease and has caught up with the disk, so the
    /// manifest is current without a scan: it answered a probe through its event queue in
    /// time (see ``WatchProbe``). A stopped or stuck watcher does not.
    package func isKeptCurrentByWatcher() throws -> Bool {
        try watcherHasCaughtUp()
    }

    /// Takes the store's sync lock (an exclusive `flock` on `.archive-sync/sync.lock`, which
    /// the kernel drops if the process dies), or throws when another sync holds it.
    package func acquireSyncLock() throws -> StoreLock {
        try refuseIfReadOnly()
        let name = FileName.metadataDirectory + "/sync.lock"
        let fd = openat(root, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw ArchiveError.wrap(SystemCallError(call: "open", path: path + "/" + name, errno: errno)) }
        // A lock released an instant ago can still be held by a child process between its fork
        // and exec (the descriptor is close-on-exec): retry for up to a second before giving up.
        var attempts = 0
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            if code == EWOULDBLOCK && attempts < 20 {
                attempts += 1
                usleep(50_000)
                continue
            }
            close(fd)
            if code == EWOULDBLOCK { throw ArchiveError.busy("another sync of \(path) is running; try again when it has finished") }
            throw ArchiveError.wrap(SystemCallError(call: "flock", path: path + "/" + name, errno: code))
        }
        return StoreLock(fd: fd)
    }
}

/// A held lock file; released when closed or when the process dies.
package final class StoreLock: Sendable {
    private let fd: Int32

    fileprivate init(fd: Int32) { self.fd = fd }

    deinit { close(fd) }
}

/// What an object must hold for a conditional write to go ahead: these live contents, or
/// (nil) no live object.
struct WriteCondition: Sendable {
    var liveHash: ContentHash?
}

/// What a conditional write's target must still look like on disk, checked just before the
/// rename (or unlink) that replaces it: a file changed or created since the last scan, which
/// the manifest has not recorded yet, must not be overwritten either.
enum DiskExpectation: Sendable {
    /// Nothing may stand at this name.
    case absent(String)
    /// The file holds these bytes (its recorded stamp, or failing that its hash, says so).
    case holds(file: String, stamp: FileStamp?, hash: ContentHash?)
}

extension ArchiveStore {
    /// What a conditional write expects on disk, when the manifest still holds what its
    /// condition names; nil when it does not (the write is skipped). Called under the write lock.
    func diskExpectation(of write: PendingWrite, directoryExists: Bool, tx: ManifestTransaction) throws -> DiskExpectation? {
        guard let condition = write.condition else { return nil }
        let live = try tx.object(write.id).flatMap { $0.isDeleted ? nil : $0 }
        guard live?.hash == condition.liveHash else { return nil }
        if let live { return directoryExists ? .holds(file: live.file, stamp: live.stamp, hash: live.hash) : nil }
        return .absent(write.file)
    }

    /// True when the disk still looks as `expectation` says.
    func diskMatches(_ expectation: DiskExpectation, in directory: FileHandle) throws -> Bool {
        switch expectation {
        case .absent(let file):
            return try file.isEmpty || FileSystem.status(file, in: directory.fd, path: directory.path + "/" + file) == nil
        case .holds(let file, let stamp, let hash):
            let where_ = directory.path + "/" + file
            guard let status = try FileSystem.status(file, in: directory.fd, path: where_), status.kind == .regular else { return false }
            if status.stamp == stamp { return true }
            // Touched since it was recorded: still as expected only if its bytes are.
            return try FileSystem.readFile(file, in: directory.fd, path: where_).map(ContentHash.init(of:)) == hash
        }
    }
}
