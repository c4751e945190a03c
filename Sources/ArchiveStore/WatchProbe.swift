import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The barrier that tells a reader whether the store's watcher has caught up with the disk.
///
/// A lease proves that the watcher is alive, not that it has read its event queue: a watcher
/// stopped with SIGSTOP, or busy, still holds it. inotify hands one instance's events over in
/// the order they happened, so the reader creates a probe file in the store's root, which the
/// watcher watches, and waits for the watcher to remove it. The watcher removes a probe only
/// after recording every path reported before the probe's creation: once the probe is gone,
/// every change made before it was created is in the manifest.
///
/// The protocol, in one place for both sides:
/// - the reader creates `ROOT/.archive-sync-probe.PID.START.N` (a dot name: scan, sync and
///   `verify` never look at the root's dot files) and keeps it open;
/// - the watcher, on that name's `IN_CREATE`, records what it gathered before it, then
///   unlinks the name (``ArchiveStore/answerWatchProbe(_:)``);
/// - the reader sees the link count of its open probe drop to 0 within its bound, or it
///   unlinks the probe itself and treats the store as unwatched (a scan).
package enum WatchProbe {
    /// Every probe's name starts with this.
    package static let prefix = ".archive-sync-probe."
    /// How long a reader waits for the watcher's answer before it scans instead. A watcher
    /// that runs answers in milliseconds.
    package static let defaultTimeout: Duration = .milliseconds(500)

    private static let counter = Atomic<Int>(0)

    /// True for the name of a probe file (a root entry's name).
    package static func isProbe(_ name: String) -> Bool {
        name.hasPrefix(prefix) && !name.contains("/")
    }

    /// A probe name no other reader uses.
    static func newName() -> String {
        let me = ProcessIdentity.current
        return "\(prefix)\(me.pid).\(me.startTime).\(counter.add(1, ordering: .relaxed).newValue)"
    }

    /// The reader that made the probe `name`, or nil when the name is not one.
    static func owner(of name: String) -> ProcessIdentity? {
        guard isProbe(name) else { return nil }
        let parts = name.dropFirst(prefix.count).split(separator: ".")
        guard parts.count == 3, let pid = Int32(parts[0]), let start = Int64(parts[1]) else { return nil }
        return ProcessIdentity(pid: pid, startTime: start)
    }
}

extension ArchiveStore {
    /// True when a watcher holds the lease, has finished its first scan, and answers a probe
    /// within `timeout` (see ``WatchProbe``): then every change made to the store's files
    /// before this call is in the manifest, and a scan would find nothing more.
    ///
    /// Must be called outside any manifest transaction: the watcher records under the write
    /// lock before it answers.
    package func watcherHasCaughtUp(timeout: Duration = WatchProbe.defaultTimeout) throws -> Bool {
        let current = try withManifest { try $0.read { tx in try currentWatcher(tx)?.currentSince != nil } }
        return current && probeWatcher(timeout: timeout)
    }

    /// Sends a probe through the watcher's event queue and waits, bounded, for its answer.
    func probeWatcher(timeout: Duration) -> Bool {
        let name = WatchProbe.newName()
        // A store that cannot be written (read-only) cannot be probed: unconfirmed.
        guard let probe = FileSystem.createMarker(name, in: root) else { return false }
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        var pause: UInt32 = 200  // microseconds, doubling up to 5 ms: a running watcher answers in about 1 ms
        while clock.now < deadline {
            if FileSystem.linkCount(of: probe) == 0 { return true }
            usleep(pause)
            pause = min(pause * 2, 5_000)
        }
        // No answer in time. If the probe is already gone, the answer came just now.
        return (try? FileSystem.removeFile(name, in: root, path: path)) == false
    }

    /// Removes the probes of readers that died waiting while no watcher answered (a watcher
    /// that starts gets no event for them). Probes of live readers are theirs to remove.
    package func removeStaleWatchProbes() {
        guard let entries = try? FileSystem.listDirectory(root, path: path) else { return }
        for entry in entries {
            guard let owner = WatchProbe.owner(of: entry.name), !owner.isRunning else { continue }
            _ = try? FileSystem.removeFile(entry.name, in: root, path: path)
        }
    }

    /// The watcher's answer to the probe `name` (a root entry named by ``WatchProbe``): called
    /// once every change reported before the probe's creation is recorded. A probe its reader
    /// removed already (it gave up waiting) needs no answer.
    package func answerWatchProbe(_ name: String) {
        guard WatchProbe.isProbe(name) else { return }
        _ = try? FileSystem.removeFile(name, in: root, path: path)
    }
}
