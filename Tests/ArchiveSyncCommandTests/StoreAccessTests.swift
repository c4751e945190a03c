import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

// A store whose manifest was removed is refused and repaired; a read-only store can be read
// but not written. Real processes: the built binary, a tmpfs remounted read-only, and the
// user `nobody`.

@Suite struct ManifestRepairCommandTests {
    @Test func aRemovedManifestIsRefusedAndRepairRebuildsItWithTheSameReplica() throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("Person/a", #"{"name":"a"}"#)
        try store.put("Person/b", #"{"name":"b"}"#)
        let metadata = store.path + "/.archive-sync"
        for suffix in ["", "-wal", "-shm"] { unlink(metadata + "/manifest.sqlite" + suffix) }
        let before = try FileManager.default.contentsOfDirectory(atPath: metadata).sorted()

        for command in [["verify"], ["status"], ["ls"], ["put", "Person/c"], ["scan"]] {
            let refused = try runArchiveSync([command[0], store.path] + command.dropFirst(), stdin: Data("{}".utf8))
            #expect(refused.status == 2, "\(command): \(refused)")
            #expect(refused.errorOutput.contains("manifest (.archive-sync/manifest.sqlite) is missing"), "\(refused)")
            #expect(refused.errorOutput.contains("run `archive-sync repair \(store.path)`"), "\(refused)")
            #expect(refused.errorOutput.split(separator: "\n").count == 1, "\(refused)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: metadata).sorted() == before)

        let repaired = try store.run("repair", "--json")
        #expect(repaired.status == 0, "\(repaired)")
        let report = try #require(try parseJSON(repaired) as? [String: Any], "\(repaired)")
        #expect(report["replica"] as? String == store.replica)
        #expect(report["objects"] as? Int == 2)
        #expect((report["notRecovered"] as? [String])?.contains { $0.hasPrefix("history") } == true)

        let status = try store.status()
        #expect(status["replica"] as? String == store.replica)
        #expect(status["objects"] as? Int == 2)
        #expect(try store.get("Person/b") == Data(#"{"name":"b"}"#.utf8))
        #expect(try store.run("verify").status == 0)
        // Nothing left to repair: refused, changing nothing.
        #expect(try store.run("repair").status == 2)
    }
}

/// Runs as root only: mounting needs it, and `nobody` is reached with setpriv.
@Suite(.enabled(if: geteuid() == 0, "mounts a tmpfs and switches to nobody: needs root"))
struct ReadOnlyStoreTests {
    /// Reads that must work on a read-only store, and writes that must be refused.
    private func checkReadOnly(_ path: String, as user: [String] = [], sourceLocation: SourceLocation = #_sourceLocation) throws {
        func run(_ arguments: [String], stdin: Data? = nil) throws -> CommandResult {
            guard !user.isEmpty else { return try runArchiveSync(arguments, stdin: stdin) }
            return try RunningCommand(user + [try #require(archiveSyncBinary)] + arguments, stdin: stdin, executable: "/usr/bin/setpriv").wait()
        }
        for read in [
            ["ls", path], ["ls", path, "Person"], ["get", path, "Person/a"], ["history", path, "Person/a"], ["status", path], ["verify", path],
        ] {
            let result = try run(read)
            #expect(result.status == 0, "\(read): \(result)", sourceLocation: sourceLocation)
        }
        #expect(try run(["get", path, "Person/a"]).output == #"{"name":"a2"}"#, sourceLocation: sourceLocation)
        #expect(try run(["get", path, "Person/a", "--version", "1"]).output == #"{"name":"a"}"#, sourceLocation: sourceLocation)
        for write in [["put", path, "Person/n"], ["rm", path, "Person/a"], ["scan", path], ["restore", path, "Person/a", "--version", "1"]] {
            let result = try run(write, stdin: Data("{}".utf8))
            #expect(result.status == 1, "\(write): \(result)", sourceLocation: sourceLocation)
            #expect(result.errorOutput.contains("\(path) is read-only"), "\(write): \(result)", sourceLocation: sourceLocation)
            #expect(result.errorOutput.split(separator: "\n").count == 1, "\(write): \(result)", sourceLocation: sourceLocation)
        }
        // Sync into it, from a store this user can write.
        let into = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: into) }
        chmod(into, 0o777)
        #expect(try run(["init", into + "/other"]).status == 0, sourceLocation: sourceLocation)
        #expect(try run(["put", into + "/other", "Person/o"], stdin: Data("{}".utf8)).status == 0, sourceLocation: sourceLocation)
        let sync = try run(["sync", into + "/other", path])
        #expect(sync.status == 1 && sync.errorOutput.contains("\(path) is read-only"), "\(sync)", sourceLocation: sourceLocation)
    }

    /// Makes a store at `path` with one object of two versions and one of one.
    private func makeStore(_ path: String) throws {
        #expect(try runArchiveSync(["init", path]).status == 0)
        for (id, text) in [("Person/a", #"{"name":"a"}"#), ("Person/a", #"{"name":"a2"}"#), ("Person/b", #"{"name":"b"}"#)] {
            let put = try runArchiveSync(["put", path, id], stdin: Data(text.utf8))
            try #require(put.status == 0, "\(put)")
        }
    }

    @Test func aStoreOnAFileSystemRemountedReadOnlyCanBeReadButNotWritten() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let mount = directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mount, withIntermediateDirectories: false)
        let mounted = try Tool.run("/usr/bin/mount", ["-t", "tmpfs", "-o", "size=16m", "tmpfs", mount])
        try #require(mounted.status == 0, "\(mounted)")
        defer { _ = try? Tool.run("/usr/bin/umount", ["-l", mount]) }
        try makeStore(mount + "/store")
        let remounted = try Tool.run("/usr/bin/mount", ["-o", "remount,ro", mount])
        try #require(remounted.status == 0, "\(remounted)")
        try checkReadOnly(mount + "/store")
    }

    @Test func aStoreThisUserMayNotWriteCanBeReadButNotWritten() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try makeStore(directory + "/store")
        chmod(directory, 0o755)  // nobody must reach the store
        let locked = try Tool.run("/usr/bin/chmod", ["-R", "a-w", directory + "/store"])
        try #require(locked.status == 0, "\(locked)")
        defer { _ = try? Tool.run("/usr/bin/chmod", ["-R", "u+w", directory + "/store"]) }
        try checkReadOnly(directory + "/store", as: ["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
    }
}

/// A system tool run to set a test up (mount, chmod): its status and what it printed.
private enum Tool {
    static func run(_ executable: String, _ arguments: [String]) throws -> CommandResult {
        try RunningCommand(arguments, executable: executable).wait()
    }
}
