import ArchiveLocking
import ArchiveStore
import ArchiveWatch
import Foundation
import TestSupport
import Testing

@testable import ArchiveSync

#if canImport(Glibc)
    import Glibc
#endif

@Suite("A live session's change source: the watch lease it takes is the one it gives back")
struct LocalChangeSourceTests {
    /// A source's start takes the lease while its follower, hearing the lease's file closed,
    /// may be taking it on a thread of its own. Whichever wins, the source must keep the
    /// watcher that did: one it forgets keeps the lease after `stop()`, and the store stays
    /// watched with nobody to stop it (seen once in CI as a live session whose lease outlived
    /// its cancellation).
    @Test func theWatcherThatTookTheLeaseDuringTheStartIsKeptAndStopped() async throws {
        try await offPool {
            try withTemporaryDirectory { dir in
                // Either may win each race: several rounds make a forgetful source fail all but surely.
                for round in 0..<8 {
                    let store = try ArchiveStore(directory: dir + "/s\(round)")
                    // Someone probing the lease (as `status` does) holds it shared: the start sees
                    // it free but must wait to take it exclusively.
                    let probe = open(store.path + "/.archive-sync/watch.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
                    #expect(probe >= 0 && flock(probe, LOCK_SH) == 0)
                    let started = TracedMutex<LocalChangeSource?>(nil)
                    let starting = Thread {
                        let source = try? LocalChangeSource(store: store, watch: WatchOptions(debounce: .milliseconds(10))) { _ in }
                        started.withLock { $0 = source }
                    }
                    starting.start()
                    usleep(200_000)
                    // The probe lets go: its close wakes the follower, which races the start for the lease.
                    close(probe)
                    #expect(eventually(within: .seconds(30)) { started.withLock { $0 != nil } })
                    let source = try #require(started.withLock { $0 })
                    // The follower's thread may store its watcher a moment after the start returns.
                    #expect(
                        eventually(within: .seconds(10)) { source.watcher != nil },
                        "round \(round): the source forgot the watcher that holds the lease")
                    source.stop()
                    #expect(eventually(within: .seconds(10)) { (try? store.status().watcher) == nil }, "the lease is still held after stop()")
                }
            }
        }
    }
}
