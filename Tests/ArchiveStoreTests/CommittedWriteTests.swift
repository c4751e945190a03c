import Foundation
import Synchronization
import TestSupport
import Testing

@testable import ArchiveStore

/// A save is durable once its one manifest commit is: its file is renamed into place after
/// that commit with no flush, and made durable later by one `syncfs` (Durability.swift). A
/// power cut before that may lose the rename, the unlink or the file's bytes; the next open
/// puts each listed file back from the manifest's bytes.
@Suite struct CommittedWriteTests {
    /// What a power cut leaves of `store`'s unsettled writes: their intents, owned by a process
    /// that no longer runs, and no settle when the store is released.
    private func cutPower(_ store: ArchiveStore) throws {
        store.durability.withLock {
            $0.committed = []
            $0.period = nil
            $0.retired = []
        }
        try store.manifest.write { tx in try tx.db.run("UPDATE intents SET start = -1") }
    }

    /// Opens a store in `dir`, runs `before` on it with its settles held, and cuts the power
    /// (``cutPower(_:)``); returns the store's path.
    private func storeCut(in dir: String, options: ArchiveStore.Options = .init(), _ before: (ArchiveStore, String) throws -> Void) throws
        -> String
    {
        let path = dir + "/store"
        let store = try ArchiveStore(directory: path, options: options)
        holdSettles(store)
        try before(store, path)
        try cutPower(store)
        return path
    }

    @Test func anOpenPutsBackWhatAPowerCutLostAfterTheCommit() throws {
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            let first = try ArchiveCodec.json.encode(Person(name: "v1", age: 1))
            let long = Person(name: String(repeating: "long ", count: 300), age: 1)
            let fresh = try ArchiveCodec.json.encode(long)
            do {
                let store = try ArchiveStore(directory: path)
                holdSettles(store)
                try store.save(Person(name: "v1", age: 1), forKey: "older")
                try store.save(Person(name: "v1", age: 1), forKey: "empty")
                try store.save(Person(name: "gone", age: 1), forKey: "deleted")
                try store.save(Person(name: "edited", age: 1), forKey: "edited")
                try store.settleCommittedWrites()
                try store.save(Person(name: "v2", age: 2), forKey: "older")
                try store.save(Person(name: "v2", age: 2), forKey: "empty")
                try store.save(Person(name: "new", age: 1), forKey: "missing")
                try store.save(long, forKey: "torn")
                try store.remove(Person.self, forKey: "deleted")
                try store.save(Person(name: "edited", age: 2), forKey: "edited")
                // Six commits, one settle period: none of them wrote an intent of its own.
                let intents = try store.manifest.read { try $0.intents() }
                #expect(intents.count == 1 && intents.allSatisfy { $0.after != nil })
                try cutPower(store)
            }
            // What the cut may leave: a rename lost (the file holds the version before, or is
            // not there), bytes lost or torn, an unlink lost, and another program's edit since.
            try overwrite(path + "/Person/older.json", with: first)
            try overwrite(path + "/Person/empty.json", with: Data())
            try FileManager.default.removeItem(atPath: path + "/Person/missing.json")
            try overwrite(path + "/Person/torn.json", with: Data(fresh.prefix(512)) + Data(repeating: 0, count: fresh.count - 512))
            try overwrite(path + "/Person/deleted.json", with: ArchiveCodec.json.encode(Person(name: "gone", age: 1)))
            try overwrite(path + "/Person/edited.json", with: Data("{\"by\":\"another program\"}".utf8))

            let store = try ArchiveStore(directory: path)
            #expect(try store.load(Person.self, forKey: "older") == Person(name: "v2", age: 2))
            #expect(try store.history(of: Person.self, forKey: "older").map(\.version) == [1, 2])
            #expect(try store.load(Person.self, forKey: "empty") == Person(name: "v2", age: 2))
            #expect(try store.load(Person.self, forKey: "missing") == Person(name: "new", age: 1))
            #expect(try store.load(Person.self, forKey: "torn") == long)
            #expect(!entryExists(path + "/Person/deleted.json"))
            #expect(try store.keys(of: Person.self) == ["edited", "empty", "missing", "older", "torn"])
            // Bytes the object never had are another program's edit: recorded, not overwritten.
            #expect(try Data(contentsOf: URL(fileURLWithPath: path + "/Person/edited.json")) == Data("{\"by\":\"another program\"}".utf8))
            #expect(try store.history(of: Person.self, forKey: "edited").map(\.version) == [1, 2, 3])
            #expect(try store.manifest.read { try $0.intents() }.isEmpty)
            #expect(try store.verify().isClean)
        }
    }

    /// Between a save's commit and its rename, another reader finds the manifest naming a file
    /// not there yet: it reads the committed bytes, not "does not exist" beside a listed key.
    @Test func aReaderBetweenTheCommitAndTheRenameGetsTheCommittedBytes() throws {
        try withStore { store, path throws in
            holdSettles(store)
            try store.save(Person(name: "new", age: 1), forKey: "new")
            try FileManager.default.removeItem(atPath: path + "/Person/new.json")
            let reader = try ArchiveStore(directory: path)
            #expect(try reader.keys(of: Person.self) == ["new"])
            #expect(try reader.load(Person.self, forKey: "new") == Person(name: "new", age: 1))
            #expect(try reader.data(for: ObjectID(collection: "Person", key: "new")) == ArchiveCodec.json.encode(Person(name: "new", age: 1)))
            // Once settled, a missing file is another program's delete, as before.
            try store.settleCommittedWrites()
            #expect(try reader.load(Person.self, forKey: "new") == nil)
        }
    }

    /// A sync's page (conditional writes, each with its other replica's version) takes the
    /// same one-flush path: one commit records the page with a committed intent, and an open
    /// after a cut puts back what the cut lost, so a checkpoint moved after it is never ahead
    /// of the data.
    @Test func aSyncsPageIsOneCommitAndAnOpenPutsBackWhatACutLost() throws {
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            let peer = ReplicatedVersion(
                vector: VersionVector([ReplicaID(rawValue: "peer"): 1]), modified: 1_000_000_000, author: ReplicaID(rawValue: "peer"))
            let long = try ArchiveCodec.json.encode(Person(name: String(repeating: "long ", count: 300), age: 1))
            let small = try ArchiveCodec.json.encode(Person(name: "small", age: 1))
            let gone = try ArchiveCodec.json.encode(Person(name: "gone", age: 1))
            do {
                let store = try ArchiveStore(directory: path)
                holdSettles(store)
                try store.save(Person(name: "gone", age: 1), forKey: "deleted")
                try store.settleCommittedWrites()
                let id = { (key: String) in try ObjectID(collection: "Person", key: key) }
                let versions = try store.applyConditional([
                    ConditionalWrite(id: id("missing"), content: small, expected: nil, version: peer),
                    ConditionalWrite(id: id("empty"), content: small, expected: nil, version: peer),
                    ConditionalWrite(id: id("torn"), content: long, expected: nil, version: peer),
                    ConditionalWrite(id: id("deleted"), content: nil, expected: ContentHash(of: gone), version: peer),
                ])
                #expect(versions == [1, 1, 1, 2])
                let intents = try store.manifest.read { try $0.intents() }
                #expect(intents.count == 1 && intents.allSatisfy { $0.after != nil }, "one commit in the settle period, with no intent of its own")
                #expect(!entryExists(path + "/Person/deleted.json"))
                try cutPower(store)
            }
            try FileManager.default.removeItem(atPath: path + "/Person/missing.json")
            try overwrite(path + "/Person/empty.json", with: Data())
            try overwrite(path + "/Person/torn.json", with: Data(long.prefix(512)) + Data(repeating: 0, count: long.count - 512))
            try overwrite(path + "/Person/deleted.json", with: gone)

            let store = try ArchiveStore(directory: path)
            for key in ["missing", "empty"] {
                #expect(try Data(contentsOf: URL(fileURLWithPath: path + "/Person/\(key).json")) == small)
                #expect(try store.history(of: Person.self, forKey: key).map(\.version) == [1])
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: path + "/Person/torn.json")) == long)
            #expect(!entryExists(path + "/Person/deleted.json"))
            #expect(try store.keys(of: Person.self) == ["empty", "missing", "torn"])
            #expect(try store.manifest.read { try $0.intents() }.isEmpty)
            #expect(try store.verify().isClean)
        }
    }

    /// Commits in a settle period write no intent of their own, so the versions a cut may
    /// bring back on disk stay in history until the settle, whatever the history limit: the
    /// next open knows the oldest such file as the object's, not as another program's edit.
    @Test func aCutThatBringsBackTheVersionBeforeThePeriodIsPutRightWithAHistoryOfOne() throws {
        try withTemporaryDirectory { dir throws in
            let first = try ArchiveCodec.json.encode(Person(name: "v1", age: 1))
            let path = try storeCut(in: dir, options: .init(historyLimit: 1)) { store, _ in
                try store.save(Person(name: "v1", age: 1), forKey: "ada")
                try store.settleCommittedWrites()
                for age in 2...4 { try store.save(Person(name: "v\(age)", age: age), forKey: "ada") }
                #expect(try store.history(of: Person.self, forKey: "ada").map(\.version) == [4])
            }
            try overwrite(path + "/Person/ada.json", with: first)
            let store = try ArchiveStore(directory: path)
            #expect(try store.load(Person.self, forKey: "ada") == Person(name: "v4", age: 4))
            #expect(try store.history(of: Person.self, forKey: "ada").map(\.version) == [4])
            #expect(try store.verify().isClean)
        }
    }

    /// The versions past the limit that a period kept go at its settle, not at the object's
    /// next write.
    @Test func theSettleDropsTheVersionsAPeriodKept() throws {
        try withStore(.init(historyLimit: 1)) { store, _ throws in
            holdSettles(store)
            for age in 1...5 { try store.save(Person(name: "p", age: age), forKey: "ada") }
            let stored = { try store.manifest.read { tx in try tx.history(ObjectID(collection: "Person", key: "ada"), unsettled: true).count } }
            #expect(try stored() == 5)
            try store.settleCommittedWrites()
            #expect(try stored() == 1)
            #expect(try store.manifest.read { try $0.intents() }.isEmpty)
        }
    }

    /// A process killed with commits in its period (no settle, no rename of its last save)
    /// leaves the period for the next open, which puts the file in place from the manifest.
    @Test func aPeriodWhoseOwnerIsGoneIsFinishedByTheNextOpen() throws {
        try withTemporaryDirectory { dir throws in
            let path = try storeCut(in: dir) { store, _ in
                try store.save(Person(name: "a", age: 1), forKey: "a")
                try store.save(Person(name: "b", age: 1), forKey: "b")
            }
            try FileManager.default.removeItem(atPath: path + "/Person/b.json")
            let store = try ArchiveStore(directory: path)
            #expect(try Data(contentsOf: URL(fileURLWithPath: path + "/Person/b.json")) == ArchiveCodec.json.encode(Person(name: "b", age: 1)))
            #expect(try store.manifest.read { try $0.intents() }.isEmpty)
            #expect(try store.history(of: Person.self, forKey: "b").map(\.version) == [1])
        }
    }

    /// A killed writer's period holds back every writer's pruning: a running process's
    /// settle finishes it rather than leaving it for the next open.
    @Test func aSettleFinishesAKilledWritersPeriod() throws {
        try withStore { store, path throws in
            holdSettles(store)
            try store.save(Person(name: "a", age: 1), forKey: "a")
            try store.settleCommittedWrites()
            // What a writer killed after its commit, before its rename, leaves.
            try store.manifest.write { tx in
                _ = try tx.addSettlePeriod(owner: ProcessIdentity(pid: ProcessIdentity.current.pid, startTime: -1))
                _ = try tx.record(
                    RecordedChange(
                        id: ObjectID(collection: "Person", key: "b"), file: "b.json",
                        content: try ArchiveCodec.json.encode(Person(name: "b", age: 1)),
                        hash: ContentHash(of: try ArchiveCodec.json.encode(Person(name: "b", age: 1))), stamp: nil, schemaVersion: nil,
                        origin: .local),
                    existing: nil)
            }
            #expect(!entryExists(path + "/Person/b.json"))
            try store.save(Person(name: "a", age: 2), forKey: "a")
            try store.settleCommittedWrites()
            #expect(try store.load(Person.self, forKey: "b") == Person(name: "b", age: 1))
            #expect(try store.manifest.read { try $0.intents() }.isEmpty)
        }
    }

    /// An intent's id can go to a new intent once it is dropped: a process that finishes
    /// or settles an id drops it only while it is still its owner's.
    @Test func anIntentIsDroppedOnlyWhileItIsStillItsOwners() throws {
        try withStore { store, _ throws in
            holdSettles(store)
            try store.save(Person(name: "a", age: 1), forKey: "a")
            let period = try #require(try store.manifest.read { try $0.intents() }.first)
            let other = ProcessIdentity(pid: period.owner.pid, startTime: period.owner.startTime - 1)
            try store.manifest.write(flushed: false) { try $0.removeSettled([period.id], owner: other) }
            #expect(try store.manifest.read { try $0.intents() }.map(\.id) == [period.id])
            try store.settleCommittedWrites()
            #expect(try store.manifest.read { try $0.intents() }.isEmpty)
        }
    }

    /// A period two failed commits keep stays until both have put their files back.
    @Test func aPeriodKeptByTwoCommitsStaysUntilBothRelease() throws {
        try withStore { store, _ throws in
            holdSettles(store)
            try store.save(Person(name: "a", age: 1), forKey: "a")
            let period = try #require(store.durability.withLock { $0.period })
            store.keepPeriod(period)
            store.keepPeriod(period)
            store.releasePeriod(period)
            try store.settleCommittedWrites()
            #expect(try store.manifest.read { try $0.intents() }.map(\.id) == [period])
            store.releasePeriod(period)
            try store.settleCommittedWrites()
            #expect(try store.manifest.read { try $0.intents() }.isEmpty)
        }
    }

    /// A dead writer's period covers what the store's writes put on disk, not another
    /// program's files that a scan recorded meanwhile: one deleted since is a delete.
    @Test func aPeriodDoesNotPutBackAFileAScanFoundAndAnotherProgramRemoved() throws {
        try withTemporaryDirectory { dir throws in
            let path = try storeCut(in: dir) { store, path in
                try store.save(Person(name: "a", age: 1), forKey: "a")
                try overwrite(path + "/Person/theirs.json", with: ArchiveCodec.json.encode(Person(name: "theirs", age: 1)))
                _ = try store.scan()
                #expect(try store.keys(of: Person.self) == ["a", "theirs"])
            }
            try FileManager.default.removeItem(atPath: path + "/Person/theirs.json")
            let store = try ArchiveStore(directory: path)
            #expect(!entryExists(path + "/Person/theirs.json"))
            _ = try store.scan()
            #expect(try store.keys(of: Person.self) == ["a"])
        }
    }

    /// Saving an unchanged model records nothing, so it begins no settle period either.
    @Test func anUnchangedSaveBeginsNoPeriod() throws {
        try withStore { store, _ throws in
            holdSettles(store)
            try store.save(Person(name: "a", age: 1), forKey: "a")
            try store.settleCommittedWrites()
            try store.save(Person(name: "a", age: 1), forKey: "a")
            #expect(try store.manifest.read { try $0.intents() }.isEmpty)
            #expect(store.durability.withLock { $0.period } == nil)
        }
    }

    @Test func settlingDropsTheCommittedIntents() throws {
        try withStore { store, path throws in
            holdSettles(store)
            try store.save(Person(name: "a", age: 1), forKey: "a")
            #expect(try store.manifest.read { try $0.intents() }.count == 1)
            try store.settleCommittedWrites()
            #expect(try store.manifest.read { try $0.intents() }.isEmpty)
        }
    }

    /// A cut before the commit leaves the staged file only, which the next open removes.
    @Test func anOpenRemovesFilesStagedByAWriterThatIsGone() throws {
        try withStore { store, path throws in
            // The first save makes the staging directory.
            try store.save(Person(name: "a", age: 1), forKey: "a")
            let staged = path + "/.archive-sync/staging/.archive-sync-tmp.\(Int32.max).1.1"
            try overwrite(staged, with: Data("half".utf8))
            _ = try ArchiveStore(directory: path)
            #expect(!entryExists(staged))
        }
    }

    /// Saves of several threads at once share commits (group commit), and each gets its own version.
    @Test func threadsSavingAtOnceEachGetTheirVersion() throws {
        try withStore { store, path throws in
            let done = DispatchGroup()
            let versions = Mutex<[Int: [Int]]>([:])
            for thread in 0..<8 {
                done.enter()
                Thread.detachNewThread {
                    defer { done.leave() }
                    for round in 1...10 {
                        let version = (try? store.save(Person(name: "t\(thread)", age: round), forKey: "k\(thread)")) ?? -1
                        versions.withLock { $0[thread, default: []].append(version) }
                    }
                }
            }
            done.wait()
            for thread in 0..<8 {
                #expect(versions.withLock { $0[thread] } == Array(1...10))
                #expect(try store.load(Person.self, forKey: "k\(thread)") == Person(name: "t\(thread)", age: 10))
            }
            #expect(try store.verify().isClean)
        }
    }

    /// A group commit puts its files in place on every core when its writes are of distinct
    /// objects; two saves of one object in one group keep their order: after each round of
    /// eight threads saving one object at once (and one of their own each), its file holds its
    /// newest version, never the one before it.
    @Test func threadsSavingOneObjectAtOnceLeaveItsNewestVersionInPlace() throws {
        try withStore { store, path throws in
            let id = ObjectID(unchecked: "Person", key: "shared")
            var stale: [Int] = []
            for round in 1...20 {
                let done = DispatchGroup()
                for thread in 0..<8 {
                    done.enter()
                    Thread.detachNewThread {
                        defer { done.leave() }
                        _ = try? store.save(Person(name: "t\(thread)", age: round), forKey: "own\(thread)")
                        _ = try? store.save(Person(name: "t\(thread)", age: round), forKey: "shared")
                    }
                }
                done.wait()
                let row = try #require(try store.manifest.read { try $0.object(id) })
                let onDisk = try Data(contentsOf: URL(fileURLWithPath: path + "/Person/" + row.file))
                if ContentHash(of: onDisk) != row.hash { stale.append(row.version) }
            }
            #expect(stale.isEmpty, "the file held an older version than the manifest's after versions \(stale)")
            #expect(try store.manifest.read { try $0.object(id) }?.version == 160)
            #expect(try store.verify().isClean)
        }
    }
}
