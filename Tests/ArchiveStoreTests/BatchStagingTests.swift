import Foundation
import TestSupport
import Testing

@testable import ArchiveStore

#if canImport(Glibc)
    import Glibc
#endif

private struct Stop: Error {}

/// A large batch stages its files on a second thread while its body still encodes the rest
/// (``BatchStager``): what that must keep of a batch's promises.
@Suite(.enabled(if: ProcessInfo.processInfo.activeProcessorCount > 1, "the stager runs only with a second core"))
struct BatchStagingTests {
    /// What is in `.archive-sync/staging`: its files and directories, and what those hold.
    private static func staging(_ path: String) -> String { path + "/" + FileName.metadataDirectory + "/staging" }

    /// The inode of `path` (0 when there is nothing there).
    private static func inode(_ path: String) -> UInt64 {
        var info = stat()
        return lstat(path, &info) == 0 ? UInt64(info.st_ino) : 0
    }

    /// The directories in `.archive-sync/staging`.
    private static func stagedDirectories(_ path: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: staging(path))) ?? []).filter {
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: staging(path) + "/" + $0, isDirectory: &isDirectory) && isDirectory.boolValue
        }
    }

    /// Waits up to 20 s (a loaded machine) until `count` files are staged; whether they were.
    private static func waitForStaged(_ path: String, atLeast count: Int) -> Bool {
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if stagedEntries(path).count >= count { return true }
            usleep(2_000)
        }
        return false
    }

    // The bodies run off the cooperative pool (they wait on a thread and on files) and return
    // what they saw; the expectations are checked on the test's own task.

    @Test func aLargeBatchStagesItsFilesWhileItsBodyStillRuns() async throws {
        let seen = try await offPool {
            try withStore { store, path throws in
                var stagedDuringBody = false
                try store.batch { tx in
                    for index in 0..<400 { try tx.save(Person(name: "p\(index)", age: index), forKey: "k\(index)") }
                    stagedDuringBody = Self.waitForStaged(path, atLeast: 400)
                    for index in 400..<600 { try tx.save(Person(name: "p\(index)", age: index), forKey: "k\(index)") }
                }
                // `verify` checks the hashes the stager computed against the files.
                return [
                    stagedDuringBody, stagedEntries(path).isEmpty, try store.keys(of: Person.self).count == 600,
                    try store.load(Person.self, forKey: "k599") == Person(name: "p599", age: 599), try store.verify().isClean,
                    try store.objects(in: "Person").allSatisfy { $0.version == 1 },
                ]
            }
        }
        #expect(seen == [true, true, true, true, true, true])
    }

    @Test func aLargeBatchWhoseBodyThrowsAfterStagingBeganLeavesNothing() async throws {
        let seen = try await offPool {
            try withStore { store, path throws in
                var stagedBeforeThrowing = false
                var threw = false
                do {
                    try store.batch { tx in
                        for index in 0..<400 { try tx.save(Person(name: "p", age: index), forKey: "k\(index)") }
                        stagedBeforeThrowing = Self.waitForStaged(path, atLeast: 400)
                        throw Stop()
                    }
                } catch is Stop {
                    threw = true
                }
                return [
                    stagedBeforeThrowing, threw, stagedEntries(path).isEmpty, filesInStore(path).isEmpty,
                    try store.keys(of: Person.self).isEmpty, try store.status().sequence == 0,
                ]
            }
        }
        #expect(seen == [true, true, true, true, true, true])
    }

    /// A file the stager cannot create (here: its temp name taken) fails the whole batch, and
    /// the stager's other files go with it. (The collection exists, so files are staged
    /// under temp names, not in a directory of the collection's own.)
    @Test func aLargeBatchWhoseStagingFailsStoresNothingAndLeavesNoStagedFile() async throws {
        let seen = try await offPool {
            try withStore { store, path throws in
                try store.save(Person(name: "seed", age: 0), forKey: "seed")
                let staging = Self.staging(path)
                var taken: Set<String> = []
                var failed = false
                do {
                    try store.batch { tx in
                        for index in 0..<300 { try tx.save(Person(name: "p", age: index), forKey: "k\(index)") }
                        // The temp names the next writes of this process take (tempName counts up;
                        // other tests' writes may take some of them first).
                        let next = store.tempName()
                        let dot = next.lastIndex(of: ".")!
                        let counter = Int(next[next.index(after: dot)...])!
                        taken = Set((counter + 1...counter + 2_000).map { "\(next[..<dot]).\($0)" })
                        for name in taken { _ = FileManager.default.createFile(atPath: staging + "/" + name, contents: Data()) }
                        for index in 300..<1_000 { try tx.save(Person(name: "p", age: index), forKey: "k\(index)") }
                    }
                } catch is ArchiveError {
                    failed = true
                }
                return [
                    failed, Set(stagedEntries(path)).isSubset(of: taken), filesInStore(path) == ["Person", "Person/seed.json"],
                    try store.keys(of: Person.self) == ["seed"],
                ]
            }
        }
        #expect(seen == [true, true, true, true])
    }

    /// The commit records each write as soon as it is staged: a write it refuses (its row is
    /// damaged) ends the batch while files are still being staged, and every one goes.
    @Test func aLargeBatchRefusedWhileItsFilesAreStillStagedLeavesNothing() async throws {
        let seen = try await offPool {
            try withStore { store, path throws in
                try store.batch { tx in
                    for index in 0..<2_000 { try tx.save(Person(name: "old", age: index), forKey: "k\(index)") }
                }
                try store.writeManifest { try $0.run("UPDATE objects SET file = '../../outside.json' WHERE key = 'k10'") }
                var refused = false
                do {
                    try store.batch { tx in
                        for index in 0..<2_000 { try tx.save(Person(name: "new", age: index), forKey: "k\(index)") }
                    }
                } catch ArchiveError.damagedRecord {
                    refused = true
                }
                return [
                    refused, stagedEntries(path).isEmpty, filesInStore(path).count == 2_001,
                    try store.load(Person.self, forKey: "k1999") == Person(name: "old", age: 1999),
                    try store.objects(in: "Person").allSatisfy { $0.version == 1 }, try store.status().sequence == 2_000,
                ]
            }
        }
        #expect(seen == [true, true, true, true, true, true])
    }

    /// A sync's page of 256 writes or more is staged by a stager too, but never as a whole
    /// collection: each conditional write is checked against its own file on disk, so one
    /// whose file another program wrote meanwhile is skipped, and the rest go ahead.
    @Test func aLargeSyncPageIsStagedFileByFileAndChecksEachFile() async throws {
        let seen = try await offPool {
            try withStore { store, path throws in
                let id = { (index: Int) in try ObjectID(collection: "Person", key: "k\(index)") }
                let writes = try (0..<300).map { index in
                    ConditionalWrite(id: try id(index), content: try ArchiveCodec.json.encode(Person(name: "p", age: index)), expected: nil)
                }
                // Written on disk by another program, and not yet scanned: the page must not overwrite it.
                try FileManager.default.createDirectory(atPath: path + "/Person", withIntermediateDirectories: false)
                try writeFile(path + "/Person/k7.json", Data("{}".utf8))
                let versions = try store.applyConditional(writes)
                return [
                    versions.enumerated().allSatisfy { $0.offset == 7 ? $0.element == nil : $0.element == 1 },
                    try Data(contentsOf: URL(fileURLWithPath: path + "/Person/k7.json")) == Data("{}".utf8),
                    try store.load(Person.self, forKey: "k299") == Person(name: "p", age: 299), stagedEntries(path).isEmpty,
                    filesInStore(path).count == 301,
                ]
            }
        }
        #expect(seen == [true, true, true, true, true])
    }

    /// Nor into a collection with no directory yet: a page's write expecting no object there
    /// checks that no file is there either.
    @Test func aLargeSyncPageIntoANewCollectionGoesAhead() async throws {
        let seen = try await offPool {
            try withStore { store, path throws in
                let writes = try (0..<300).map { index in
                    ConditionalWrite(
                        id: try ObjectID(collection: "Person", key: "k\(index)"),
                        content: try ArchiveCodec.json.encode(Person(name: "p", age: index)),
                        expected: nil)
                }
                let versions = try store.applyConditional(writes)
                return [
                    versions.allSatisfy { $0 == 1 }, try store.keys(of: Person.self).count == 300, stagedEntries(path).isEmpty,
                    try store.verify().isClean,
                ]
            }
        }
        #expect(seen == [true, true, true, true])
    }

    // A collection with no directory yet is staged whole (``StagedCollection``).

    @Test func aBatchIntoANewCollectionRenamesItsStagedDirectoryIntoPlace() async throws {
        let seen = try await offPool {
            try withStore { store, path throws in
                var stagedDirectory: UInt64 = 0
                try store.batch { tx in
                    for index in 0..<300 { try tx.save(Person(name: "p\(index)", age: index), forKey: "k\(index)") }
                    let directories = Self.stagedDirectories(path)
                    if directories.count == 1 { stagedDirectory = Self.inode(Self.staging(path) + "/" + directories[0]) }
                }
                return [
                    stagedDirectory != 0, Self.inode(path + "/Person") == stagedDirectory, stagedEntries(path).isEmpty,
                    filesInStore(path) == Set(["Person"] + (0..<300).map { "Person/k\($0).json" }),
                    try store.load(Person.self, forKey: "k299") == Person(name: "p299", age: 299), try store.verify().isClean,
                    try store.objects(in: "Person").allSatisfy { $0.version == 1 },
                ]
            }
        }
        #expect(seen == [true, true, true, true, true, true, true])
    }

    /// Only an object's first write is staged in the collection's directory: a later save or
    /// remove of it in the same batch is put in place after the directory, in order. A
    /// collection the batch only removes from gets no directory.
    @Test func aNewCollectionsObjectWrittenAgainInTheBatchEndsAsItsLastWrite() async throws {
        let seen = try await offPool {
            try withStore { store, path throws in
                try store.batch { tx in
                    for index in 0..<300 { try tx.save(Person(name: "p\(index)", age: index), forKey: "k\(index)") }
                    try tx.save(Person(name: "again", age: 5), forKey: "k5")
                    try tx.remove(Person.self, forKey: "k7")
                    try tx.remove(Person.self, forKey: "k8")
                    try tx.save(Person(name: "back", age: 8), forKey: "k8")
                    try tx.remove(Person.self, forKey: "gone")
                    try tx.remove(PersonModel.self, forKey: "nothing")
                }
                let live = (0..<300).filter { $0 != 7 }.map { "Person/k\($0).json" }
                // The file k5's second write replaced stays staged until the settle's `syncfs`.
                try store.settleCommittedWrites()
                return [
                    try store.load(Person.self, forKey: "k5") == Person(name: "again", age: 5),
                    try store.history(of: Person.self, forKey: "k5").count == 2,
                    try store.load(Person.self, forKey: "k7") == nil, try store.history(of: Person.self, forKey: "k7").last?.version == 2,
                    try store.load(Person.self, forKey: "k8") == Person(name: "back", age: 8),
                    try store.history(of: Person.self, forKey: "k8").last?.version == 3,
                    filesInStore(path) == Set(["Person"] + live), stagedEntries(path).isEmpty, try store.verify().isClean,
                ]
            }
        }
        #expect(seen == [true, true, true, true, true, true, true, true, true])
    }

    /// Another writer makes the collection's directory while the batch stages it whole: the
    /// batch's files then go into that directory one by one, beside the other writer's.
    @Test func aCollectionMadeMeanwhileTakesTheBatchsFilesOneByOne() async throws {
        let seen = try await offPool {
            try withStore { store, path throws in
                var stagedWhole = false
                try store.batch { tx in
                    for index in 0..<300 { try tx.save(Person(name: "p\(index)", age: index), forKey: "k\(index)") }
                    stagedWhole = Self.stagedDirectories(path).count == 1
                    let other = try ArchiveStore(directory: path)
                    try other.save(Person(name: "other", age: 1), forKey: "other")
                }
                return [
                    stagedWhole, try store.keys(of: Person.self).count == 301,
                    try store.load(Person.self, forKey: "other") == Person(name: "other", age: 1),
                    try store.load(Person.self, forKey: "k0") == Person(name: "p0", age: 0),
                    filesInStore(path).count == 302, stagedEntries(path).isEmpty, try store.verify().isClean,
                ]
            }
        }
        #expect(seen == [true, true, true, true, true, true, true])
    }

    /// A process killed between staging a new collection's directory and renaming it leaves
    /// the directory in `.archive-sync/staging`: the next open removes it.
    @Test func anOpenRemovesTheStagedCollectionOfAWriterThatDied() throws {
        try withStore { store, path throws in
            try store.save(Person(name: "seed", age: 0), forKey: "seed")
            let left = Self.staging(path) + "/\(FileName.tempPrefix)\(deadProcessID()).1.7"
            try FileManager.default.createDirectory(atPath: left, withIntermediateDirectories: false)
            try writeFile(left + "/k1.json", Data("{}".utf8))
            let reopened = try ArchiveStore(directory: path)
            #expect(!entryExists(left))
            #expect(try reopened.keys(of: Person.self) == ["seed"])
            #expect(filesInStore(path) == ["Person", "Person/seed.json"])
        }
    }
}
