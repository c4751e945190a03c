import ArchiveStore
import ArchiveWatch
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A watcher whose manifest file is removed or replaced stops, rather than recording into a
/// file no one reads again.
@Suite struct ManifestWatchTests {
    @Test(arguments: [false, true])
    func removingOrReplacingTheManifestStopsTheWatcher(_ replace: Bool) async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/store"
            let store = try ArchiveStore(directory: path)
            try store.save(Person(name: "A", age: 1), forKey: "a")
            let watcher = try store.startWatching(watchOptions(silent: true))

            let manifest = path + "/.archive-sync/manifest.sqlite"
            if replace {
                // Another manifest moved over it, as a restore from a backup would.
                try FileManager.default.copyItem(atPath: manifest, toPath: directory + "/copy.sqlite")
                try renameFile(directory + "/copy.sqlite", to: manifest)
            } else {
                for suffix in ["", "-wal", "-shm"] { unlink(manifest + suffix) }
            }
            try await waitUntilStopped(watcher)
            let how = replace ? "replaced" : "removed"
            await #expect(throws: WatchError.manifestReplaced(path: path, how: how)) { try await watcher.wait() }
            #expect(WatchError.manifestReplaced(path: path, how: how).description.contains("watching stopped"))
        }
    }

    /// Removing `.archive-sync` is not the store being deleted: the message says what went.
    @Test func removingTheMetadataDirectoryIsToldApartFromTheStoreGoing() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory + "/store"
            let store = try ArchiveStore(directory: path)
            try store.save(Person(name: "A", age: 1), forKey: "a")
            let watcher = try store.startWatching(watchOptions(silent: true))
            try FileManager.default.removeItem(atPath: path + "/.archive-sync")
            try await waitUntilStopped(watcher)
            await #expect(throws: WatchError.metadataRemoved(path: path)) { try await watcher.wait() }
            #expect(!WatchError.metadataRemoved(path: path).description.contains("deleted or moved away while watched"))
        }
    }
}
