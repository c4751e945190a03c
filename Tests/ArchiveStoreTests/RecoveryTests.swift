import ArchiveLocking
import Foundation
import TestSupport
import Testing

@testable import ArchiveStore

#if canImport(Glibc)
    import Glibc
#endif

/// Recovery of writes a dead process left half done, and the failure paths around it.
@Suite struct RecoveryTests {
    private func plistBytes(_ person: Person) throws -> Data {
        try ArchiveCodec.propertyList.encode(person)
    }

    /// A save that changed the codec (x.json -> x.plist) was killed after its rename: opening
    /// finishes it. The old file goes, and the old bytes are not recorded again as a new version.
    @Test func recoveryFinishesACodecChangeWhoseRenameLanded() throws {
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            let new = Person(name: "new", age: 2)
            do {
                let store = try ArchiveStore(directory: path)
                try store.save(Person(name: "old", age: 1), forKey: "x")
                let bytes = try plistBytes(new)
                let dead = ProcessIdentity(pid: deadProcessID(), startTime: 1)
                let entry = WriteIntent.Entry(
                    collection: "Person", key: "x", file: "x.plist", temp: "\(FileName.tempPrefix)\(dead.pid).1.1", hash: ContentHash(of: bytes))
                _ = try store.manifest.write { try $0.addIntent([entry], owner: dead) }
                try overwrite(path + "/Person/x.plist", with: bytes)  // the rename happened; the unlink did not
            }
            let store = try ArchiveStore(directory: path, options: .init(codec: .propertyList))
            #expect(filesInStore(path) == ["Person", "Person/x.plist"])
            #expect(try store.history(of: Person.self, forKey: "x").map(\.file) == ["x.json", "x.plist"])
            #expect(try store.load(Person.self, forKey: "x") == new)
            #expect(try store.scan().changes.isEmpty)
            #expect(try store.verify().isClean)
        }
    }

    /// A save killed before its rename: the temp file goes, and the old bytes keep their schema
    /// (they are not labelled with the schema of the write that never landed).
    @Test func recoveryLeavesAWriteThatNeverLandedAlone() throws {
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            let old = Data(#"{"age":1,"name":"old"}"#.utf8)
            let temp: String
            do {
                let store = try ArchiveStore(directory: path)
                try store.put(old, as: ObjectID(collection: "Person", key: "g"))
                let dead = ProcessIdentity(pid: deadProcessID(), startTime: 1)
                temp = "\(FileName.tempPrefix)\(dead.pid).1.1"
                let newBytes = Data(#"{"age":2,"name":"new"}"#.utf8)
                let entry = WriteIntent.Entry(
                    collection: "Person", key: "g", file: "g.json", temp: temp, hash: ContentHash(of: newBytes), schemaVersion: 2)
                _ = try store.manifest.write { try $0.addIntent([entry], owner: dead) }
                try overwrite(path + "/Person/" + temp, with: newBytes)
            }
            let store = try ArchiveStore(directory: path)
            #expect(!entryExists(path + "/Person/" + temp))
            #expect(try contents(of: path + "/Person/g.json") == old)
            let history = try store.history(of: Person.self, forKey: "g")
            #expect(history.map(\.version) == [1])
            #expect(try store.manifest.read { try $0.object(ObjectID(collection: "Person", key: "g"))?.schemaVersion } == nil)
        }
    }

    /// A dead process's intent whose entries cannot be read names no objects to reconcile:
    /// opening scans instead, which records what the write left on disk and removes its temp
    /// file. The intent is not just dropped, leaving the landed file unrecorded.
    @Test func anUnreadableIntentIsRecoveredByAScan() throws {
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            let new = Person(name: "new", age: 2)
            let dead = deadProcessID()
            let temp = path + "/Person/\(FileName.tempPrefix)\(dead).1.1"
            do {
                try ArchiveStore(directory: path).save(Person(name: "old", age: 1), forKey: "x")
                try overwrite(path + "/Person/x.json", with: try ArchiveCodec.json.encode(new))  // its rename landed
                try overwrite(temp, with: Data("half".utf8))  // and another of its temp files was left
                let db = try SQLiteConnection(path: path + "/.archive-sync/manifest.sqlite")
                try db.run("INSERT INTO intents(pid, start, entries) VALUES(?, 1, '[{\"collection\": 7')", [.integer(Int64(dead))])
            }
            let store = try ArchiveStore(directory: path)
            #expect(try store.history(of: Person.self, forKey: "x").map(\.version) == [1, 2])
            #expect(try store.load(Person.self, forKey: "x") == new)
            #expect(!entryExists(temp))
            #expect(try store.manifest.read { try $0.intents() }.isEmpty)
            #expect(try store.verify().isClean)
        }
    }

    /// An intent that names a file outside its collection's directory (a damaged or edited
    /// manifest) is not followed: recovery removes nothing there, and the store still opens.
    @Test func anIntentNamingAFileElsewhereIsNotFollowed() throws {
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            let outside = dir + "/outside.json"
            try overwrite(outside, with: Data("keep me".utf8))
            do {
                let store = try ArchiveStore(directory: path)
                try store.save(Person(name: "a", age: 1), forKey: "x")
                let dead = ProcessIdentity(pid: deadProcessID(), startTime: 1)
                for entry in [
                    WriteIntent.Entry(collection: "Person", key: "x", file: "x.json", temp: "../../outside.json", hash: nil),
                    WriteIntent.Entry(collection: "Person", key: "x", file: "../../outside.json", temp: nil, hash: nil),
                ] {
                    _ = try store.manifest.write { try $0.addIntent([entry], owner: dead) }
                }
            }
            let store = try ArchiveStore(directory: path)
            #expect(try contents(of: outside) == Data("keep me".utf8))
            #expect(try store.load(Person.self, forKey: "x") == Person(name: "a", age: 1))
            #expect(try store.manifest.read { try $0.intents() }.isEmpty)
        }
    }

    /// A store in `dir/store` whose object `Person/x` has a row naming `../../outside.json`: a
    /// file beside the store, which must never be touched. `body` gets the paths of both.
    private func withDamagedRow(_ body: (_ path: String, _ outside: String) throws -> Void) throws {
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            let outside = dir + "/outside.json"
            try overwrite(outside, with: Data("keep me".utf8))
            do {
                let store = try ArchiveStore(directory: path)
                try store.save(Person(name: "a", age: 1), forKey: "x")
                try store.save(Person(name: "b", age: 2), forKey: "y")
                try SQLiteConnection(path: path + "/.archive-sync/manifest.sqlite").run(
                    "UPDATE objects SET file = '../../outside.json' WHERE key = 'x'")
            }
            try body(path, outside)
            #expect(try contents(of: outside) == Data("keep me".utf8))
        }
    }

    /// A manifest row whose file name leads out of the collection's directory is refused with
    /// an error naming the object and its row when the object is removed; the file it names
    /// stays, and the refused remove changes nothing: the object is still listed, at the same
    /// version, and no intent is left behind.
    @Test func aRowNamingAFileElsewhereIsNotRemoved() throws {
        try withDamagedRow { path, _ throws in
            let store = try ArchiveStore(directory: path)
            let error = archiveError { try store.remove(Person.self, forKey: "x") }
            guard case .damagedRecord(let id, let file, _)? = error else {
                Issue.record("removing must refuse the damaged row, not \(String(describing: error))")
                return
            }
            #expect(id == ObjectID(unchecked: "Person", key: "x") && file == "../../outside.json")
            #expect(error!.description.contains("Person/x") && error!.description.contains("../../outside.json"), "\(error!)")
            #expect(!error!.description.contains("cross-device"), "\(error!)")
            #expect(try store.keys(of: Person.self) == ["x", "y"])
            #expect(try store.status().objects == 2)
            #expect(try store.history(of: Person.self, forKey: "x").count == 1)
            #expect(try store.manifest.read { try $0.intents() }.isEmpty)
            // A batch holding it is refused whole: the other object's delete does not happen either.
            #expect(
                archiveError {
                    try store.batch {
                        try $0.remove(Person.self, forKey: "y"); try $0.remove(Person.self, forKey: "x")
                    }
                } != nil)
            #expect(try store.keys(of: Person.self) == ["x", "y"])
        }
    }

    /// A damaged row is reported by name and never blocks the rest of the store: other objects
    /// are read and written, and a verify names the row.
    @Test func aDamagedRowNeverBlocksTheRestOfTheStore() throws {
        try withDamagedRow { path, _ throws in
            try FileManager.default.removeItem(atPath: path + "/Person/x.json")
            let store = try ArchiveStore(directory: path)
            guard case .damagedRecord(let id, _, _)? = archiveError({ try store.load(Person.self, forKey: "x") }) else {
                Issue.record("loading must name the damaged row")
                return
            }
            #expect(id.key == "x")
            #expect(try store.load(Person.self, forKey: "y") == Person(name: "b", age: 2))
            try store.save(Person(name: "c", age: 3), forKey: "z")
            let report = try store.verify()
            #expect(report.problems.map(\.id) == ["Person/x"] && report.problems.map(\.kind) == [.damaged], "\(report.problems)")
        }
    }

    /// A dead process's intent for an object whose row is damaged (a remove that was killed)
    /// is recovered without following the row: the store opens, the intent goes, and the row
    /// is left as it was (not recorded as deleted).
    @Test func anIntentForADamagedRowIsRecoveredWithoutFollowingIt() throws {
        try withDamagedRow { path, _ throws in
            do {
                let dead = ProcessIdentity(pid: deadProcessID(), startTime: 1)
                let entry = WriteIntent.Entry(collection: "Person", key: "x", file: "", temp: nil, hash: nil)
                _ = try ArchiveStore(directory: path).manifest.write { try $0.addIntent([entry], owner: dead) }
            }
            let store = try ArchiveStore(directory: path)
            #expect(try store.manifest.read { try $0.intents() }.isEmpty)
            #expect(try store.keys(of: Person.self) == ["x", "y"])
            #expect(try store.history(of: Person.self, forKey: "x").count == 1)
        }
    }

    /// A scan reports a damaged row by name and records the key's own file, which is still
    /// there, as the object's file again; the file the row named is never looked at.
    @Test func aScanReportsADamagedRowAndRecordsTheKeysFileAgain() throws {
        try withDamagedRow { path, _ throws in
            let store = try ArchiveStore(directory: path)
            let report = try store.scan()
            #expect(report.ignored.contains { $0.reason.contains("Person/x") && $0.reason.contains("recorded Person/x.json") }, "\(report.ignored)")
            #expect(try store.objects(in: "Person").map(\.file) == ["x.json", "y.json"])
            #expect(try store.load(Person.self, forKey: "x") == Person(name: "a", age: 1))
            try store.remove(Person.self, forKey: "x")
            #expect(!entryExists(path + "/Person/x.json"))
            #expect(try store.verify().isClean)
        }
    }

    /// A FIFO where an object's file should be is refused at once; it never blocks the store.
    @Test func aFIFOInPlaceOfAnObjectIsRefusedNotWaitedOn() throws {
        try withStore { store, path throws in
            try store.save(Person(name: "a", age: 1), forKey: "a")
            #expect(mkfifo(path + "/Person/fifo.json", 0o644) == 0)
            #expect(archiveError { try store.load(Person.self, forKey: "fifo") } != nil)
            try store.save(Person(name: "b", age: 2), forKey: "b")  // the store still works
            #expect(try store.load(Person.self, forKey: "b") == Person(name: "b", age: 2))
        }
    }

    /// Removing an object whose collection directory was deleted behind the store's back
    /// records the delete instead of reporting success and changing nothing.
    @Test func removeRecordsTheDeleteWhenTheDirectoryIsGone() throws {
        try withStore { store, path throws in
            try store.save(Person(name: "a", age: 1), forKey: "a")
            try FileManager.default.removeItem(atPath: path + "/Person")
            try store.remove(Person.self, forKey: "a")
            #expect(try store.keys(of: Person.self).isEmpty)
            #expect(try store.history(of: Person.self, forKey: "a").last?.isDeleted == true)
        }
    }

    /// Two threads listing one directory at once each see all of it (a dup'd descriptor would
    /// share the offset that readdir moves, and each would get part of the listing).
    @Test func concurrentListingsOfOneDirectoryEachSeeAllOfIt() throws {
        try withTemporaryDirectory { path throws in
            for n in 0..<5000 { #expect(FileManager.default.createFile(atPath: path + "/f\(n)", contents: nil)) }
            let directory = try FileSystem.openDirectory(path, path: path)
            let counts = TracedMutex<[Int]>([])
            DispatchQueue.concurrentPerform(iterations: 2) { _ in
                for _ in 0..<10 {
                    let count = (try? FileSystem.listDirectory(directory, path: path).count) ?? -1
                    counts.withLock { $0.append(count) }
                }
            }
            #expect(counts.withLock { $0 } == Array(repeating: 5000, count: 20))
        }
    }
}

struct IntentEncodingTests {
    /// Intents are written without `JSONEncoder` and read with `JSONDecoder`: every field,
    /// and every character a key or a collection can hold, must come back as it was.
    @Test func intentEntriesWrittenByHandReadBackExactly() throws {
        let odd = ["plain", "quo\"te", "back\\slash", "new\nline\ttab", "nul\u{0}bell\u{7}", "é composé", "e\u{301}", "🦊/emoji", "\u{1F}"]
        var entries: [WriteIntent.Entry] = []
        for (index, text) in odd.enumerated() {
            var entry = WriteIntent.Entry(
                collection: "Coll" + text, key: text, file: text + ".json", temp: index % 2 == 0 ? ".tmp." + text : nil,
                hash: index % 3 == 0 ? nil : ContentHash(of: Data(text.utf8)), schemaVersion: index % 4 == 0 ? nil : index)
            if index % 2 == 1 {
                entry.vector = VersionVector([ReplicaID(rawValue: "a\(text)"): index, ReplicaID(rawValue: "b"): Int.max])
                entry.modified = Int64.min + Int64(index)
                entry.author = ReplicaID(rawValue: text)
            }
            entries.append(entry)
        }
        let text = WriteIntent.Entry.json(entries)
        let decoded = try JSONDecoder().decode([WriteIntent.Entry].self, from: Data(text.utf8))
        #expect(decoded == entries)
        #expect(try JSONSerialization.jsonObject(with: Data(text.utf8)) is [Any])
        #expect(WriteIntent.Entry.json([]) == "[]")
        // The same document as JSONEncoder's, field for field.
        let theirs = try JSONSerialization.jsonObject(with: JSONEncoder().encode(entries)) as? NSArray
        let ours = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? NSArray
        #expect(theirs == ours)
    }
}
