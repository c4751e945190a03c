import Foundation
import TestSupport
import Testing

@testable import ArchiveStore

#if canImport(Glibc)
    import Glibc
#endif

// A store with a damaged manifest row, or one whose last sync failed on a full disk: every
// command that can still do its job does it, and the others say exactly what stands in the way.

@Suite("Damaged and full stores")
struct DamagedStoreTests {
    /// The issue's reproduction: a row whose file is `../../secret.txt`. `rm` is refused with a
    /// sentence naming the object and its row, and changes nothing (the object is still
    /// counted and listed, no intent is left); every other command keeps working.
    @Test func rmOfADamagedRowIsRefusedAndChangesNothing() throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("Person/p1", #"{"a":1}"#)
        try store.put("Person/p2", #"{"a":2}"#)
        try writeFile(store.directory + "/secret.txt", "secret")  // where the row leads, from Person/
        let manifest = store.path + "/.archive-sync/manifest.sqlite"
        try SQLiteConnection(path: manifest).run("UPDATE objects SET file = '../../secret.txt' WHERE key = 'p1'")

        let removed = try store.run("rm", "Person/p1")
        #expect(removed.status == 1, "\(removed)")
        #expect(removed.errorOutput.contains("the manifest's row for Person/p1 is damaged"), "\(removed)")
        #expect(removed.errorOutput.contains("'../../secret.txt'"), "\(removed)")
        #expect(try store.status()["objects"] as? Int == 2)
        #expect(try store.run("ls", "Person").output.contains("Person/p1"))
        #expect(try SQLiteConnection(path: manifest).first("SELECT count(*) FROM intents") { $0.int(0) } == 0)
        #expect(try String(contentsOfFile: store.directory + "/secret.txt", encoding: .utf8) == "secret")

        for command in [["ls", "Person"], ["get", "Person/p2"], ["status"], ["history", "Person/p1"]] {
            let result = try runArchiveSync([command[0], store.path] + command.dropFirst())
            #expect(result.status == 0, "\(command): \(result)")
        }
        try store.put("Person/p3", #"{"a":3}"#)
        let verified = try store.run("verify")
        #expect(verified.status == 1 && verified.output.contains("Person/p1"), "\(verified)")
        for result in [removed, verified] { #expect(!(result.output + result.errorOutput).contains("cross-device"), "\(result)") }
    }

    /// The issue's reproduction: a sync into a store on a small disk fails when the disk
    /// fills. Its pages are staged before their one commit, so the failure leaves the store as
    /// it was, nothing for recovery to wait for: reads work and report nothing, a small write
    /// still fits, and once there is room the sync run again completes, losing nothing.
    @Test func aSyncThatFailedOnAFullDiskLeavesTheStoreReadable() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let disk = directory + "/disk"
        try FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: false)
        try #require(mount("tmpfs", disk, "tmpfs", 0, "size=2m") == 0, "mount: \(String(cString: strerror(errno)))")
        defer { umount(disk) }
        let a = directory + "/a"
        let b = disk + "/b"
        try ArchiveStore(directory: a).batch { batch in
            for index in 0..<63 {
                try batch.save(Padded(index: index, pad: String(repeating: "x", count: 16_000)), forKey: "p\(index)", in: "Person")
            }
        }
        try #require(try runArchiveSync(["init", b]).status == 0)
        let failed = try runArchiveSync(["sync", a, b])
        try #require(failed.status == 1, "\(failed)")

        // Nothing of the failed sync is left: no object, no file, no recovery waiting.
        for (command, status) in [(["ls"], 0), (["status"], 0), (["verify"], 0), (["get", "Person/p0"], 2)] {
            let result = try runArchiveSync([command[0], b] + command.dropFirst())
            #expect(result.status == status, "\(command): \(result)")
            #expect(!result.errorOutput.contains("recovery"), "\(command): \(result)")
            if command == ["verify"] { #expect(result.output.contains("0 objects") && !result.output.contains("untracked"), "\(result)") }
            if command[0] == "get" { #expect(result.errorOutput.contains("Person/p0 does not exist"), "\(result)") }
        }
        let put = try runArchiveSync(["put", b, "Person/new"], stdin: Data("{}".utf8))
        #expect(put.status == 0, "\(put)")

        try #require(mount("tmpfs", disk, "tmpfs", UInt(MS_REMOUNT), "size=8m") == 0, "remount: \(String(cString: strerror(errno)))")
        let again = try runArchiveSync(["sync", a, b])
        #expect(again.status == 0, "\(again)")
        let listed = try runArchiveSync(["ls", b, "Person"])
        #expect(listed.status == 0 && listed.errorOutput.isEmpty, "\(listed)")
        #expect(listed.output.split(separator: "\n").count == 65, "\(listed)")  // a header, 63 objects and `new`
        let verified = try runArchiveSync(["verify", b])
        #expect(verified.status == 0 && verified.output.contains("64 objects"), "\(verified)")
    }
}

/// An object of about 16 KB.
private struct Padded: Codable {
    var index: Int
    var pad: String
}
