import Foundation
import Testing

@testable import ArchiveMerge

/// The merge's rules over seeded random trees and edits (a failing seed replays).
@Suite struct MergePropertyTests {
    static let seeds: ClosedRange<UInt64> = 1...400

    /// Edits of disjoint members, split between the sides: the merge holds all of them.
    @Test func aMemberEditedOnOneSideOnlyAlwaysCarries() {
        for seed in Self.seeds {
            var random = RandomDocuments(seed: seed)
            let base = random.object(depth: 3)
            let paths = random.disjointPaths(in: base, count: 4)
            var ours = base
            var theirs = base
            var expected = base
            for path in paths {
                let value = random.edit(of: base.value(at: path))
                if random.chance(50) { ours = ours.setting(path, to: value) } else { theirs = theirs.setting(path, to: value) }
                expected = expected.setting(path, to: value)
            }
            let result = Document.merge(base: base, ours: ours, theirs: theirs)
            #expect(result == .merged(expected, paths: Document.diff(base, expected).map(\.path)), "seed \(seed)")
        }
    }

    /// One member set to different non-object values (or removed and changed), with disjoint
    /// one-sided edits around it: exactly that path is reported.
    @Test func aMemberEditedOnBothSidesDifferentlyIsAlwaysReported() {
        for seed in Self.seeds {
            var random = RandomDocuments(seed: seed)
            let base = random.object(depth: 3)
            guard let contested = random.disjointPaths(in: base, count: 1).first else { continue }
            let original = base.value(at: contested)
            let ourValue = random.edit(of: original, allowObjects: false)
            var theirValue = random.edit(of: original, allowObjects: false)
            while theirValue == ourValue { theirValue = random.edit(of: original, allowObjects: false) }
            var ours = base.setting(contested, to: ourValue)
            var theirs = base.setting(contested, to: theirValue)
            for path in random.disjointPaths(in: base, count: 3, avoiding: [contested]) {
                let value = random.edit(of: base.value(at: path))
                if random.chance(50) { ours = ours.setting(path, to: value) } else { theirs = theirs.setting(path, to: value) }
            }
            #expect(Document.merge(base: base, ours: ours, theirs: theirs) == .conflicts([contested]), "seed \(seed)")
        }
    }

    /// Any edits, overlapping or not: swapping the sides changes nothing.
    @Test func theResultIsTheSameWhicheverSideIsOurs() {
        for seed in Self.seeds {
            var random = RandomDocuments(seed: seed)
            let base = random.object(depth: 3)
            var ours = base
            var theirs = base
            for _ in 0..<4 {
                if let path = random.editablePaths(in: ours).randomElement(using: &random.generator) {
                    ours = ours.setting(path, to: random.edit(of: ours.value(at: path)))
                }
                if let path = random.editablePaths(in: theirs).randomElement(using: &random.generator) {
                    theirs = theirs.setting(path, to: random.edit(of: theirs.value(at: path)))
                }
            }
            let forward = Document.merge(base: base, ours: ours, theirs: theirs)
            let backward = Document.merge(base: base, ours: theirs, theirs: ours)
            #expect(forward == backward, "seed \(seed)")
            // Equal documents, equal bytes: what lets two replicas agree.
            if case .merged(let a, _) = forward, case .merged(let b, _) = backward {
                #expect((try? a.jsonData()) == (try? b.jsonData()), "seed \(seed)")
            }
        }
    }

    /// Both sides the same: that document, whatever the base; one side unchanged: the other.
    @Test func mergingIsIdempotentWhenOursEqualsTheirs() {
        for seed in Self.seeds {
            var random = RandomDocuments(seed: seed)
            let base = random.object(depth: 3)
            var edited = base
            for path in random.disjointPaths(in: base, count: 3) { edited = edited.setting(path, to: random.edit(of: base.value(at: path))) }
            let changed = Document.diff(base, edited).map(\.path)
            #expect(Document.merge(base: base, ours: edited, theirs: edited) == .merged(edited, paths: changed), "seed \(seed)")
            #expect(Document.merge(base: base, ours: base, theirs: edited) == .merged(edited, paths: changed), "seed \(seed)")
            #expect(Document.merge(base: base, ours: edited, theirs: base) == .merged(edited, paths: changed), "seed \(seed)")
        }
    }

    /// Every generated tree survives both codecs unchanged (dates and nulls aside: one codec
    /// each).
    @Test func randomTreesRoundTripThroughJSON() throws {
        for seed in Self.seeds {
            var random = RandomDocuments(seed: seed)
            let document = random.object(depth: 4)
            let bytes = try document.jsonData()
            #expect(try Document(json: bytes) == document, "seed \(seed)")
        }
    }
}
