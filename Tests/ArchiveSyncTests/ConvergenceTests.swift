import ArchiveMerge
import ArchiveStore
import Foundation
import TestSupport
import Testing

@testable import ArchiveSync

/// One side's edits in a round, made through the library or behind its back on disk.
private struct Editor {
    let store: ArchiveStore
    let path: String
    /// What this side holds now, as the test made it.
    var live: [ObjectID: Data]
    var deleted: Set<ObjectID> = []
    var written: Set<ObjectID> = []

    static let collections = ["Person", "Car"]

    mutating func randomOperation(_ rng: inout SeededGenerator, tag: String) throws {
        let keys = Editor.collections.flatMap { c in (0..<8).map { try! ObjectID(collection: c, key: "k\($0)") } }
        let absent = keys.filter { live[$0] == nil }
        let present = keys.filter { live[$0] != nil }.sorted()
        // A third of new contents come from a small pool, so both sides sometimes write the same bytes.
        let content = Data(
            (Int.random(in: 0..<3, using: &rng) == 0 ? "{\"v\":\"shared-\(Int.random(in: 0..<3, using: &rng))\"}" : "{\"v\":\"\(tag)\"}").utf8)
        let choice = (Int.random(in: 0..<6, using: &rng), present.randomElement(using: &rng), absent.randomElement(using: &rng))
        if ProcessInfo.processInfo.environment["SYNC_TRACE"] != nil {
            print("TRACE \(path) op \(choice) \(String(decoding: content, as: UTF8.self))")
        }
        switch choice {
        case (0, _, let id?), (1, nil, let id?):
            try write(content, to: id)
        case (1, let id?, _), (2, let id?, _):
            try write(content, to: id)
        case (3, let id?, _):
            try store.remove(id)
            forget(id)
        case (4, let id?, let to?):  // rename
            try write(live[id]!, to: to)
            try store.remove(id)
            forget(id)
        case (5, let id?, _):  // behind the store's back: edit or delete the file itself
            let file = path + "/\(id.collection)/\(id.key).json"
            if Bool.random(using: &rng) {
                try content.write(to: URL(fileURLWithPath: file))
                if live[id] != content { written.insert(id) }
                live[id] = content
            } else {
                try FileManager.default.removeItem(atPath: file)
                forget(id)
            }
        default:
            break
        }
    }

    private mutating func write(_ content: Data, to id: ObjectID) throws {
        try store.put(content, as: id)
        // Saving what is already there makes no new version: not an edit.
        if live[id] != content { written.insert(id) }
        live[id] = content
        deleted.remove(id)
    }

    private mutating func forget(_ id: ObjectID) {
        live[id] = nil
        deleted.insert(id)
        written.remove(id)
    }
}

@Suite("Two stores converge, losing nothing")
struct ConvergenceTests {
    /// Seeds per run: SYNC_SEEDS in the environment, or 300.
    static let seeds = UInt64(ProcessInfo.processInfo.environment["SYNC_SEEDS"].flatMap { Int($0) } ?? 300)

    /// Two stores with a shared history get random creates, edits, deletes, renames and edits
    /// behind the store's back on both sides (overlapping keys on purpose), then a sync, three
    /// rounds per seed. After each sync: both stores hold the same objects with the same bytes,
    /// on disk too; every object's latest contents on either side before the sync is at its id,
    /// in a conflict copy or in history; what a side wrote is live (at its id or in a copy) or,
    /// where the sync merged it field by field, every field it changed holds its value at the
    /// id; a delete the other side did not oppose with an edit is gone from both; and the next
    /// sync changes nothing.
    @Test func randomEditsOnBothSidesConverge() async throws {
        let only = ProcessInfo.processInfo.environment["SYNC_SEED"].flatMap { UInt64($0) }
        for seed in only.map({ $0...$0 }) ?? 1...Self.seeds {
            try await withTemporaryDirectory { dir in
                try await runSeed(seed, in: dir)
            }
        }
    }

    /// Runs one seed; `sync` makes the sync of the two stores (by default both in this process).
    func runSeed(
        _ seed: UInt64, in dir: String,
        sync: (ArchiveStore, ArchiveStore, SyncOptions) throws -> Sync = { Sync(local: $0, remote: $1, options: $2) }
    ) async throws {
        var rng = SeededGenerator(seed: seed)
        let a = try ArchiveStore(directory: dir + "/a")
        let b = try ArchiveStore(directory: dir + "/b")
        var sideA = Editor(store: a, path: dir + "/a", live: [:])
        for n in 0..<Int.random(in: 4...12, using: &rng) { try sideA.randomOperation(&rng, tag: "base-\(seed)-\(n)") }
        _ = try await sync(a, b, SyncOptions(force: true)).run()
        for round in 0..<3 {
            let base = try a.liveHashes()
            let baseContents = try base.keys.reduce(into: [ObjectID: Data]()) { $0[$1] = try a.data(for: $1) }
            var editors = [Editor(store: a, path: dir + "/a", live: [:]), Editor(store: b, path: dir + "/b", live: [:])]
            for i in 0..<2 {
                editors[i].live = Dictionary(uniqueKeysWithValues: try base.keys.map { ($0, try editors[i].store.data(for: $0)) })
                for n in 0..<Int.random(in: 0...8, using: &rng) {
                    try editors[i].randomOperation(&rng, tag: "s\(seed)-r\(round)-\(i)-\(n)")
                }
            }
            let report = try await sync(a, b, SyncOptions(force: true)).run()
            let context = "seed \(seed), round \(round): \(report)"
            #expect(report.skipped.isEmpty, "\(context)")

            let (liveA, liveB) = (try a.liveHashes(), try b.liveHashes())
            #expect(liveA == liveB, "the stores differ; \(context)")
            #expect(filesOnDisk(dir + "/a") == filesOnDisk(dir + "/b"), "the files differ; \(context)")

            let kept = try a.allKeptHashes().union(b.allKeptHashes())
            let liveNow = Set(liveA.values)
            for editor in editors {
                for (id, content) in editor.live {
                    let hash = ContentHash(of: content)
                    #expect(liveNow.contains(hash) || kept.contains(hash), "\(id)'s latest contents were lost; \(context)")
                    // What this round wrote beats a delete and survives a conflict: it is live,
                    // at its id or in a conflict copy, not only in history.
                    if editor.written.contains(id) {
                        if report.merges.contains(where: { $0.id == id.description }) {
                            let changed = try changedPaths(from: baseContents[id], to: content)
                            let lost = Document.diff(try Document(json: content), try Document(json: a.data(for: id))).map(\.path)
                            #expect(changed.isDisjoint(with: lost), "\(id) was merged without this side's fields \(lost); \(context)")
                        } else {
                            #expect(liveNow.contains(hash), "\(id)'s new contents are no longer live; \(context)")
                        }
                    }
                }
            }
            for (i, editor) in editors.enumerated() {
                let other = editors[1 - i]
                for id in editor.deleted where base[id] != nil && !other.written.contains(id) && !other.deleted.contains(id) {
                    #expect(liveA[id] == nil, "\(id) deleted on one side and not edited on the other survived; \(context)")
                }
            }
            let again = try await sync(a, b, SyncOptions()).run()
            #expect(again.changes == 0 && again.vectorsMerged == 0, "the sync after a sync did something: \(again); \(context)")
        }
    }

    /// Where `content` differs from `base` (everything, when there was no base).
    private func changedPaths(from base: Data?, to content: Data) throws -> Set<DocumentPath> {
        guard let base else { return [DocumentPath()] }
        return Set(Document.diff(try Document(json: base), try Document(json: content)).map(\.path))
    }

    /// A checkpoint ahead of its store's sequence (a store restored from an older copy) falls
    /// back to a full diff, which still converges.
    @Test func aCheckpointThatDoesNotMatchFallsBackToAFullDiff() async throws {
        try await withTemporaryDirectory { dir in
            let a = try ArchiveStore(directory: dir + "/a")
            let b = try ArchiveStore(directory: dir + "/b")
            try a.put(Data("{\"v\":1}".utf8), as: ObjectID(collection: "Person", key: "p1"))
            let first = try await Sync(local: a, remote: b).run()
            #expect(!first.incremental && first.copiedToB == 1)
            try b.put(Data("{\"v\":2}".utf8), as: ObjectID(collection: "Person", key: "p2"))
            let second = try await Sync(local: a, remote: b).run()
            #expect(second.incremental && second.copiedToA == 1)
            try b.setCheckpoint(for: a.replica, to: 1_000)
            try a.put(Data("{\"v\":3}".utf8), as: ObjectID(collection: "Person", key: "p3"))
            let third = try await Sync(local: a, remote: b).run()
            #expect(!third.incremental && third.copiedToB == 1)
            #expect(try a.liveHashes() == b.liveHashes())
        }
    }

    /// An edit made on disk after the sync read the manifest (not yet recorded) is not
    /// overwritten: the write is skipped and the next sync carries the edit.
    @Test func aFileChangedAfterThePlanIsNeverOverwritten() async throws {
        try await withTemporaryDirectory { dir in
            let a = try ArchiveStore(directory: dir + "/a")
            let b = try ArchiveStore(directory: dir + "/b")
            let id = try ObjectID(collection: "Person", key: "p1")
            try a.put(Data("{\"v\":1}".utf8), as: id)
            _ = try await Sync(local: a, remote: b).run()
            try a.put(Data("{\"v\":2}".utf8), as: id)
            // B's file changes on disk, unrecorded, while the sync would copy A's version over it.
            try Data("{\"v\":\"edited in b\"}".utf8).write(to: URL(fileURLWithPath: dir + "/b/Person/p1.json"))
            let applied = try b.applyIncoming([
                IncomingObject(
                    id: id, fileExtension: "json", content: Data("{\"v\":2}".utf8),
                    version: IncomingVersion(
                        vector: VersionVector([a.replica: 2]), modified: 0, author: a.replica, expected: ContentHash(of: Data("{\"v\":1}".utf8))))
            ])
            #expect(applied == [false])
            #expect(
                try String(decoding: Data(contentsOf: URL(fileURLWithPath: dir + "/b/Person/p1.json")), as: UTF8.self) == "{\"v\":\"edited in b\"}")
            // The next sync sees both edits: a conflict that keeps both.
            let report = try await Sync(local: a, remote: b).run()
            #expect(report.conflicts.count == 1)
            #expect(try a.liveHashes() == b.liveHashes())
            #expect(try a.conflictCopies().count == 1)
        }
    }

    /// A file that appeared on disk where the sync planned a new object (not yet recorded) is
    /// not overwritten: the rename that would land the object refuses an existing name.
    @Test func aFileCreatedAfterThePlanIsNeverOverwritten() async throws {
        try withTemporaryDirectory { dir in
            let a = try ArchiveStore(directory: dir + "/a")
            let b = try ArchiveStore(directory: dir + "/b")
            // Enough objects for the batch's renames to run on every core.
            let objects = try (0..<300).map { i in
                IncomingObject(
                    id: try ObjectID(collection: "Person", key: "p\(i)"), fileExtension: "json", content: Data("{\"v\":\(i)}".utf8),
                    version: IncomingVersion(vector: VersionVector([a.replica: 1]), modified: 0, author: a.replica, expected: nil))
            }
            try FileManager.default.createDirectory(atPath: dir + "/b/Person", withIntermediateDirectories: true)
            try Data("made in b".utf8).write(to: URL(fileURLWithPath: dir + "/b/Person/p7.json"))
            let applied = try b.applyIncoming(objects)
            #expect(applied.enumerated().filter { !$0.element }.map(\.offset) == [7])
            #expect(try String(decoding: Data(contentsOf: URL(fileURLWithPath: dir + "/b/Person/p7.json")), as: UTF8.self) == "made in b")
            #expect(try String(decoding: Data(contentsOf: URL(fileURLWithPath: dir + "/b/Person/p8.json")), as: UTF8.self) == "{\"v\":8}")
            // No temp file is left behind.
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir + "/b/Person").count == 300)
        }
    }

    @Test func aSyncThatWouldDeleteMostOfASideStopsUnlessForced() async throws {
        try await withTemporaryDirectory { dir in
            let a = try ArchiveStore(directory: dir + "/a")
            let b = try ArchiveStore(directory: dir + "/b")
            for n in 0..<4 { try a.put(Data("{\"n\":\(n)}".utf8), as: ObjectID(collection: "Person", key: "p\(n)")) }
            _ = try await Sync(local: a, remote: b).run()
            for n in 0..<3 { try a.remove(ObjectID(collection: "Person", key: "p\(n)")) }
            await #expect(throws: SyncError.tooManyDeletes(store: b.path, deletes: 3, objects: 4)) {
                _ = try await Sync(local: a, remote: b).run()
            }
            #expect(try b.liveHashes().count == 4)
            let forced = try await Sync(local: a, remote: b, options: SyncOptions(force: true)).run()
            #expect(forced.deletedOnB == 3)
            #expect(try b.liveHashes().count == 1)
        }
    }

    @Test func aStoreCannotBeSyncedWithACopyOfItself() async throws {
        try await withTemporaryDirectory { dir in
            let a = try ArchiveStore(directory: dir + "/a")
            try a.put(Data("{}".utf8), as: ObjectID(collection: "Person", key: "p"))
            try FileManager.default.copyItem(atPath: dir + "/a", toPath: dir + "/copy")
            let copy = try ArchiveStore(directory: dir + "/copy")
            await #expect(throws: SyncError.sameReplica(a.path, copy.path)) {
                _ = try await Sync(local: a, remote: copy).run()
            }
        }
    }
}
