import ArchiveLocking
import ArchiveStore
import CArchiveShims
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Follows a store's manifest without polling: every write that moves the change sequence, in
/// this process or another, opens and closes the manifest's `writer.lock` once its commit is
/// visible (``ArchiveStore/commitAnnouncementName``), and inotify on the store's metadata
/// directory reports that (`IN_CLOSE_NOWRITE`; `IN_ATTRIB` from earlier releases, which set
/// the file's times). Each such report calls `changed` once, on the follower's own thread; the
/// caller compares change sequences.
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
        let mask = UInt32(IN_ATTRIB | IN_MODIFY | IN_CLOSE_WRITE | IN_CLOSE_NOWRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE_SELF | IN_MOVE_SELF)
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

    /// A write to the manifest's files that no commit announcement followed within this many
    /// milliseconds (a writer of an older release, which does not announce) gets one look.
    private static let unannouncedWriteCheck = Duration.seconds(1)

    private func run(_ changed: @Sendable () -> Void, _ leaseClosed: @Sendable () -> Void) {
        defer {
            close(inotify)
            close(wake.read)
            close(wake.write)
        }
        var buffer = [UInt8](repeating: 0, count: 16_384)
        // When to look after a write no announcement followed.
        var lookAt: ContinuousClock.Instant?
        while true {
            var fds = [pollfd(fd: inotify, events: Int16(POLLIN), revents: 0), pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
            let timeout = lookAt.map { Int32(max(0, Wire.Live.milliseconds($0 - .now) + 1)) } ?? -1
            let ready = poll(&fds, 2, timeout)
            if ready < 0 && errno == EINTR { continue }
            if ready < 0 || fds[1].revents != 0 || stopped.withLock({ $0 }) { return }
            if ready == 0 {
                if let due = lookAt, ContinuousClock.now >= due {
                    lookAt = nil
                    changed()
                }
                continue
            }
            var events = ManifestEvents()
            while true {
                let got = buffer.withUnsafeMutableBytes { read(inotify, $0.baseAddress!, $0.count) }
                if got <= 0 { break }
                events.add(Self.names(buffer, count: got))
            }
            if events.leaseClosed && !stopped.withLock({ $0 }) { leaseClosed() }
            if events.committed {
                lookAt = nil
                if !stopped.withLock({ $0 }) { changed() }
            } else if events.written && lookAt == nil {
                lookAt = .now + Self.unannouncedWriteCheck
            }
        }
    }

    /// What a batch of inotify events says about the manifest.
    private struct ManifestEvents {
        /// A commit that moved the change sequence was announced, or the directory overflowed
        /// or went: look now.
        var committed = false
        /// The manifest's files were written (a commit under way).
        var written = false
        /// A process closed the watch lease's file.
        var leaseClosed = false

        mutating func add(_ other: ManifestEvents) {
            committed = committed || other.committed
            written = written || other.written
            leaseClosed = leaseClosed || other.leaseClosed
        }
    }

    /// What a batch of inotify events names: the commit announcement (`writer.lock` closed
    /// unwritten, or its attributes set), the manifest's files written, the watch lease's file closed.
    private static func names(_ buffer: [UInt8], count: Int) -> ManifestEvents {
        var offset = 0
        var events = ManifestEvents()
        let header = MemoryLayout<inotify_event>.size
        while offset + header <= count {
            let (mask, length) = buffer.withUnsafeBytes { raw in
                let event = raw.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                return (event.mask, Int(event.len))
            }
            if mask & UInt32(IN_Q_OVERFLOW | IN_DELETE_SELF | IN_MOVE_SELF) != 0 { events.committed = true }
            if length > 0 {
                let name = String(decoding: buffer[(offset + header)..<(offset + header + length)].prefix { $0 != 0 }, as: UTF8.self)
                if name == ArchiveStore.commitAnnouncementName && mask & UInt32(IN_CLOSE_NOWRITE | IN_ATTRIB) != 0 { events.committed = true }
                if name.hasPrefix("manifest") && mask & UInt32(IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE) != 0 { events.written = true }
                if name == "watch.lock" && mask & UInt32(IN_CLOSE_WRITE | IN_CLOSE_NOWRITE) != 0 { events.leaseClosed = true }
            }
            offset += header + length
        }
        return events
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
