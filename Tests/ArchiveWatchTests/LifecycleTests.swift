import ArchiveStore
import ArchiveWatch
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Starting, refusing, stopping and losing a watcher.
@Suite("Watcher: lifecycle") struct LifecycleTests {
    @Test func aSecondWatcherIsRefusedUntilTheFirstHasStopped() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/store"
            let first = try ArchiveStore(directory: path)
            let second = try ArchiveStore(directory: path)
            #expect(try first.status().watcher == nil)

            let watcher = try first.startWatching(watchOptions())
            for store in [first, second] {
                let status = try #require(try store.status().watcher)
                #expect(status.pid == getpid())
                #expect(status.currentSince != nil)
            }
            // Another instance of the store, and the watched instance itself, are refused.
            #expect(throws: ArchiveError.alreadyWatched(path: path, pid: getpid())) { try second.startWatching(watchOptions()) }
            #expect(throws: ArchiveError.alreadyWatched(path: path, pid: getpid())) { try first.startWatching(watchOptions()) }

            watcher.stop()
            #expect(watcher.waitUntilStopped(timeout: patience))
            try await watcher.wait()  // stopped, not failed: no error
            #expect(try first.status().watcher == nil)
            #expect(try second.status().watcher == nil)

            let next = try second.startWatching(watchOptions())
            let status = try #require(try first.status().watcher)
            #expect(status.pid == getpid())
            #expect(status.currentSince != nil)
            // The new watcher watches: another program's file is recorded and delivered.
            let log = ChangeLog(second)
            try makeDirectory(path + "/Person")
            try writeFile(path + "/Person/z.json", #"{"age":1,"name":"Z"}"#)
            let created = try await log.wait(for: .created, of: ObjectID(collection: "Person", key: "z"))
            #expect(created.origin == .external)

            next.stop()
            #expect(next.waitUntilStopped(timeout: patience))
            #expect(try second.status().watcher == nil)
        }
    }

    @Test func deletingTheStoreStopsTheWatcherWithStoreRemoved() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/store"
            let store = try ArchiveStore(directory: path)
            try store.save(Person(name: "A", age: 1), forKey: "a")
            let watcher = try store.startWatching(watchOptions(silent: true))

            try FileManager.default.removeItem(atPath: path)  // rm -rf store
            try await waitUntilStopped(watcher)
            await #expect(throws: WatchError.storeRemoved(path: path)) { try await watcher.wait() }
        }
    }

    @Test func movingTheStoreAwayStopsTheWatcherWithStoreRemoved() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/store"
            let store = try ArchiveStore(directory: path)
            try store.save(Person(name: "A", age: 1), forKey: "a")
            let watcher = try store.startWatching(watchOptions(silent: true))

            try renameFile(path, to: directory + "/moved")  // mv store moved
            try await waitUntilStopped(watcher)
            await #expect(throws: WatchError.storeRemoved(path: path)) { try await watcher.wait() }
            #expect(try ArchiveStore(directory: directory + "/moved").status().watcher == nil)
        }
    }

    @Test func stopReachesTheWatcherWhileAnotherThreadWaitsForIt() async throws {
        try await withTemporaryDirectory { directory in
            let store = try ArchiveStore(directory: directory + "/store")
            let watcher = try store.startWatching(watchOptions(rescanInterval: nil, silent: true))
            // A thread blocked in waitUntilStopped waits on the same condition as the watcher's
            // thread: the stop must wake the watcher, not only the waiter. (A stop lost that way
            // never arrives; the deadline is long because every watcher of this test process
            // shares one inotify thread, which other suites keep busy with bursts of files.)
            // The waiter is a thread of its own: blocking one of the few threads tasks run on
            // could keep this test from reaching its stop while other suites block the rest.
            let stopped = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                Thread { continuation.resume(returning: watcher.waitUntilStopped(timeout: .seconds(60))) }.start()
                Thread {
                    Thread.sleep(forTimeInterval: 0.2)
                    watcher.stop()
                }.start()
            }
            #expect(stopped, "the watcher did not stop")
        }
    }
}
