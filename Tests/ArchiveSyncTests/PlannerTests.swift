import ArchiveStore
import Foundation
import Testing

@testable import ArchiveSync

private let ra = ReplicaID(rawValue: "aaaaaaaaaaaaaaaa")
private let rb = ReplicaID(rawValue: "bbbbbbbbbbbbbbbb")

/// A row of object `Person/p1`.
private func entry(
    _ content: String?, _ vector: [ReplicaID: Int], modified: Int64 = 1_000_000_000_000, author: ReplicaID = ra, key: String = "p1"
) -> ReplicaEntry {
    ReplicaEntry(
        id: try! ObjectID(collection: "Person", key: key), file: key + ".json", vector: VersionVector(vector),
        hash: content.map { ContentHash(of: Data($0.utf8)) }, size: content?.utf8.count ?? 0, modified: modified, author: author,
        isDeleted: content == nil, sequence: 1)
}

@Suite("Planner: a pure function of two rows")
struct PlannerTests {
    @Test func sameContentsAndVectorsNeedNothing() {
        #expect(SyncPlanner.action(a: entry("x", [ra: 1]), b: entry("x", [ra: 1]), preference: nil) == .none)
    }

    @Test func sameContentsWithDifferentVectorsMergeTheVectors() {
        let action = SyncPlanner.action(a: entry("x", [ra: 1]), b: entry("x", [rb: 1]), preference: nil)
        guard case .merge(let merge) = action else {
            Issue.record("expected a merge, got \(action)")
            return
        }
        #expect(merge.vector == VersionVector([ra: 1, rb: 1]))
    }

    @Test func aDominatingVersionIsCopiedToTheOtherSide() {
        let action = SyncPlanner.action(a: entry("old", [ra: 1]), b: entry("new", [ra: 1, rb: 1]), preference: nil)
        guard case .copy(let to, let source, _, _) = action else {
            Issue.record("expected a copy, got \(action)")
            return
        }
        #expect(to == .a)
        #expect(source.hash == ContentHash(of: Data("new".utf8)))
    }

    @Test func aDominatingTombstoneDeletesOnTheOtherSide() {
        let action = SyncPlanner.action(a: entry(nil, [ra: 2]), b: entry("x", [ra: 1]), preference: nil)
        guard case .copy(let to, let source, _, _) = action else {
            Issue.record("expected a delete, got \(action)")
            return
        }
        #expect(to == .b && source.isDeleted)
    }

    @Test func anEditBeatsAConcurrentDelete() {
        let cases = [(entry(nil, [ra: 2]), entry("edit", [ra: 1, rb: 1]), SyncSide.b), (entry("edit", [ra: 2]), entry(nil, [ra: 1, rb: 1]), .a)]
        for (a, b, survivor) in cases {
            let action = SyncPlanner.action(a: a, b: b, preference: nil)
            guard case .copy(let to, let source, _, let vector) = action else {
                Issue.record("expected a copy, got \(action)")
                continue
            }
            #expect(to == survivor.other && !source.isDeleted)
            #expect(vector.dominates(a.vector) && vector.dominates(b.vector))
        }
    }

    @Test func aTombstoneFacingNothingNeedsNothing() {
        #expect(SyncPlanner.action(a: entry(nil, [ra: 2]), b: nil, preference: nil) == .none)
        #expect(SyncPlanner.action(a: nil, b: entry(nil, [rb: 2]), preference: nil) == .none)
    }

    @Test func twoEditsAreAConflictWonByTheNewerWithACopyOfTheOther() {
        let a = entry("from a", [ra: 2, rb: 1], modified: 5_000_000_000, author: ra)
        let b = entry("from b", [ra: 1, rb: 2], modified: 9_000_000_000, author: rb)
        let action = SyncPlanner.action(a: a, b: b, preference: nil)
        guard case .conflict(let winner, let kept, let lost, let vector, let copy) = action else {
            Issue.record("expected a conflict, got \(action)")
            return
        }
        #expect(winner == .b && kept == b && lost == a)
        #expect(vector == VersionVector([ra: 2, rb: 2]))
        let hash = String(ContentHash(of: Data("from a".utf8)).description.prefix(8))
        #expect(copy?.description == "Person/p1.conflict-aaaaaaaa-19700101T000005Z-\(hash)")
        #expect(SyncPlanner.isConflictCopy(copy!.key))
        #expect(!SyncPlanner.isConflictCopy("p1"))
    }

    @Test func bothSidesPickTheSameWinnerWhateverTheOrder() {
        let x = entry("x", [ra: 1], modified: 7, author: ra)
        let y = entry("y", [rb: 1], modified: 7, author: rb)
        guard case .conflict(let w1, let kept1, _, _, _) = SyncPlanner.action(a: x, b: y, preference: nil),
            case .conflict(let w2, let kept2, _, _, _) = SyncPlanner.action(a: y, b: x, preference: nil)
        else {
            Issue.record("expected conflicts")
            return
        }
        #expect(kept1 == kept2)
        #expect(w1 != w2)
        #expect(kept1.author == rb)  // a tie in time goes to the larger replica id
    }

    @Test(arguments: [(SyncPreference.a, SyncSide.a), (.b, .b), (.newer, .b), (.older, .a)])
    func aPreferenceDecidesWithoutACopy(preference: SyncPreference, expected: SyncSide) {
        let a = entry("a", [ra: 1], modified: 1, author: ra)
        let b = entry("b", [rb: 1], modified: 2, author: rb)
        guard case .conflict(let winner, _, _, _, let copy) = SyncPlanner.action(a: a, b: b, preference: preference) else {
            Issue.record("expected a conflict")
            return
        }
        #expect(winner == expected)
        #expect(copy == nil)
    }

    @Test func storesThatNeverMetMergeEqualContentsAndConflictOnDifferentOnes() {
        guard case .merge = SyncPlanner.action(a: entry("same", [ra: 1]), b: entry("same", [rb: 1]), preference: nil) else {
            Issue.record("expected a merge")
            return
        }
        guard case .conflict = SyncPlanner.action(a: entry("one", [ra: 1]), b: entry("two", [rb: 1]), preference: nil) else {
            Issue.record("expected a conflict")
            return
        }
    }
}

@Suite("Conflict copies: names")
struct ConflictCopyNameTests {
    @Test func twoLosingVersionsInOneSecondGetTwoNames() {
        let first = ReplicaEntry(
            id: try! ObjectID(collection: "P", key: "x"), file: "x.json", vector: VersionVector(), hash: ContentHash(of: Data("1".utf8)),
            size: 1, modified: 7_000_000_000, author: ReplicaID(rawValue: "aaaaaaaaaaaaaaaa"), isDeleted: false, sequence: 1)
        var second = first
        second.hash = ContentHash(of: Data("2".utf8))
        #expect(SyncPlanner.conflictCopyID(of: first) != SyncPlanner.conflictCopyID(of: second))
    }

    @Test func aKeyTooLongForTheSuffixIsCutShortNotLeftWithoutACopy() throws {
        let key = String(repeating: "é", count: 2_040)  // 4,080 bytes
        let lost = ReplicaEntry(
            id: try ObjectID(collection: "P", key: key), file: "long.json", vector: VersionVector(), hash: ContentHash(of: Data("1".utf8)),
            size: 1, modified: 0, author: ReplicaID(rawValue: "aaaaaaaaaaaaaaaa"), isDeleted: false, sequence: 1)
        let copy = try #require(SyncPlanner.conflictCopyID(of: lost))
        #expect(copy.key.utf8.count <= ObjectID.maximumLength)
        #expect(SyncPlanner.isConflictCopy(copy.key))
        #expect(copy.key.hasPrefix(String(repeating: "é", count: 2_000)))
    }
}
