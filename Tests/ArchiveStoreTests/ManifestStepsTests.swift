import Foundation
import TestSupport
import Testing

@testable import ArchiveStore

#if canImport(Glibc)
    import Glibc
#endif

/// The manifest's schema steps are counted in `PRAGMA user_version`; a store made before they
/// were (it reads 0) is used as it is, and counted by the first process that can write it.
@Suite("Store: the manifest's schema steps") struct ManifestStepsTests {
    private static func recordedSteps(_ path: String) throws -> Int64? {
        try SQLiteConnection(path: path + "/.archive-sync/manifest.sqlite").first("PRAGMA user_version") { $0.int(0) }
    }

    @Test func aStoreMadeBeforeStepsWereCountedIsCountedWhenOpened() throws {
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            try ArchiveStore(directory: path).save(Person(name: "Ada", age: 36), forKey: "ada")
            #expect(try Self.recordedSteps(path) == Int64(Manifest.migrations.count))
            try SQLiteConnection(path: path + "/.archive-sync/manifest.sqlite").execute("PRAGMA user_version = 0")

            let store = try ArchiveStore(directory: path)
            #expect(try Self.recordedSteps(path) == Int64(Manifest.migrations.count))
            #expect(try store.load(Person.self, forKey: "ada") == Person(name: "Ada", age: 36))
            #expect(try store.scan().changes.isEmpty)
        }
    }

    /// On a read-only file system nothing can be counted; a store that has everything the
    /// steps make still opens (as it did before they were counted).
    @Test(.enabled(if: geteuid() == 0, "mounts a tmpfs: needs root"))
    func aStoreMadeBeforeStepsWereCountedOpensReadOnly() throws {
        try withTemporaryDirectory { dir throws in
            let mount = dir + "/mnt"
            try FileManager.default.createDirectory(atPath: mount, withIntermediateDirectories: false)
            try shell("mount -t tmpfs -o size=8m tmpfs '\(mount)'")
            defer { try? shell("umount -l '\(mount)'") }
            let path = mount + "/store"
            try ArchiveStore(directory: path).save(Person(name: "Ada", age: 36), forKey: "ada")
            try SQLiteConnection(path: path + "/.archive-sync/manifest.sqlite").execute("PRAGMA user_version = 0")
            try shell("mount -o remount,ro '\(mount)'")

            let store = try ArchiveStore(directory: path, options: .init(create: false))
            #expect(store.isReadOnly)
            #expect(try store.load(Person.self, forKey: "ada") == Person(name: "Ada", age: 36))
        }
    }

    private func shell(_ command: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        try process.run()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "\(command) failed")
    }
}
