import ArchiveLocking
import ArchiveStore
import CArchiveShims
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Follows a store's manifest without polling: inotify on the store's metadata directory
/// reports every write to the manifest's files (SQLite appends each commit to its write-ahead
/// log), whoever makes it, in this process or another. Each burst of writes calls `changed`
/// at once and a few times more in the next few seconds (see `settle`), on the follower's
/// own thread; the caller compares change sequences.
///
/// A live session uses this to learn that a store's change sequence may have moved, whether
/// its own watcher, another session's, another process's `watch`, or a sync wrote it: one
/// watcher per store records changes, any number of followers read the result.
package final class ManifestFollower: Sendable {
    private let inotify: Int32
    private let wake: (read: Int32, write: Int32)
    private let stopped = TracedMutex(false)

    /// Starts following the manifest of the store at `storePath`.
    /// - Throws: ``LiveError/cannotFollow(path:reason:)`` when inotify cannot watch the
    ///   metadata directory.
    /// - Parameters:
    ///   - changed: called when the manifest may have changed.
    ///   - leaseClosed: called when a process closed the store's watch lease file (the
    ///     watcher holding it may have stopped or died).
    package init(storePath: String, changed: @escaping @Sendable () -> Void, leaseClosed: @escaping @Sendable () -> Void = {}) throws {
        let directory =
            storePath.hasSuffix("/") ? storePath + ArchiveStore.metadataDirectoryName : storePath + "/" + ArchiveStore.metadataDirectoryName
        let fd = inotify_init1(Int32(IN_CLOEXEC | IN_NONBLOCK))
        guard fd >= 0 else { throw LiveError.cannotFollow(path: storePath, reason: String(cString: strerror(errno))) }
        let mask = UInt32(IN_MODIFY | IN_CLOSE_WRITE | IN_CLOSE_NOWRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE_SELF | IN_MOVE_SELF)
        guard inotify_add_watch(fd, directory, mask) >= 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw LiveError.cannotFollow(path: storePath, reason: reason)
        }
        var fds: [Int32] = [0, 0]
        guard archive_pipe_cloexec(&fds) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw LiveError.cannotFollow(path: storePath, reason: reason)
        }
        inotify = fd
        wake = (fds[0], fds[1])
        let thread = Thread { [self] in run(changed, leaseClosed) }
        thread.name = "archive-sync follow"
        thread.start()
    }

    /// Stops following; `changed` is not called after this returns (but for a call already running).
    package func stop() {
        let first = stopped.withLock { stopped in
            defer { stopped = true }
            return !stopped
        }
        if first {
            var byte: UInt8 = 1
            _ = write(wake.write, &byte, 1)
        }
    }

    /// After a write, when to look again, in milliseconds: SQLite appends a commit's frames to
    /// the log (each a write inotify reports), syncs the log, and only then publishes the
    /// commit in its shared-memory index, which inotify cannot see. A look right after the
    /// last frame may come before the commit is visible, and on a busy disk the sync can take
    /// seconds; these later looks find it without a further event. (Each is one read of the
    /// change sequence, only after a write.)
    private static let settle: [Int32] = [2, 10, 50, 250, 1_000, 3_000]

    private func run(_ changed: @Sendable () -> Void, _ leaseClosed: @Sendable () -> Void) {
        defer {
            close(inotify)
            close(wake.read)
            close(wake.write)
        }
        var buffer = [UInt8](repeating: 0, count: 16_384)
        var step = Self.settle.count  // no look pending
        while true {
            var fds = [pollfd(fd: inotify, events: Int16(POLLIN), revents: 0), pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&fds, 2, step < Self.settle.count ? Self.settle[step] : -1)
            if ready < 0 && errno == EINTR { continue }
            if ready < 0 || fds[1].revents != 0 || stopped.withLock({ $0 }) { return }
            if ready == 0 {
                changed()
                step += 1
                continue
            }
            var relevant = false
            var lease = false
            while true {
                let got = buffer.withUnsafeMutableBytes { read(inotify, $0.baseAddress!, $0.count) }
                if got <= 0 { break }
                let (manifest, closed) = Self.names(buffer, count: got)
                relevant = relevant || manifest
                lease = lease || closed
            }
            if lease && !stopped.withLock({ $0 }) { leaseClosed() }
            if relevant && !stopped.withLock({ $0 }) {
                changed()
                step = 0
            }
        }
    }

    /// Whether a batch of inotify events names one of the manifest's files (its database,
    /// write-ahead log), overflowed or saw the directory go; and whether one closed the
    /// watch lease's file.
    private static func names(_ buffer: [UInt8], count: Int) -> (manifest: Bool, leaseClosed: Bool) {
        var offset = 0
        var manifest = false
        var leaseClosed = false
        let header = MemoryLayout<inotify_event>.size
        while offset + header <= count {
            let (mask, length) = buffer.withUnsafeBytes { raw in
                let event = raw.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                return (event.mask, Int(event.len))
            }
            if mask & UInt32(IN_Q_OVERFLOW | IN_DELETE_SELF | IN_MOVE_SELF) != 0 { manifest = true }
            if length > 0 {
                let name = String(decoding: buffer[(offset + header)..<(offset + header + length)].prefix { $0 != 0 }, as: UTF8.self)
                if name.hasPrefix("manifest") && mask & UInt32(IN_CLOSE_NOWRITE) == 0 { manifest = true }
                if name == "watch.lock" && mask & UInt32(IN_CLOSE_WRITE | IN_CLOSE_NOWRITE) != 0 { leaseClosed = true }
            }
            offset += header + length
        }
        return (manifest, leaseClosed)
    }
}

/// Why a live session could not start on a store here.
public enum LiveError: Error, CustomStringConvertible, Sendable {
    /// inotify could not watch the store's metadata directory.
    case cannotFollow(path: String, reason: String)

    public var description: String {
        switch self {
        case .cannotFollow(let path, let reason): "cannot follow the manifest of \(path) with inotify: \(reason)"
        }
    }
}
