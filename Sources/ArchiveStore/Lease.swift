import ArchiveLocking
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The watcher keeping a store's manifest current, as ``ArchiveStore/status()`` reports it.
public struct WatcherStatus: Sendable, Codable, Equatable {
    /// The watching process.
    public let pid: Int32
    /// When its first scan finished and it began recording every change as it happens; nil
    /// while that first scan still runs (the manifest may lag the disk until then).
    public let currentSince: Date?
    /// True when it answered a probe through its event queue just now (see ``WatchProbe``):
    /// every change made before ``ArchiveStore/status()`` was called is in the manifest. False
    /// when it did not answer in time (stopped, hung, or far behind): the manifest may lag the
    /// disk, and `diff`, `sync` and the like scan as if no watcher ran.
    public let caughtUp: Bool
}

/// A store's watch lease: an exclusive `flock` on `.archive-sync/watch.lock`, which the kernel
/// releases when the holding process dies. While one is held, the manifest is kept current.
package final class WatchLease: Sendable {
    private let fd: TracedMutex<Int32>

    fileprivate init(fd: Int32) { self.fd = TracedMutex(fd) }

    /// Releases the lease (closing the lock file releases the lock). Later calls do nothing.
    package func release() {
        fd.withLock { fd in
            if fd >= 0 { close(fd) }
            fd = -1
        }
    }

    deinit { release() }
}

extension ArchiveStore {
    private static let leaseFile = "watch.lock"

    /// Takes the store's watch lease, or throws ``ArchiveError/alreadyWatched(path:pid:)``
    /// naming the process that holds it.
    package func acquireWatchLease() throws -> WatchLease {
        try refuseIfReadOnly()
        do {
            let fd = try openLeaseFile(create: true)!
            // A `status` probing the lock holds it shared for a moment: try a few times.
            var attempts = 0
            while flock(fd, LOCK_EX | LOCK_NB) != 0 {
                let code = errno
                attempts += 1
                if code == EWOULDBLOCK && attempts < 10 {
                    usleep(5_000)
                    continue
                }
                defer { close(fd) }
                guard code == EWOULDBLOCK else { throw SystemCallError(call: "flock", path: leasePath, errno: code) }
                throw ArchiveError.alreadyWatched(path: path, pid: Self.holder(of: fd))
            }
            let lease = WatchLease(fd: fd)  // from here on, released however this ends
            let record = "\(getpid())\n"
            _ = ftruncate(fd, 0)
            _ = record.withCString { pwrite(fd, $0, strlen($0), 0) }
            try manifest.write { tx in
                try tx.setMeta("watcher", String(getpid()))
                try tx.setMeta("watched_since", "")
            }
            return lease
        } catch {
            throw ArchiveError.wrap(error)
        }
    }

    /// Records that the lease holder has caught up with the disk and records every change as
    /// it happens from now on.
    package func markManifestCurrent(_ lease: WatchLease) throws {
        removeStaleWatchProbes()  // from now on each probe gets an answer
        do {
            try manifest.write { try $0.setMeta("watched_since", String(Manifest.now())) }
        } catch {
            throw ArchiveError.wrap(error)
        }
    }

    /// The live watcher of this store, if one holds the lease; `caughtUp` is whether it
    /// answered a probe just before this transaction.
    func currentWatcher(_ tx: ManifestTransaction, caughtUp: Bool = false) throws -> WatcherStatus? {
        guard let fd = try openLeaseFile(create: false) else { return nil }
        defer { close(fd) }
        if flock(fd, LOCK_SH | LOCK_NB) == 0 {  // nobody holds it
            flock(fd, LOCK_UN)
            return nil
        }
        guard let pid = Self.holder(of: fd) else { return nil }
        let since = try tx.meta("watcher") == String(pid) ? try tx.meta("watched_since").flatMap { Int64($0) } : nil
        return WatcherStatus(
            pid: pid, currentSince: since.map { Date(timeIntervalSince1970: Double($0) / 1e9) }, caughtUp: caughtUp && since != nil)
    }

    private var leasePath: String { path + "/" + FileName.metadataDirectory + "/" + Self.leaseFile }

    private func openLeaseFile(create: Bool) throws -> Int32? {
        let metadata = try FileSystem.openDirectory(FileName.metadataDirectory, in: root, path: path + "/" + FileName.metadataDirectory)
        defer { metadata.close() }
        let fd = openat(metadata.fd, Self.leaseFile, (create ? O_RDWR | O_CREAT : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC, 0o644)
        if fd < 0 {
            if errno == ENOENT && !create { return nil }
            throw SystemCallError(call: "open", path: leasePath, errno: errno)
        }
        return fd
    }

    /// The pid the lease holder wrote into the lock file.
    private static func holder(of fd: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = pread(fd, &buffer, buffer.count, 0)
        guard count > 0 else { return nil }
        return Int32(String(decoding: buffer[..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
