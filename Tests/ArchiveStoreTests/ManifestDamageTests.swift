import Foundation
import TestSupport
import Testing

@testable import ArchiveStore

#if canImport(Glibc)
    import Glibc
#endif

/// A store whose manifest is missing, empty or damaged is refused, changing nothing, and
/// `repair` rebuilds it with the same replica id.
@Suite struct ManifestDamageTests {
    /// Ways a manifest is lost or damaged, each applied to a closed store at `path`.
    static let damages: [(name: String, damage: @Sendable (String) throws -> Void)] = [
        (
            "removed",
            { path in
                for suffix in ["", "-wal", "-shm"] { unlink(path + "/.archive-sync/manifest.sqlite" + suffix) }
            }
        ),
        ("truncated", { path in try Data().write(to: URL(fileURLWithPath: path + "/.archive-sync/manifest.sqlite")) }),
        ("meta rows deleted", { path in try SQLiteConnection(path: path + "/.archive-sync/manifest.sqlite").execute("DELETE FROM meta") }),
        (
            "not a database",
            { path in
                for suffix in ["-wal", "-shm"] { unlink(path + "/.archive-sync/manifest.sqlite" + suffix) }
                try Data(repeating: 0x5A, count: 8192).write(to: URL(fileURLWithPath: path + "/.archive-sync/manifest.sqlite"))
            }
        ),
    ]

    @Test(arguments: 0..<4)
    func aDamagedManifestIsRefusedAndNothingChanges(_ index: Int) throws {
        let (name, damage) = Self.damages[index]
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            do {
                let store = try ArchiveStore(directory: path)
                try store.save(Person(name: "A", age: 1), forKey: "a")
            }
            try damage(path)
            let before = try snapshot(path)
            for create in [false, true] {
                guard
                    case .damagedManifest(let store, let problem)? = archiveError({
                        try ArchiveStore(directory: path, options: .init(create: create))
                    })
                else {
                    Issue.record("\(name): a store whose manifest is \(name) was opened (create: \(create))")
                    continue
                }
                #expect(store == path)
                let message = ArchiveError.damagedManifest(store: store, problem: problem).description
                #expect(message.contains("run `archive-sync repair \(path)`"), "\(name): \(message)")
            }
            #expect(try snapshot(path) == before, "\(name): opening changed the store")
        }
    }

    @Test(arguments: 0..<4)
    func repairKeepsTheReplicaIDAndRecordsEveryObject(_ index: Int) throws {
        let (name, damage) = Self.damages[index]
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            let replica: ReplicaID
            do {
                let store = try ArchiveStore(directory: path)
                replica = store.replica
                for key in ["a", "b", "c"] { try store.save(Person(name: key, age: 1), forKey: key) }
                try store.save(Person(name: "a", age: 2), forKey: "a")
                try store.put(Data(#"{"n":1}"#.utf8), as: ObjectID(collection: "Other", key: "x"))
            }
            try damage(path)
            let report = try ArchiveStore.repair(directory: path)
            #expect(report.replica == replica, "\(name)")
            #expect(report.replicaSource == .replicaFile, "\(name)")
            #expect(report.objects == 4, "\(name)")
            #expect(!report.notRecovered.isEmpty)
            if name != "removed" {
                // Moved aside, bytes intact, never deleted.
                #expect(report.movedAside.contains { entryExists(path + "/.archive-sync/" + $0) && !$0.hasSuffix("-shm") })
            }
            let store = try ArchiveStore(directory: path, options: .init(create: false))
            #expect(store.replica == replica)
            #expect(try store.keys(of: Person.self) == ["a", "b", "c"])
            #expect(try store.load(Person.self, forKey: "a") == Person(name: "a", age: 2))
            #expect(try store.history(of: Person.self, forKey: "a").map(\.version) == [1])
            #expect(try store.verify().isClean)
            // A manifest that opens is not rebuilt without force.
            guard case .invalidInput? = archiveError({ try ArchiveStore.repair(directory: path) }) else {
                Issue.record("repair rebuilt a manifest that was not damaged")
                return
            }
        }
    }

    @Test func aStoreMadeBeforeTheReplicaFileGainsItAndRepairKeepsItsID() throws {
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            let replica = try ArchiveStore(directory: path).replica
            try FileManager.default.removeItem(atPath: path + "/.archive-sync/replica")  // as an older release made it
            _ = try ArchiveStore(directory: path, options: .init(create: false))
            #expect(try String(contentsOfFile: path + "/.archive-sync/replica", encoding: .utf8) == replica.rawValue + "\n")
        }
    }

    @Test func aManifestOfAnotherReplicaIsRefused() throws {
        try withTemporaryDirectory { dir throws in
            _ = try ArchiveStore(directory: dir + "/a")
            _ = try ArchiveStore(directory: dir + "/b")
            try FileManager.default.removeItem(atPath: dir + "/b/.archive-sync/replica")
            try FileManager.default.copyItem(atPath: dir + "/a/.archive-sync/replica", toPath: dir + "/b/.archive-sync/replica")
            guard case .damagedManifest? = archiveError({ try ArchiveStore(directory: dir + "/b") }) else {
                Issue.record("a manifest whose replica id is not the store's was opened")
                return
            }
        }
    }

    @Test func onlyAStoreThatNeverHadAManifestGetsANewOne() throws {
        try withTemporaryDirectory { dir throws in
            // An interrupted create: an empty metadata directory and a dead creator's temp file.
            let path = dir + "/store"
            try FileManager.default.createDirectory(atPath: path + "/.archive-sync", withIntermediateDirectories: true)
            let leftover = path + "/.archive-sync/manifest.sqlite.new.999999.1.1"
            try Data("half".utf8).write(to: URL(fileURLWithPath: leftover))
            let store = try ArchiveStore(directory: path)
            #expect(!entryExists(leftover))
            try store.save(Person(name: "A", age: 1), forKey: "a")

            // An empty metadata directory beside objects is a store that lost its manifest.
            let other = dir + "/other"
            try FileManager.default.createDirectory(atPath: other + "/.archive-sync", withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: other + "/Person", withIntermediateDirectories: true)
            try Data(#"{"age":1,"name":"A"}"#.utf8).write(to: URL(fileURLWithPath: other + "/Person/a.json"))
            guard case .damagedManifest? = archiveError({ try ArchiveStore(directory: other) }) else {
                Issue.record("a store with objects and no manifest got a new one")
                return
            }
            #expect(!entryExists(other + "/.archive-sync/manifest.sqlite"))

            // A directory of archives with no metadata directory at all is adopted.
            try FileManager.default.removeItem(atPath: other + "/.archive-sync")
            let adopted = try ArchiveStore(directory: other)
            #expect(try adopted.scan().created == 1)
        }
    }

    @Test func concurrentCreatesShareOneManifest() async throws {
        try await withTemporaryDirectory { dir in
            let path = dir + "/store"
            let replicas = try await withThrowingTaskGroup(of: ReplicaID.self) { group in
                for _ in 0..<8 { group.addTask { try ArchiveStore(directory: path).replica } }
                return try await group.reduce(into: Set<ReplicaID>()) { $0.insert($1) }
            }
            #expect(replicas.count == 1)
            #expect(try FileManager.default.contentsOfDirectory(atPath: path + "/.archive-sync").allSatisfy { !$0.contains(".new.") })
        }
    }

    /// Every entry under `path` with its bytes (nil for a directory).
    private func snapshot(_ path: String) throws -> [String: Data?] {
        var entries: [String: Data?] = [:]
        for relative in try FileManager.default.subpathsOfDirectory(atPath: path) {
            var isDirectory: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: path + "/" + relative, isDirectory: &isDirectory)
            entries[relative] = .some(isDirectory.boolValue ? nil : try contents(of: path + "/" + relative))
        }
        return entries
    }
}

/// A store on a read-only file system opens to read; recovery, which writes, waits.
@Suite(.enabled(if: geteuid() == 0, "mounts a tmpfs: needs root"))
struct ReadOnlyOpenTests {
    @Test func anInterruptedWriteOnAReadOnlyStoreIsLeftAndCounted() throws {
        try withTemporaryDirectory { dir throws in
            let mount = dir + "/mnt"
            try FileManager.default.createDirectory(atPath: mount, withIntermediateDirectories: false)
            try run("/usr/bin/mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mount)
            defer { try? run("/usr/bin/umount", "-l", mount) }
            let path = mount + "/store"
            do {
                let store = try ArchiveStore(directory: path)
                try store.save(Person(name: "old", age: 1), forKey: "x")
                let dead = ProcessIdentity(pid: deadProcessID(), startTime: 1)
                let entry = WriteIntent.Entry(
                    collection: "Person", key: "x", file: "x.json", temp: "\(FileName.tempPrefix)\(dead.pid).1.1",
                    hash: ContentHash(of: Data("new".utf8)))
                _ = try store.manifest.write { try $0.addIntent([entry], owner: dead) }
            }
            try run("/usr/bin/mount", "-o", "remount,ro", mount)

            let store = try ArchiveStore(directory: path, options: .init(create: false))
            #expect(store.isReadOnly)
            #expect(store.interruptedWrites == 1)
            #expect(try store.load(Person.self, forKey: "x") == Person(name: "old", age: 1))
            guard case .readOnly? = archiveError({ try store.save(Person(name: "new", age: 2), forKey: "x") }) else {
                Issue.record("a save into a read-only store was not refused as read-only")
                return
            }
        }
    }

    private func run(_ executable: String, _ arguments: String...) throws {
        let result = try TestSupport.run(executable, arguments)
        try #require(result.status == 0, "\(executable) \(arguments) failed: \(result)")
    }
}
