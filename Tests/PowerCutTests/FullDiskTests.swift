import Foundation
import TestSupport
import Testing

/// Tests/PowerCut/faults.c, the write-fault library the simulator preloads.
private let faultsSource = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("PowerCut/faults.c")

/// Compiles the faults library into `directory`; returns its path.
private func compileFaults(in directory: String) throws -> String {
    let library = directory + "/faults.so"
    let compiler = try run("/bin/sh", ["-c", "cc -O1 -shared -fPIC -o '\(library)' '\(faultsSource.path)' -ldl"])
    try #require(compiler.status == 0, "\(compiler)")
    return library
}

/// A full or failing disk, with the faults library standing in for it: from the first call on,
/// every create fails with ENOSPC (no inode left) or every write does (no block left); or one
/// chosen call fails with EIO.
@Suite("Full disk")
struct FullDiskTests {
    /// A new store whose entry in its parent could not be flushed: the error names the store
    /// (it named only the parent: "fsync(/srv/) failed: Input/output error").
    @Test func aStoreThatCouldNotBeCreatedIsNamed() async throws {
        try await withTemporaryDirectory { directory in
            let library = try compileFaults(in: directory)
            let archiveSync = try #require(builtProduct(named: "archive-sync"), "archive-sync is not built")
            // Counted under the directory: 1, mkdir of the directory (there already); 2, mkdir
            // of the store; 3, the flush of the directory that makes the store's name durable.
            let environment = [
                "POWER_CUT_ROOT=\(directory)", "POWER_CUT_FAULT=EIO:3", "POWER_CUT_FAULT_COUNTER=\(directory)/counter", "LD_PRELOAD=\(library)",
            ]
            let made = try await offPool { try run("/usr/bin/env", environment + [archiveSync, "init", directory + "/S"]) }
            let fired = (try? String(contentsOfFile: directory + "/counter.fired", encoding: .utf8)) ?? ""
            try #require(fired.contains("fsync \(directory)"), "the third call is no longer the flush of the parent: \(fired)")
            #expect(made.status == 1, "\(made)")
            #expect(made.errorOutput.contains("the store \(directory)/S could not be created: fsync(\(directory)"), "\(made)")
            #expect(made.errorOutput.contains("Input/output error"), "\(made)")
        }
    }

    /// A store whose manifest has a `-wal` but no `-shm` index (a power cut lost the index's
    /// name, which SQLite never flushes) is read on a disk with no inode left to make the index
    /// again: the manifest is opened in exclusive locking mode, with its index in memory.
    /// Before, SQLite's "unable to open database file" failed every read.
    @Test func aStoreCanBeReadOnADiskWithNoInodeLeft() async throws {
        try await withTemporaryDirectory { directory in
            let store = directory + "/S"
            let object = directory + "/object.json"
            try Data(#"{"name":"Ada"}"#.utf8).write(to: URL(fileURLWithPath: object))
            #expect(try runArchiveSync(["init", store]).status == 0)
            #expect(try runArchiveSync(["put", store, "Person/p1", "--file", object]).status == 0)
            let manifest = store + "/.archive-sync/manifest.sqlite"
            try? FileManager.default.removeItem(atPath: manifest + "-shm")
            #expect(FileManager.default.createFile(atPath: manifest + "-wal", contents: Data()))

            let library = try compileFaults(in: directory)
            let archiveSync = try #require(builtProduct(named: "archive-sync"), "archive-sync is not built")
            for disk in ["no-inodes", "full"] {
                let environment = [
                    "POWER_CUT_ROOT=\(directory)", "POWER_CUT_FAULT=ENOSPC:1:\(disk)", "POWER_CUT_FAULT_COUNTER=\(directory)/counter-\(disk)",
                    "LD_PRELOAD=\(library)",
                ]
                let listed = try await offPool { try run("/usr/bin/env", environment + [archiveSync, "ls", store, "Person"]) }
                #expect(listed.status == 0 && listed.output.contains("p1"), "on a disk out of \(disk): \(listed)")
                let fired = (try? String(contentsOfFile: "\(directory)/counter-\(disk).fired", encoding: .utf8)) ?? ""
                #expect(!fired.isEmpty, "no call failed: the test no longer reaches the full disk")
            }
        }
    }
}
