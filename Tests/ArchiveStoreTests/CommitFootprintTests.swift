import Foundation
import Testing

@testable import ArchiveStore

#if canImport(Glibc)
    import Glibc
#endif

/// What a save leaves on the inodes around the manifest: its stamp comes from what it set, not
/// from reading the file's times back, and its commit is announced without setting a time on
/// `writer.lock`. Either would dirty the inode table block that holds the WAL's inode, which
/// every commit's `fdatasync` then writes as well on ext4 without a journal (docs/choices.md).
@Suite struct CommitFootprintTests {
    /// A save's recorded stamp is exactly what `stat` reads from the file it put in place:
    /// size, mtime to the nanosecond, and inode.
    @Test func aSavesStampIsItsFiles() throws {
        try withStore { store, path in
            try store.save(Person(name: "Ada", age: 36), forKey: "ada")
            let row = try #require(try store.manifest.read { try $0.object(ObjectID(unchecked: "Person", key: "ada")) })
            var info = stat()
            #expect(stat(path + "/Person/ada.json", &info) == 0)
            let stamp = try #require(row.stamp)
            #expect(stamp == FileStamp(info))
            // Set by the save, within the racy window of now: the next scan reads the file.
            #expect(row.racy)
        }
    }

    /// A save that gives its file a time (a sync's, as `rsync -a` keeps times) records that
    /// time, and its stamp is trusted at once.
    @Test func aGivenTimeIsTheStampsTime() throws {
        try withStore { store, path in
            let modified: Int64 = 1_600_000_000_123_456_789
            var vector = VersionVector()
            vector.increment(store.manifest.replica)
            var write = PendingWrite(id: ObjectID(unchecked: "Person", key: "old"), file: "old.json", content: Data("{\"name\":\"Old\"}".utf8))
            write.incoming = ReplicatedVersion(vector: vector, modified: modified, author: store.manifest.replica)
            try store.apply([write])
            let row = try #require(try store.manifest.read { try $0.object(ObjectID(unchecked: "Person", key: "old")) })
            var info = stat()
            #expect(stat(path + "/Person/old.json", &info) == 0)
            #expect(Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec) == modified)
            #expect(try #require(row.stamp) == FileStamp(info))
            #expect(!row.racy)
        }
    }

    /// A commit is announced by opening `writer.lock` read-only and closing it, after the
    /// commit is visible; the file's times stay as they were.
    @Test func theAnnouncementChangesNoTime() throws {
        try withStore { store, path in
            try store.save(Person(name: "Ada", age: 36), forKey: "ada")
            let lock = path + "/.archive-sync/writer.lock"
            var before = stat()
            #expect(stat(lock, &before) == 0)
            let inotify = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
            #expect(inotify >= 0)
            defer { close(inotify) }
            #expect(inotify_add_watch(inotify, path + "/.archive-sync", UInt32(IN_CLOSE_NOWRITE | IN_ATTRIB)) >= 0)
            try store.save(Person(name: "Grace", age: 45), forKey: "grace")
            var after = stat()
            #expect(stat(lock, &after) == 0)
            #expect(after.st_mtim.tv_sec == before.st_mtim.tv_sec && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec)
            #expect(after.st_ctim.tv_sec == before.st_ctim.tv_sec && after.st_ctim.tv_nsec == before.st_ctim.tv_nsec)
            let events = Self.events(inotify)
            #expect(events.contains { $0.name == "writer.lock" && $0.mask & UInt32(IN_CLOSE_NOWRITE) != 0 }, "\(events)")
            #expect(!events.contains { $0.mask & UInt32(IN_ATTRIB) != 0 }, "\(events)")
        }
    }

    /// The inotify events waiting on `fd`, each its name and mask.
    private static func events(_ fd: Int32) -> [(name: String, mask: UInt32)] {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
        var found: [(name: String, mask: UInt32)] = []
        var offset = 0
        let header = MemoryLayout<inotify_event>.size
        while count > 0 && offset + header <= count {
            let event = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: inotify_event.self) }
            let name = String(decoding: buffer[(offset + header)..<(offset + header + Int(event.len))].prefix { $0 != 0 }, as: UTF8.self)
            found.append((name, event.mask))
            offset += header + Int(event.len)
        }
        return found
    }
}
