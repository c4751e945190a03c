import Foundation
import TestSupport
import Testing

@testable import ArchiveStore

#if canImport(Glibc)
    import Glibc
#endif

/// The manifest's `-wal` and `-shm` files outlive the process that made them: each command
/// (a sync's far side among them) then opens them instead of making them again, and its last
/// close empties the WAL instead of deleting both.
@Suite struct ManifestLogFilesTests {
    /// The inode of `path`, or nil when nothing is there.
    private func inode(_ path: String) -> UInt64? {
        var info = stat()
        return lstat(path, &info) == 0 ? UInt64(info.st_ino) : nil
    }

    private func size(_ path: String) -> Int? {
        var info = stat()
        return lstat(path, &info) == 0 ? Int(info.st_size) : nil
    }

    @Test func theWALAndItsIndexAreKeptEmptiedAndReusedAcrossOpens() throws {
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            let manifest = path + "/.archive-sync/manifest.sqlite"
            do {
                let store = try ArchiveStore(directory: path)
                try store.save(Person(name: "A", age: 1), forKey: "a")
            }
            // Released: its last close checkpointed the WAL and emptied it, keeping both files.
            let wal = try #require(inode(manifest + "-wal"), "the -wal file was deleted at the last close")
            let index = try #require(inode(manifest + "-shm"), "the -shm file was deleted at the last close")
            #expect(size(manifest + "-wal") == 0)
            do {
                let store = try ArchiveStore(directory: path)
                #expect(try store.load(Person.self, forKey: "a")?.name == "A")
                try store.save(Person(name: "B", age: 2), forKey: "b")
                _ = try store.scan()
            }
            // The same files, not new ones.
            #expect(inode(manifest + "-wal") == wal)
            #expect(inode(manifest + "-shm") == index)
            #expect(size(manifest + "-wal") == 0)
            let store = try ArchiveStore(directory: path)
            #expect(try store.load(Person.self, forKey: "b")?.name == "B")
        }
    }
}
