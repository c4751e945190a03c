import ArchiveMerge
import ArchiveStore
import Foundation
import TestSupport
import Testing

@testable import ArchiveSync

private let person = try! ObjectID(collection: "Person", key: "p1")

private func put(_ store: ArchiveStore, _ json: String, as id: ObjectID = person) throws {
    try store.put(Data(json.utf8), as: id)
}

private func text(_ store: ArchiveStore, _ id: ObjectID = person) throws -> String {
    String(decoding: try store.data(for: id), as: UTF8.self)
}

/// The current row of `id`.
private func entry(_ store: ArchiveStore, _ id: ObjectID = person) throws -> ReplicaEntry {
    try #require(try store.replicaEntries(for: [id]).first ?? nil)
}

/// Two stores that share `base` at `person`, then edited apart: `ours` in A, `theirs` in B.
private func concurrentEdits(in dir: String, base: String, ours: String, theirs: String, historyLimit: Int? = nil) async throws -> (
    ArchiveStore, ArchiveStore
) {
    let a = try ArchiveStore(directory: dir + "/a", options: .init(historyLimit: historyLimit))
    let b = try ArchiveStore(directory: dir + "/b", options: .init(historyLimit: historyLimit))
    try put(a, base)
    _ = try await Sync(local: a, remote: b).run()
    try put(a, ours)
    try put(b, theirs)
    return (a, b)
}

@Suite("Sync: concurrent edits merged field by field")
struct FieldMergeTests {
    /// In the store's own form (sorted keys), so that a merge can give one side's bytes exactly.
    static let base = #"{"address":{"city":"Oslo","zip":"0150"},"age":30,"name":"Ann","tags":["a"]}"#

    /// Two stores whose edits of `person` touch different fields: `name` in A, `age` in B.
    static func disjointEdits(in dir: String) async throws -> (ArchiveStore, ArchiveStore) {
        try await concurrentEdits(
            in: dir, base: base, ours: base.replacingOccurrences(of: "Ann", with: "Anna"), theirs: base.replacingOccurrences(of: "30", with: "31"))
    }

    /// Disjoint edits merge: no copy, one version with the same bytes and vector on both
    /// sides, whichever side runs the sync; each side's edit stays in its history.
    @Test(arguments: [false, true]) func disjointEditsMergeWithoutACopyWhicheverSideRuns(reversed: Bool) async throws {
        try await withTemporaryDirectory { dir in
            let (a, b) = try await Self.disjointEdits(in: dir)
            let (ea, eb) = (try entry(a), try entry(b))
            let report = try await (reversed ? Sync(local: b, remote: a) : Sync(local: a, remote: b)).run()
            #expect(report.merges == [.init(id: "Person/p1", paths: ["age", "name"])], "\(report)")
            #expect(report.conflicts.isEmpty && report.skipped.isEmpty, "\(report)")
            #expect(try a.conflictCopies().isEmpty && b.conflictCopies().isEmpty)
            let merged = #"{"address":{"city":"Oslo","zip":"0150"},"age":31,"name":"Anna","tags":["a"]}"#
            #expect(try text(a) == merged && text(b) == merged)
            let (ma, mb) = (try entry(a), try entry(b))
            #expect(ma.vector == mb.vector && ma.hash == mb.hash && ma.author == mb.author && ma.modified == mb.modified)
            // The vector is the pair's, not the runner's: the join plus one change of a replica
            // id made from the two versions.
            #expect(ma.vector == SyncPlanner.mergedVersion(ea, eb).vector && ma.vector == SyncPlanner.mergedVersion(eb, ea).vector)
            #expect(ma.vector.dominates(ea.vector) && ma.vector.dominates(eb.vector))
            #expect(try a.history(person).contains { $0.hash == ea.hash } && b.history(person).contains { $0.hash == eb.hash })
            let again = try await Sync(local: a, remote: b).run()
            #expect(again.changes == 0 && again.vectorsMerged == 0, "\(again)")
        }
    }

    /// One side made the other's change too: the merge is that side's contents, which it then
    /// records with the merged vector like the other side.
    @Test func aMergeEqualToOneSideRecordsTheMergedVectorThereToo() async throws {
        try await withTemporaryDirectory { dir in
            let anna = Self.base.replacingOccurrences(of: "Ann", with: "Anna")
            let (a, b) = try await concurrentEdits(in: dir, base: Self.base, ours: anna, theirs: anna.replacingOccurrences(of: "30", with: "31"))
            let report = try await Sync(local: a, remote: b).run()
            #expect(report.merges == [.init(id: "Person/p1", paths: ["age", "name"])], "\(report)")
            #expect(try text(a) == text(b) && entry(a).vector == entry(b).vector)
            let again = try await Sync(local: a, remote: b).run()
            #expect(again.changes == 0 && again.vectorsMerged == 0, "\(again)")
        }
    }

    @Test func theSameFieldChangedBothWaysKeepsACopyAndNamesThePath() async throws {
        try await withTemporaryDirectory { dir in
            let (a, b) = try await concurrentEdits(
                in: dir, base: Self.base, ours: Self.base.replacingOccurrences(of: "Ann", with: "Anna"),
                theirs: Self.base.replacingOccurrences(of: "Ann", with: "Annie").replacingOccurrences(of: "30", with: "31"))
            let report = try await Sync(local: a, remote: b).run()
            #expect(report.merges.isEmpty, "\(report)")
            #expect(report.conflicts.map(\.paths) == [["name"]], "\(report)")
            #expect(try a.conflictCopies().count == 1 && b.conflictCopies().count == 1)
            #expect(try a.liveHashes() == b.liveHashes())
        }
    }

    @Test func nestedObjectsMergeMemberByMemberAndConflictAtTheNestedPath() async throws {
        try await withTemporaryDirectory { dir in
            let (a, b) = try await concurrentEdits(
                in: dir, base: Self.base, ours: Self.base.replacingOccurrences(of: "Oslo", with: "Bergen"),
                theirs: Self.base.replacingOccurrences(of: "0150", with: "5003").replacingOccurrences(of: "Ann", with: "Anna"))
            let report = try await Sync(local: a, remote: b).run()
            #expect(report.merges == [.init(id: "Person/p1", paths: ["address.city", "address.zip", "name"])], "\(report)")
            #expect(try text(a) == #"{"address":{"city":"Bergen","zip":"5003"},"age":30,"name":"Anna","tags":["a"]}"#)
            #expect(try text(a) == text(b))
        }
        try await withTemporaryDirectory { dir in
            let (a, b) = try await concurrentEdits(
                in: dir, base: Self.base, ours: Self.base.replacingOccurrences(of: "Oslo", with: "Bergen"),
                theirs: Self.base.replacingOccurrences(of: "Oslo", with: "Trondheim"))
            let report = try await Sync(local: a, remote: b).run()
            #expect(report.conflicts.map(\.paths) == [["address.city"]], "\(report)")
        }
    }

    /// Arrays are values: edited on both sides, they conflict; so does a member removed on one
    /// side and changed on the other.
    @Test func anArrayEditedOnBothSidesOrARemovedAndEditedMemberKeepsACopy() async throws {
        try await withTemporaryDirectory { dir in
            let (a, b) = try await concurrentEdits(
                in: dir, base: Self.base, ours: Self.base.replacingOccurrences(of: #"["a"]"#, with: #"["a","b"]"#),
                theirs: Self.base.replacingOccurrences(of: #"["a"]"#, with: #"["c","a"]"#))
            let report = try await Sync(local: a, remote: b).run()
            #expect(report.conflicts.map(\.paths) == [["tags"]] && report.merges.isEmpty, "\(report)")
            #expect(try a.conflictCopies().count == 1)
        }
        try await withTemporaryDirectory { dir in
            let (a, b) = try await concurrentEdits(
                in: dir, base: Self.base, ours: Self.base.replacingOccurrences(of: #""age":30,"#, with: ""),
                theirs: Self.base.replacingOccurrences(of: "30", with: "31"))
            let report = try await Sync(local: a, remote: b).run()
            #expect(report.conflicts.map(\.paths) == [["age"]], "\(report)")
        }
    }

    /// The base pruned from both histories (a history of 2 versions, two edits on each side):
    /// no merge, a copy as without merging.
    @Test func historyPrunedPastTheBaseFallsBackToACopy() async throws {
        try await withTemporaryDirectory { dir in
            let (a, b) = try await concurrentEdits(
                in: dir, base: Self.base, ours: Self.base.replacingOccurrences(of: "Ann", with: "Anna"),
                theirs: Self.base.replacingOccurrences(of: "30", with: "31"), historyLimit: 2)
            try put(a, Self.base.replacingOccurrences(of: "Ann", with: "Anne"))
            try put(b, Self.base.replacingOccurrences(of: "30", with: "32"))
            let report = try await Sync(local: a, remote: b).run()
            #expect(report.merges.isEmpty && report.conflicts.map(\.paths) == [[]], "\(report)")
            #expect(try a.conflictCopies().count == 1 && b.conflictCopies().count == 1)
        }
    }

    /// Two pairs of stores merge the same two concurrent versions apart (A with B, C with D;
    /// C holds A's version, D holds B's): both write the same bytes and vector, so when the
    /// pairs meet there is one version and nothing to do.
    @Test func twoPairsMergingTheSameEditsApartConverge() async throws {
        try await withTemporaryDirectory { dir in
            let stores = try ["a", "b", "c", "d"].map { try ArchiveStore(directory: dir + "/" + $0) }
            let (a, b, c, d) = (stores[0], stores[1], stores[2], stores[3])
            try put(a, Self.base)
            for other in [b, c, d] { _ = try await Sync(local: a, remote: other).run() }
            try put(a, Self.base.replacingOccurrences(of: "Ann", with: "Anna"))
            try put(b, Self.base.replacingOccurrences(of: "Oslo", with: "Bergen"))
            _ = try await Sync(local: a, remote: c).run()
            _ = try await Sync(local: d, remote: b).run()
            #expect(try text(c) == text(a) && text(d) == text(b))
            let first = try await Sync(local: a, remote: b).run()
            let second = try await Sync(local: d, remote: c).run()
            #expect(first.merges.count == 1 && second.merges.count == 1, "\(first) \(second)")
            #expect(try Set(stores.map { try entry($0).vector }).count == 1)
            #expect(try Set(stores.map { try text($0) }).count == 1)
            for (x, y) in [(a, c), (b, d), (a, d)] {
                let met = try await Sync(local: x, remote: y).run()
                #expect(met.changes == 0 && met.vectorsMerged == 0, "\(met)")
            }
            #expect(try stores.allSatisfy { try $0.conflictCopies().isEmpty })
        }
    }

    @Test func mergeNoneKeepsACopyAsBefore() async throws {
        try await withTemporaryDirectory { dir in
            let (a, b) = try await Self.disjointEdits(in: dir)
            let report = try await Sync(local: a, remote: b, options: SyncOptions(merge: .none)).run()
            #expect(report.merges.isEmpty && report.conflicts.count == 1 && report.conflicts[0].paths == nil, "\(report)")
            #expect(try a.conflictCopies().count == 1)
        }
    }

    /// --prefer decides only a field conflict: disjoint edits still merge.
    @Test func aPreferenceDecidesOnlyWhatTheMergeLeaves() async throws {
        try await withTemporaryDirectory { dir in
            let (a, b) = try await Self.disjointEdits(in: dir)
            let report = try await Sync(local: a, remote: b, options: SyncOptions(preference: .b)).run()
            #expect(report.merges.count == 1 && report.conflicts.isEmpty, "\(report)")
        }
        try await withTemporaryDirectory { dir in
            let ours = Self.base.replacingOccurrences(of: "Ann", with: "Anna")
            let (a, b) = try await concurrentEdits(
                in: dir, base: Self.base, ours: ours, theirs: Self.base.replacingOccurrences(of: "Ann", with: "Annie"))
            let report = try await Sync(local: a, remote: b, options: SyncOptions(preference: .a)).run()
            #expect(report.conflicts.map(\.paths) == [["name"]] && report.conflicts[0].copy == nil, "\(report)")
            #expect(try text(b) == ours && a.conflictCopies().isEmpty)
        }
    }

    /// A dry run says what would merge, and changes nothing.
    @Test func aDryRunListsTheMerge() async throws {
        try await withTemporaryDirectory { dir in
            let (a, b) = try await Self.disjointEdits(in: dir)
            let before = try entry(a)
            let plan = try await Sync(local: a, remote: b, options: SyncOptions(dryRun: true)).run()
            #expect(plan.actions == [.init(id: "Person/p1", kind: .merge, to: .a, paths: ["age", "name"])], "\(plan)")
            #expect(try entry(a) == before)
        }
    }

    /// A property-list object merges the same way, and is written back as a binary property list.
    @Test func propertyListObjectsMergeToo() async throws {
        try await withTemporaryDirectory { dir in
            func plist(_ object: [String: Any]) throws -> Data {
                try PropertyListSerialization.data(fromPropertyList: object, format: .binary, options: 0)
            }
            let a = try ArchiveStore(directory: dir + "/a", options: .init(codec: .propertyList))
            let b = try ArchiveStore(directory: dir + "/b", options: .init(codec: .propertyList))
            try a.put(try plist(["name": "Ann", "age": 30, "city": "Oslo"]), as: person, codec: .propertyList)
            _ = try await Sync(local: a, remote: b).run()
            try a.put(try plist(["name": "Anna", "age": 30, "city": "Oslo"]), as: person, codec: .propertyList)
            try b.put(try plist(["name": "Ann", "age": 31, "city": "Oslo"]), as: person, codec: .propertyList)
            let report = try await Sync(local: a, remote: b).run()
            #expect(report.merges == [.init(id: "Person/p1", paths: ["age", "name"])], "\(report)")
            let merged = try PropertyListSerialization.propertyList(from: a.data(for: person), format: nil) as? NSDictionary
            #expect(merged == ["name": "Anna", "age": 31, "city": "Oslo"] as NSDictionary)
            #expect(try a.data(for: person).starts(with: Data("bplist00".utf8)) && a.data(for: person) == b.data(for: person))
            #expect(try entry(a).file == "p1.plist")
        }
    }

    /// A far side that speaks only protocol version 1 is never sent the merge-base request
    /// (which it would take for a broken frame); the base in this side's history still merges.
    @Test func aFarSideOfProtocolVersion1MergesFromThisSidesHistory() async throws {
        try await withTemporaryDirectory { dir in
            let (a, b) = try await Self.disjointEdits(in: dir)
            let path = b.path
            let report = try await offPool {
                let far = try pipeReplica(path, versions: 1...1)
                #expect(far.version == 1)
                return try Sync(a: LocalReplica(a), b: far, options: SyncOptions()).runNow()
            }
            #expect(report.merges.count == 1 && report.conflicts.isEmpty, "\(report)")
            #expect(try a.liveHashes() == b.liveHashes() && a.conflictCopies().isEmpty)
        }
    }

    /// Over a pipe to `serve --stdio` (the new request of the protocol), either side first.
    @Test(arguments: [false, true]) func aMergeOverThePipeWritesOneVersionOnBothSides(remoteFirst: Bool) async throws {
        try await withTemporaryDirectory { dir in
            let (a, b) = try await Self.disjointEdits(in: dir)
            let path = b.path
            let report = try await offPool {
                let far = try pipeReplica(path)
                let sync =
                    remoteFirst ? Sync(a: far, b: LocalReplica(a), options: SyncOptions()) : Sync(a: LocalReplica(a), b: far, options: SyncOptions())
                return try sync.runNow()
            }
            #expect(report.merges == [.init(id: "Person/p1", paths: ["age", "name"])], "\(report)")
            #expect(try text(a) == text(b) && entry(a).vector == entry(b).vector)
        }
    }
}

@Suite("Planner: field merges")
struct FieldMergePlannerTests {
    private func row(_ file: String, _ vector: VersionVector, _ hash: String) throws -> ReplicaEntry {
        ReplicaEntry(
            id: person, file: file, vector: vector, hash: ContentHash(of: Data(hash.utf8)), size: 1, modified: 5, author: ReplicaID(rawValue: "r"),
            isDeleted: false, sequence: 1)
    }

    @Test func aConcurrentPairOfDocumentsAsksForAMergeOnlyWhenMergingIsOnAndTheCodecsAgree() throws {
        let (x, y) = (ReplicaID(rawValue: "x"), ReplicaID(rawValue: "y"))
        let a = try row("p1.json", VersionVector([x: 2, y: 1]), "a")
        let b = try row("p1.json", VersionVector([x: 1, y: 2]), "b")
        guard case .fieldMerge(_, _, .conflict)? = Optional(SyncPlanner.action(a: a, b: b, preference: nil, merge: .fields)) else {
            Issue.record("no field merge planned")
            return
        }
        if case .conflict = SyncPlanner.action(a: a, b: b, preference: nil, merge: .none) {} else { Issue.record("merge none merged") }
        let plist = try row("p1.plist", VersionVector([x: 1, y: 2]), "b")
        if case .conflict = SyncPlanner.action(a: a, b: plist, preference: nil, merge: .fields) {} else { Issue.record("codecs differ") }
        let bin = try row("p1.bin", VersionVector([x: 1, y: 2]), "b")
        let binA = try row("p1.bin", VersionVector([x: 2, y: 1]), "a")
        if case .conflict = SyncPlanner.action(a: binA, b: bin, preference: nil, merge: .fields) {} else { Issue.record("not a document") }
        let version = SyncPlanner.mergedVersion(a, b)
        #expect(version.vector == SyncPlanner.mergedVersion(b, a).vector && version.author == SyncPlanner.mergedVersion(b, a).author)
        #expect(version.vector.dominates(a.vector) && version.vector.dominates(b.vector) && version.vector.counters[version.author] == 1)
    }
}

extension RemoteSyncTests {
    @Suite("Field merges through the command line and ssh")
    struct FieldMergeCommandTests {
        @Test func diffShowsTheMergeAndSyncSaysIt() async throws {
            try await withTemporaryDirectory { dir in
                let (a, b) = try await FieldMergeTests.disjointEdits(in: dir)
                let diff = try await runArchiveSyncOffPool(["diff", dir + "/a", dir + "/b"])
                #expect(diff.status == 0 && diff.output.contains("merge    Person/p1: age, name") && diff.output.contains("1 merged"), "\(diff)")
                let sync = try await runArchiveSyncOffPool(["sync", dir + "/a", dir + "/b"])
                #expect(sync.status == 0 && sync.output.contains("merged Person/p1: age, name") && sync.output.hasSuffix(": 1 merged\n"), "\(sync)")
                #expect(try text(a) == text(b) && a.conflictCopies().isEmpty)
            }
            try await withTemporaryDirectory { dir in
                _ = try await FieldMergeTests.disjointEdits(in: dir)
                let json = try await runArchiveSyncOffPool(["sync", dir + "/a", dir + "/b", "--json"])
                let report = try JSONDecoder().decode(SyncReport.self, from: Data(json.output.utf8))
                #expect(json.status == 0 && report.merges == [.init(id: "Person/p1", paths: ["age", "name"])], "\(json)")
            }
        }

        @Test func mergeNoneKeepsACopyAndAFieldConflictNamesItsPath() async throws {
            try await withTemporaryDirectory { dir in
                let (a, _) = try await FieldMergeTests.disjointEdits(in: dir)
                let sync = try await runArchiveSyncOffPool(["sync", dir + "/a", dir + "/b", "--merge", "none"])
                #expect(sync.status == 0 && sync.output.contains("conflict Person/p1: kept") && sync.output.hasSuffix(": 1 conflict\n"), "\(sync)")
                #expect(try a.conflictCopies().count == 1)
                let bad = try await runArchiveSyncOffPool(["sync", dir + "/a", dir + "/b", "--merge", "lines"])
                #expect(bad.status == 2, "\(bad)")
            }
            try await withTemporaryDirectory { dir in
                _ = try await concurrentEdits(
                    in: dir, base: FieldMergeTests.base, ours: FieldMergeTests.base.replacingOccurrences(of: "Oslo", with: "Bergen"),
                    theirs: FieldMergeTests.base.replacingOccurrences(of: "Oslo", with: "Molde"))
                let sync = try await runArchiveSyncOffPool(["sync", dir + "/a", dir + "/b"])
                #expect(sync.status == 0 && sync.output.contains("conflict Person/p1 (address.city changed on both sides): kept"), "\(sync)")
            }
        }

        @Test(arguments: [false, true]) func aMergeThroughSSHEitherWay(farFirst: Bool) async throws {
            let server = try SSHServer.start()
            defer { server.stop() }
            try await withTemporaryDirectory { dir in
                let (a, b) = try await FieldMergeTests.disjointEdits(in: dir)
                let (here, far) = (dir + "/a", server.location(dir + "/b"))
                let remote = ["--rsh", server.rsh, "--remote-cmd", archiveSyncProgram]
                let sync = try await runArchiveSyncOffPool(["sync"] + (farFirst ? [far, here] : [here, far]) + remote)
                #expect(sync.status == 0 && sync.output.contains("merged Person/p1: age, name"), "\(sync)")
                #expect(try text(a) == text(b) && entry(a).vector == entry(b).vector && a.conflictCopies().isEmpty)
            }
        }
    }
}

extension FieldMergePlannerTests {
    /// Each merge adds an entry to the vector: from 500 entries on the planner stops merging, so
    /// that vectors stay within the 1,000 entries the protocol carries.
    @Test func anObjectWithAVectorOf500EntriesIsNoLongerMerged() throws {
        /// A concurrent pair whose joined vector has `others` + 2 entries.
        func pair(others: Int) -> (ReplicaEntry, ReplicaEntry) {
            let shared = Dictionary(uniqueKeysWithValues: (0..<others).map { (ReplicaID(rawValue: "m\($0)"), 1) })
            let (x, y) = (ReplicaID(rawValue: "x"), ReplicaID(rawValue: "y"))
            func entry(_ own: [ReplicaID: Int], _ text: String) -> ReplicaEntry {
                ReplicaEntry(
                    id: person, file: "p1.json", vector: VersionVector(shared.merging(own) { $1 }), hash: ContentHash(of: Data(text.utf8)), size: 1,
                    modified: 5, author: x, isDeleted: false, sequence: 1)
            }
            return (entry([x: 2], "a"), entry([x: 1, y: 1], "b"))
        }
        let (a, b) = pair(others: 498)
        if case .conflict = SyncPlanner.action(a: a, b: b, preference: nil, merge: .fields) {} else { Issue.record("merged at 500 entries") }
        let (a2, b2) = pair(others: 497)
        if case .fieldMerge = SyncPlanner.action(a: a2, b: b2, preference: nil, merge: .fields) {} else { Issue.record("not merged at 499") }
    }
}
