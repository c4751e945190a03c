import Foundation
import TestSupport
import Testing

@testable import ArchiveStore

#if canImport(Glibc)
    import Glibc
#endif

/// A store on a full disk: reads never need free space, and a recovery that cannot finish
/// waits, saying so, instead of making the store impossible to open.
@Suite struct FullDiskTests {
    /// A small tmpfs mounted on a new directory for the length of `body` (the tests run as root).
    private func withSmallDisk(_ body: (String) throws -> Void) throws {
        try withTemporaryDirectory { dir throws in
            let disk = dir + "/disk"
            try FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: false)
            try #require(mount("tmpfs", disk, "tmpfs", 0, "size=2m") == 0, "mount: \(String(cString: strerror(errno)))")
            defer { umount(disk) }
            try body(disk)
        }
    }

    /// Fills the disk that holds `directory` to its last byte; returns the filler's path.
    private func fill(_ directory: String) throws -> String {
        let filler = directory + "/filler"
        let fd = open(filler, O_WRONLY | O_CREAT | O_EXCL, 0o644)
        try #require(fd >= 0)
        defer { close(fd) }
        let chunk = [UInt8](repeating: 0, count: 4096)
        while write(fd, chunk, chunk.count) > 0 {}
        _ = write(fd, chunk, 1)  // the last partial block
        return filler
    }

    /// What a sync killed after its renames left: 40 landed files of 16 KB, and its intent.
    private func interruptedWrite(in path: String) throws -> [Data] {
        let store = try ArchiveStore(directory: path)
        try store.save(Person(name: "a", age: 1), forKey: "a")
        let landed = (0..<40).map { Data("{\"i\":\($0),\"pad\":\"\(String(repeating: "x", count: 16_000))\"}".utf8) }
        let dead = ProcessIdentity(pid: deadProcessID(), startTime: 1)
        let entries = landed.enumerated().map { index, bytes in
            WriteIntent.Entry(
                collection: "Person", key: "n\(index)", file: "n\(index).json", temp: "\(FileName.tempPrefix)\(dead.pid).1.\(index)",
                hash: ContentHash(of: bytes))
        }
        _ = try store.manifest.write { try $0.addIntent(entries, owner: dead) }
        for (index, bytes) in landed.enumerated() { try overwrite(path + "/Person/n\(index).json", with: bytes) }
        return landed
    }

    /// The store opens on a full disk although recovery cannot record what the interrupted
    /// write left: reads show the store as it was, ``ArchiveStore/pendingRecovery`` says what it
    /// waits for, and writes are refused, changing nothing. Once space is freed, the next open
    /// completes the recovery and nothing is lost.
    @Test func aRecoveryThatCannotFinishLeavesTheStoreReadableUntilSpaceIsFreed() throws {
        try withSmallDisk { disk throws in
            let path = disk + "/store"
            let landed = try interruptedWrite(in: path)
            let filler = try fill(disk)
            do {
                let store = try ArchiveStore(directory: path)
                let pending = try #require(store.pendingRecovery)
                #expect(pending.writes == 1 && pending.objects == 40, "\(pending)")
                #expect(pending.description.contains("waiting for free space on the file system of \(path)"), "\(pending)")
                #expect(try store.keys(of: Person.self) == ["a"])
                #expect(try store.load(Person.self, forKey: "a") == Person(name: "a", age: 1))
                #expect(try store.status().objects == 1)
                _ = try store.verify()
                let writes: [() throws -> Void] = [{ try store.save(Person(name: "b", age: 2), forKey: "b") }, { _ = try store.scan() }]
                for write in writes {
                    guard case .recoveryPending? = archiveError(write) else {
                        Issue.record("a write must wait for the recovery")
                        continue
                    }
                }
                #expect(try store.keys(of: Person.self) == ["a"])
            }
            try FileManager.default.removeItem(atPath: filler)
            let store = try ArchiveStore(directory: path)
            #expect(store.pendingRecovery == nil)
            #expect(try store.keys(of: Person.self).count == 41)
            for (index, bytes) in landed.enumerated() {
                #expect(try store.data(for: ObjectID(collection: "Person", key: "n\(index)")) == bytes)
            }
            #expect(try store.manifest.read { try $0.intents() }.isEmpty)
            #expect(try store.verify().isClean)
        }
    }

    /// A store left open while its recovery waits completes it at its next write, once space
    /// has been freed: the write goes ahead after what the interrupted write left is recorded.
    @Test func theNextWriteCompletesAWaitingRecoveryOnceSpaceIsFreed() throws {
        try withSmallDisk { disk throws in
            let path = disk + "/store"
            _ = try interruptedWrite(in: path)
            let filler = try fill(disk)
            let store = try ArchiveStore(directory: path)
            #expect(store.pendingRecovery != nil)
            try FileManager.default.removeItem(atPath: filler)
            try store.save(Person(name: "b", age: 2), forKey: "b")
            #expect(store.pendingRecovery == nil)
            #expect(try store.keys(of: Person.self).count == 42)
        }
    }
}
