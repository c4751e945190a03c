import ArchiveStore
import ArchiveSync
import Foundation
import TestSupport
import Testing

/// One sync of a store at a time: the sync lock is a lock file in the store's metadata directory.
@Suite("Sync lock")
struct SyncLockTests {
    @Test func aSecondSyncOfAStoreIsBusyUntilTheFirstEnds() async throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/store"
            let first = try ArchiveStore(directory: path)
            let second = try ArchiveStore(directory: path)
            var held: SyncLock? = try first.acquireSyncLock()
            do {
                _ = try second.acquireSyncLock()
                Issue.record("a second sync lock was taken while the first was held")
            } catch let error as ArchiveError {
                #expect(error == .busy("another sync of \(path) is running; try again when it has finished"))
                #expect(error.exitStatus == ExitStatus.busy)
            }
            #expect(held != nil)
            held = nil  // released when it goes
            _ = try second.acquireSyncLock()
        }
    }

    /// The lock file is opened without following a symlink, the metadata directory's included:
    /// a `.archive-sync` replaced by a symlink after the store opened gets no lock file made
    /// through it.
    @Test func theSyncLockIsNotTakenThroughASymlinkedMetadataDirectory() async throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/store"
            let store = try ArchiveStore(directory: path)
            #expect(rename(path + "/.archive-sync", dir + "/elsewhere") == 0)
            #expect(symlink(dir + "/elsewhere", path + "/.archive-sync") == 0)
            #expect(throws: ArchiveError.self) { _ = try store.acquireSyncLock() }
            #expect(!FileManager.default.fileExists(atPath: dir + "/elsewhere/sync.lock"))
        }
    }
}
