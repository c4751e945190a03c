import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A lock file in a store's metadata directory: an `flock` that the kernel releases when the
/// holding process dies, so that a killed holder never leaves the lock taken.
///
/// The one lock-file type of the package: the watcher's lease and a sync's lock are each one
/// of these (see ``ArchiveStore/lockFile(named:create:)``). The lock is released by
/// ``release()`` or when the object goes.
package final class LockFile: Sendable {
    /// nil once released: closing the file releases the lock.
    private let file: Mutex<Descriptor?>
    /// The lock file's path, for messages.
    package let path: String

    /// How long ``lockExclusively()`` waits for another holder to let go before refusing: a
    /// lock released an instant ago can still be held by a child process between its fork and
    /// exec (the descriptor is close-on-exec), and a `status` probing a lock holds it shared
    /// for a moment.
    package static let patience = Duration.seconds(1)

    init(_ file: Descriptor) {
        self.file = Mutex(file)
        path = file.path
    }

    /// Takes the lock exclusively, retrying for up to ``patience``.
    /// The corresponding C function is `flock` with `LOCK_EX | LOCK_NB`.
    /// - Returns: false when another process (or another open of the file) holds it.
    package func lockExclusively() throws -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now + Self.patience
        while true {
            switch try attempt(LOCK_EX) {
            case true: return true
            case false where clock.now >= deadline: return false
            case false: usleep(10_000)
            }
        }
    }

    /// Whether another process holds the lock now: true when it cannot be taken shared at once
    /// (taken, it is let go at once). The corresponding C function is `flock` with `LOCK_SH | LOCK_NB`.
    package func isHeldElsewhere() throws -> Bool {
        guard try attempt(LOCK_SH) else { return true }
        file.withLock { file in if let file { _ = flock(file.fd, LOCK_UN) } }
        return false
    }

    /// One `flock` of `operation` without waiting: false when another holder is in the way.
    private func attempt(_ operation: Int32) throws -> Bool {
        try file.withLock { file in
            guard let file else { throw SystemCallError(call: "flock", path: path, errno: EBADF) }
            while flock(file.fd, operation | LOCK_NB) != 0 {
                let code = errno
                if code == EINTR { continue }
                if code == EWOULDBLOCK { return false }
                throw SystemCallError(call: "flock", path: path, errno: code)
            }
            return true
        }
    }

    /// Writes this process's pid into the lock file, for ``recordedHolder()`` to tell others.
    package func recordHolder() throws {
        let record = Array("\(getpid())\n".utf8)
        try file.withLock { file in
            guard let file else { return }
            try FileSystem.replaceContents(of: file, with: record)
        }
    }

    /// The pid that the holder wrote with ``recordHolder()``, if any.
    package func recordedHolder() -> Int32? {
        let bytes = file.withLock { file in file.map { FileSystem.readPrefix(of: $0, count: 32) } ?? [] }
        return Int32(String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Releases the lock (closing the file releases it). Later calls do nothing.
    package func release() {
        file.withLock { file in
            // Unlocked before the close: a child being spawned at this moment holds a copy of the
            // descriptor until its exec, and the lock belongs to the description they share.
            if let file { _ = flock(file.fd, LOCK_UN) }
            file = nil
        }
    }
}

extension ArchiveStore {
    /// Opens the lock file `name` in the store's metadata directory, creating it unless
    /// `create` is false (then nil when it does not exist). Opening takes no lock.
    ///
    /// Neither the metadata directory nor the file is followed through a symlink.
    package func lockFile(named name: String, create: Bool = true) throws -> LockFile? {
        do {
            let metadataPath = path.appendingComponent(FileName.metadataDirectory)
            let metadata = try FileSystem.openDirectory(FileName.metadataDirectory, in: root, path: metadataPath)
            let flags = create ? O_RDWR | O_CREAT : O_RDONLY
            return try FileSystem.openFile(name, in: metadata, flags: flags, path: metadataPath.appendingComponent(name)).map(LockFile.init)
        } catch {
            throw ArchiveError.wrap(error)
        }
    }
}
