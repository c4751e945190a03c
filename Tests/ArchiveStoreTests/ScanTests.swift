import Foundation
import TestSupport
import Testing

@testable import ArchiveStore

#if canImport(Glibc)
    import Glibc
#endif

/// The JSON the store writes for `person` (sorted keys).
func json(_ person: Person) throws -> Data { try ArchiveCodec.json.encode(person) }

struct ScanTests {
    @Test func externalCreateIsRecordedAsCreatedExternally() throws {
        try withStore { store, path throws in
            try store.save(Person(name: "A", age: 1), forKey: "a")
            let sequence = try store.status().sequence
            try overwrite(path + "/Person/new.json", with: json(Person(name: "New", age: 2)))

            let report = try store.scan()
            #expect(report.changes.count == 1)
            let change = try #require(report.changes.first)
            #expect(change.id == (try ObjectID(collection: "Person", key: "new")))
            #expect(change.kind == .created)
            #expect(change.origin == .external)
            #expect(change.version == 1)
            #expect(change.sequence == sequence + 1)
            #expect(try store.keys(of: Person.self) == ["a", "new"])
            #expect(try store.load(Person.self, forKey: "new") == Person(name: "New", age: 2))
            #expect(try store.history(of: Person.self, forKey: "new").first?.hash == ContentHash(of: json(Person(name: "New", age: 2))))
        }
    }

    @Test func externalFileInANewCollectionDirectoryIsRecorded() throws {
        try withStore { store, path throws in
            try FileManager.default.createDirectory(atPath: path + "/Note", withIntermediateDirectories: false)
            try overwrite(path + "/Note/%2Ehidden%2Fkey.json", with: Data(#"{"text":"hi"}"#.utf8))
            let report = try store.scan()
            #expect(report.created == 1)
            #expect(report.changes.first?.id == (try ObjectID(collection: "Note", key: ".hidden/key")))
            #expect(try store.status().collections == 1)
        }
    }

    @Test func externalInPlaceEditIsRecordedAsModifiedExternally() throws {
        try withStore { store, path throws in
            try store.save(Person(name: "A", age: 1), forKey: "a")
            let file = path + "/Person/a.json"
            let originalInode = try inode(of: file)
            let mtime = try modificationTime(of: file)
            try overwrite(file, with: json(Person(name: "B", age: 2)))
            try setModificationTime(of: file, to: shifted(mtime, bySeconds: 1))
            #expect(try inode(of: file) == originalInode)

            let report = try store.scan()
            #expect(report.changes.map(\.kind) == [.modified])
            #expect(report.changes.first?.origin == .external)
            #expect(report.changes.first?.version == 2)
            #expect(try store.load(Person.self, forKey: "a") == Person(name: "B", age: 2))
            #expect(try store.history(of: Person.self, forKey: "a").map(\.version) == [1, 2])
        }
    }

    @Test func externalDeleteIsRecordedAsDeletedExternally() throws {
        try withStore { store, path throws in
            try store.save(Person(name: "A", age: 1), forKey: "a")
            try store.save(Person(name: "B", age: 2), forKey: "b")
            try FileManager.default.removeItem(atPath: path + "/Person/a.json")

            let report = try store.scan()
            #expect(report.changes.count == 1)
            let change = try #require(report.changes.first)
            #expect(change.id.key == "a")
            #expect(change.kind == .deleted)
            #expect(change.origin == .external)
            #expect(change.version == 2)
            #expect(try store.keys(of: Person.self) == ["b"])
            #expect(try store.history(of: Person.self, forKey: "a").last?.isDeleted == true)
        }
    }

    @Test func removedCollectionDirectoryDeletesItsObjects() throws {
        try withStore { store, path throws in
            try store.save(Person(name: "A", age: 1), forKey: "a")
            try store.save(Person(name: "B", age: 2), forKey: "b")
            try store.save(PersonModel(title: "kept"), forKey: "m")
            try FileManager.default.removeItem(atPath: path + "/Person")

            let report = try store.scan()
            #expect(report.deleted == 2)
            #expect(report.changes.allSatisfy { $0.origin == .external && $0.id.collection == "Person" })
            #expect(try store.keys(of: Person.self).isEmpty)
            #expect(try store.keys(of: PersonModel.self) == ["m"])
        }
    }

    @Test func secondScanRecordsNothing() throws {
        try withStore { store, path throws in
            try store.save(Person(name: "A", age: 1), forKey: "a")
            try store.save(Person(name: "B", age: 2), forKey: "b")
            try overwrite(path + "/Person/c.json", with: json(Person(name: "C", age: 3)))
            try overwrite(path + "/Person/a.json", with: json(Person(name: "A2", age: 10)))
            try FileManager.default.removeItem(atPath: path + "/Person/b.json")
            let first = try store.scan()
            #expect(first.changes.count == 3)
            let sequence = try store.status().sequence

            let second = try store.scan()
            #expect(second.changes.isEmpty)
            #expect(try store.status().sequence == sequence)
        }
    }

    @Test func scanOfASavedStoreRecordsNothing() throws {
        try withStore { store, _ throws in
            for index in 0..<20 { try store.save(Person(name: "p", age: index), forKey: "k\(index)") }
            try store.remove(Person.self, forKey: "k3")
            let report = try store.scan()
            #expect(report.changes.isEmpty)
            #expect(report.ignored.isEmpty)
            #expect(try store.status().sequence == 21)
        }
    }

    @Test func touchedFileRecordsNoVersionAndIsSkippedNextTime() throws {
        try withStore { store, path throws in
            try store.save(Person(name: "A", age: 1), forKey: "a")
            let file = path + "/Person/a.json"
            let mtime = try modificationTime(of: file)
            try setModificationTime(of: file, to: shifted(mtime, bySeconds: -100))

            let report = try store.scan()
            #expect(report.changes.isEmpty)
            #expect(report.touched == 1)
            #expect(try store.history(of: Person.self, forKey: "a").count == 1)

            // The new stamp was recorded: the next scan does not even read the file.
            let next = try store.scan()
            #expect(next.changes.isEmpty)
            #expect(next.unchanged == 1)
            #expect(next.touched == 0)
        }
    }

    @Test func twoFilesForOneKeyDoNotFlipFlopBetweenScans() throws {
        try withStore { store, path throws in
            try store.save(Person(name: "A", age: 1), forKey: "a")
            // Another program adds the same key in the other codec.
            try overwrite(path + "/Person/a.plist", with: ArchiveCodec.propertyList.encode(Person(name: "A", age: 1)))
            _ = try store.scan()
            let sequence = try store.status().sequence
            let versions = try store.history(of: Person.self, forKey: "a").count

            for _ in 0..<3 {
                let report = try store.scan()
                #expect(report.changes.isEmpty)
            }
            #expect(try store.status().sequence == sequence)
            #expect(try store.history(of: Person.self, forKey: "a").count == versions)
        }
    }

    @Test func aKeyWhoseFileChangedCodecMovesToTheNewFile() throws {
        try withStore { store, path throws in
            try store.save(Person(name: "A", age: 1), forKey: "a")
            try store.save(Person(name: "B", age: 2), forKey: "b")
            // Another program converts a.json to a.plist: the old file goes, the new one comes.
            try FileManager.default.removeItem(atPath: path + "/Person/a.json")
            try overwrite(path + "/Person/a.plist", with: ArchiveCodec.propertyList.encode(Person(name: "A2", age: 3)))

            let report = try store.scan()
            #expect(report.ignored.isEmpty)
            #expect(report.changes.allSatisfy { $0.id.key == "a" })
            #expect(try store.load(Person.self, forKey: "a") == Person(name: "A2", age: 3))
            #expect(try store.history(of: Person.self, forKey: "a").last?.file == "a.plist")
            #expect(try store.scan().changes.isEmpty)
        }
    }

    @Test func aDeletedObjectsFileWrittenAgainIsANewVersion() throws {
        try withStore { store, path throws in
            try store.save(Person(name: "A", age: 1), forKey: "a")
            try store.remove(Person.self, forKey: "a")
            try overwrite(path + "/Person/a.json", with: json(Person(name: "Back", age: 2)))

            let report = try store.scan()
            #expect(report.changes.map(\.kind) == [.created])
            #expect(report.changes.first?.version == 3)
            #expect(try store.load(Person.self, forKey: "a") == Person(name: "Back", age: 2))
            #expect(try store.scan().changes.isEmpty)
        }
    }

    /// Waits until what was just written is older than the racy window (without holding a
    /// thread of the test runner's), so that a directory's stamp can be trusted.
    private func waitOutTheRacyWindow() async throws {
        try await Task.sleep(for: .nanoseconds(Manifest.racyWindow) + .milliseconds(200))
    }

    /// Waits until what was just written to the store is older than the racy window, scans
    /// (listing the directory, which records its stamp) and checks that the next scan trusts it.
    private func settle(_ store: ArchiveStore) async throws {
        try await waitOutTheRacyWindow()
        #expect(try store.scan().listedDirectories == 1)
        #expect(try store.scan().listedDirectories == 0)
    }

    /// Rewrites `file` in place with `person`, its time a second later: its directory does not change.
    private func editInPlace(_ file: String, with person: Person) throws {
        let mtime = try modificationTime(of: file)
        try overwrite(file, with: json(person))
        try setModificationTime(of: file, to: shifted(mtime, bySeconds: 1))
    }

    @Test func anUnchangedDirectoryIsNotListedButItsFilesAreStillLookedAt() async throws {
        try await withStore { store, path in
            for (index, key) in ["ada", "bob", "cy"].enumerated() { try store.save(Person(name: key, age: index), forKey: key) }
            // Just written: the directory's stamp is too new to be trusted.
            #expect(try store.scan().listedDirectories == 1)
            try await settle(store)

            // An edit in place does not change the directory: found by its file's stamp alone.
            try editInPlace(path + "/Person/ada.json", with: Person(name: "Ada", age: 36))
            var report = try store.scan()
            #expect(report.listedDirectories == 0)
            #expect(report.changes.map(\.id.key) == ["ada"])
            #expect(report.changes.map(\.kind) == [.modified])
            #expect(report.unchanged == 2)
            #expect(try store.load(Person.self, forKey: "ada") == Person(name: "Ada", age: 36))

            // Removing and adding files changes the directory: it is listed again.
            try FileManager.default.removeItem(atPath: path + "/Person/bob.json")
            try overwrite(path + "/Person/dan.json", with: json(Person(name: "dan", age: 4)))
            report = try store.scan()
            #expect(report.listedDirectories == 1)
            #expect(Set(report.changes.map { "\($0.kind) \($0.id.key)" }) == ["deleted bob", "created dan"])
        }
    }

    /// An unchanged directory of more rows than one chunk of ``UnchangedLooks``: its files are
    /// stat'ed a chunk at a time while the rows are still read, and every edit in place is
    /// found once, whichever chunk it falls in, in the manifest's row order.
    @Test func anUnchangedDirectoryOfSeveralChunksHasEveryEditFound() async throws {
        try await withStore { store, path in
            let count = UnchangedLooks.chunk * 2 + 100
            try store.batch { tx in
                for n in 0..<count { try tx.save(Person(name: "p", age: n), forKey: "p\(n)") }
            }
            try await settle(store)
            let edited = stride(from: 0, to: count, by: 4_000).map { "p\($0)" } + ["p\(count - 1)"]
            for key in edited { try editInPlace(path + "/Person/\(key).json", with: Person(name: "edited", age: 1)) }
            let report = try store.scan()
            #expect(report.listedDirectories == 0)
            #expect(report.changes.map(\.id.key) == edited.sorted())
            #expect(report.changes.allSatisfy { $0.kind == .modified })
            #expect(report.unchanged == count - edited.count)
        }
    }

    /// A damaged row (its file `../../outside.json`) in a directory unchanged since a scan
    /// listed it, where only the rows' files are looked at: the name is not followed, the row
    /// is reported by its object, and the key's own file is recorded for it again.
    @Test func aDamagedRowInAnUnchangedDirectoryIsReportedAndRepaired() async throws {
        try await withStore { store, path in
            let outside = path + "/../outside.json"
            try overwrite(outside, with: Data("keep me".utf8))
            for key in ["ada", "bob"] { try store.save(Person(name: key, age: 1), forKey: key) }
            try await settle(store)
            try SQLiteConnection(path: path + "/.archive-sync/manifest.sqlite").run(
                "UPDATE objects SET file = '../../outside.json' WHERE key = 'ada'")
            let report = try store.scan()
            #expect(report.listedDirectories == 0)
            #expect(report.ignored.map(\.path) == ["Person/../../outside.json"], "\(report.ignored)")
            #expect(report.ignored.first?.reason.contains("Person/ada") == true, "\(report.ignored)")
            #expect(try store.objects(in: "Person").map(\.file) == ["ada.json", "bob.json"])
            #expect(try contents(of: outside) == Data("keep me".utf8))
        }
    }

    /// A collection directory removed is recorded as its objects' deletes, and its stamp is
    /// dropped rather than kept for a directory that can never match it again.
    @Test func aRemovedDirectoryLeavesNoStampBehind() async throws {
        try await withStore { store, path in
            try store.save(Person(name: "ada", age: 1), forKey: "ada")
            try await settle(store)
            #expect(try store.manifest.read { try $0.directoryStamps() }.keys.map(\.string) == ["Person"])
            try FileManager.default.removeItem(atPath: path + "/Person")
            #expect(try store.scan().changes.map { "\($0.kind) \($0.id.key)" } == ["deleted ada"])
            #expect(try store.manifest.read { try $0.directoryStamps() }.isEmpty)
        }
    }

    /// `rsync -a` or `touch -d` can set a directory's mtime back after adding to it; its ctime
    /// still moves, and the new file is found.
    @Test func aDirectoryWhoseMtimeIsSetBackIsListedAgain() async throws {
        try await withStore { store, path in
            try store.save(Person(name: "ada", age: 1), forKey: "ada")
            try await settle(store)
            let directory = path + "/Person"
            let mtime = try modificationTime(of: directory)
            try overwrite(directory + "/dan.json", with: json(Person(name: "dan", age: 4)))
            try setModificationTime(of: directory, to: mtime)
            #expect(try modificationTime(of: directory).tv_nsec == mtime.tv_nsec)
            let report = try store.scan()
            #expect(report.listedDirectories == 1)
            #expect(report.changes.map { "\($0.kind) \($0.id.key)" } == ["created dan"])
        }
    }

    /// A directory with an entry that is not an object is listed by every scan, so that every
    /// report names the entry (and a dot file that stays is never trusted to stay put).
    @Test func aDirectoryWithAnEntryThatIsNotAnObjectIsListedByEveryScan() async throws {
        try await withStore { store, path in
            try store.save(Person(name: "ada", age: 1), forKey: "ada")
            try FileManager.default.createDirectory(atPath: path + "/Person/drafts", withIntermediateDirectories: false)
            try await waitOutTheRacyWindow()
            for _ in 0..<3 {
                let report = try store.scan()
                #expect(report.listedDirectories == 1)
                #expect(report.ignored.map(\.path) == ["Person/drafts"])
            }
            try FileManager.default.removeItem(atPath: path + "/Person/drafts")
            try overwrite(path + "/Person/.notes", with: Data("the user's".utf8))
            try await waitOutTheRacyWindow()
            #expect(try store.scan().listedDirectories == 1)
            #expect(try store.scan().listedDirectories == 1)
        }
    }

    @Test func staleTempFileOfADeadProcessIsRemovedByScan() throws {
        try withStore { store, path throws in
            try store.save(Person(name: "A", age: 1), forKey: "a")
            let dead = deadProcessID()
            let stale = path + "/Person/\(FileName.tempPrefix)\(dead).12345.7"
            try overwrite(stale, with: Data("half-written".utf8))
            // A temp file of this (running) process, and another dot file, must stay.
            let me = ProcessIdentity.current
            let live = path + "/Person/\(FileName.tempPrefix)\(me.pid).\(me.startTime).999999"
            try overwrite(live, with: Data("in flight".utf8))
            let dotFile = path + "/Person/.notes"
            try overwrite(dotFile, with: Data("user's".utf8))

            let report = try store.scan()
            #expect(report.removedTempFiles == 1)
            #expect(!entryExists(stale))
            #expect(entryExists(live))
            #expect(entryExists(dotFile))
            #expect(report.changes.isEmpty)
            #expect(try store.keys(of: Person.self) == ["a"])
            try FileManager.default.removeItem(atPath: live)
        }
    }

    @Test func openingTheStoreFinishesADeadProcesssInterruptedWrite() throws {
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            let dead = ProcessIdentity(pid: deadProcessID(), startTime: 12345)
            let temp = "\(FileName.tempPrefix)\(dead.pid).\(dead.startTime).1"
            let renamedTemp = "\(FileName.tempPrefix)\(dead.pid).\(dead.startTime).2"
            do {
                let store = try ArchiveStore(directory: path)
                try store.save(Person(name: "A", age: 1), forKey: "a")
                // The dead process recorded its intent for two objects, wrote one temp file
                // ("b", not yet renamed) and had renamed the other ("c") when it was killed.
                let entries = [
                    WriteIntent.Entry(collection: "Person", key: "b", file: "b.json", temp: temp, schemaVersion: nil),
                    WriteIntent.Entry(collection: "Person", key: "c", file: "c.json", temp: renamedTemp, schemaVersion: nil),
                ]
                _ = try store.manifest.write { try $0.addIntent(entries, owner: dead) }
                try overwrite(path + "/Person/" + temp, with: json(Person(name: "B", age: 2)))
                try overwrite(path + "/Person/c.json", with: json(Person(name: "C", age: 3)))
            }

            let store = try ArchiveStore(directory: path)
            #expect(!entryExists(path + "/Person/" + temp))
            #expect(try store.manifest.read { try $0.intents() }.isEmpty)
            // The rename that happened is recorded; the one that did not leaves no object.
            #expect(try store.keys(of: Person.self) == ["a", "c"])
            #expect(try store.load(Person.self, forKey: "c") == Person(name: "C", age: 3))
            #expect(try store.history(of: Person.self, forKey: "c").map(\.version) == [1])
            #expect(filesInStore(path) == ["Person", "Person/a.json", "Person/c.json"])
        }
    }

    @Test func openingTheStoreLeavesALiveProcesssIntentAlone() throws {
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            let temp = "\(FileName.tempPrefix)\(ProcessIdentity.current.pid).\(ProcessIdentity.current.startTime).424242"
            do {
                let store = try ArchiveStore(directory: path)
                try store.save(Person(name: "A", age: 1), forKey: "a")
                let entries = [WriteIntent.Entry(collection: "Person", key: "b", file: "b.json", temp: temp, schemaVersion: nil)]
                _ = try store.manifest.write { try $0.addIntent(entries) }
                try overwrite(path + "/Person/" + temp, with: Data("in flight".utf8))
            }
            let store = try ArchiveStore(directory: path)
            #expect(entryExists(path + "/Person/" + temp))
            #expect(try store.manifest.read { try $0.intents() }.count == 1)
        }
    }

    @Test func verifyIsCleanAfterSaves() throws {
        try withStore(.init(collectionCodecs: ["PersonModel": .propertyList])) { store, _ throws in
            for index in 0..<10 { try store.save(Person(name: "p", age: index), forKey: "k\(index)") }
            try store.save(Person(name: "p", age: 100), forKey: "k0")
            try store.save(PersonModel(title: "m"), forKey: "m")
            try store.remove(Person.self, forKey: "k9")
            let report = try store.verify()
            #expect(report.isClean)
            #expect(report.problems.isEmpty)
            #expect(report.verified == 10)
            #expect(report.verifiedHistory == 12)
        }
    }

    @Test func flippedByteWithRestoredMtimeIsCorrupt() throws {
        try withStore { store, path throws in
            try store.save(Person(name: "A", age: 1), forKey: "a")
            try store.save(Person(name: "B", age: 2), forKey: "b")
            let file = path + "/Person/a.json"
            let mtime = try modificationTime(of: file)
            try flipByte(file, at: 3)
            try setModificationTime(of: file, to: mtime)

            let report = try store.verify()
            #expect(!report.isClean)
            #expect(report.problems.map(\.kind) == [.corrupt])
            #expect(report.problems.first?.id == "Person/a")
            #expect(report.verified == 1)
        }
    }

    @Test func editWithANewMtimeIsEdited() throws {
        try withStore { store, path throws in
            try store.save(Person(name: "A", age: 1), forKey: "a")
            let file = path + "/Person/a.json"
            let mtime = try modificationTime(of: file)
            try overwrite(file, with: json(Person(name: "Edited", age: 1)))
            try setModificationTime(of: file, to: shifted(mtime, bySeconds: 5))

            let report = try store.verify()
            #expect(report.problems.map(\.kind) == [.edited])
            #expect(report.problems.first?.id == "Person/a")
            // verify changes nothing; scan then records the edit and verify is clean again.
            #expect(try store.history(of: Person.self, forKey: "a").count == 1)
            #expect(try store.scan().modified == 1)
            #expect(try store.verify().isClean)
        }
    }

    @Test func deletedFileIsMissing() throws {
        try withStore { store, path throws in
            try store.save(Person(name: "A", age: 1), forKey: "a")
            try store.save(Person(name: "B", age: 2), forKey: "b")
            try FileManager.default.removeItem(atPath: path + "/Person/b.json")
            let report = try store.verify()
            #expect(report.problems.map(\.kind) == [.missing])
            #expect(report.problems.first?.id == "Person/b")
        }
    }

    @Test func unknownFileIsUntracked() throws {
        try withStore { store, path throws in
            try store.save(Person(name: "A", age: 1), forKey: "a")
            try overwrite(path + "/Person/%2Estray.json", with: json(Person(name: "S", age: 0)))
            let report = try store.verify()
            #expect(report.problems.map(\.kind) == [.untracked])
            #expect(report.problems.first?.id == "Person/.stray")
        }
    }

    @Test func corruptHistoryContentIsReported() throws {
        try withStore { store, _ throws in
            try store.save(Person(name: "A", age: 1), forKey: "a")
            let hash = try #require(try store.history(of: Person.self, forKey: "a").first?.hash)
            // Bypass the API: damage the kept content as bit rot would.
            try damageKeptContent(store, hash: hash)
            let report = try store.verify()
            #expect(report.problems.map(\.kind) == [.corruptHistory])
        }
    }

    /// Overwrites the kept contents of the versions with this hash with other bytes.
    private func damageKeptContent(_ store: ArchiveStore, hash: ContentHash) throws {
        let db = try SQLiteConnection(path: store.path + "/.archive-sync/manifest.sqlite")
        try db.run("UPDATE history SET data = ? WHERE hash = ?", [.blob(Data("rotten".utf8)), .blob(hash.bytes)])
    }
}
