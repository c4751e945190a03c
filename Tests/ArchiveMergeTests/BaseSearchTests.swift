import ArchiveStore
import TestSupport
import Testing

@testable import ArchiveMerge

/// A version vector for tests: `{replica: counter}`.
struct TestVector: CausalVector, Equatable, CustomStringConvertible {
    var counters: [String: Int]

    init(_ counters: [String: Int] = [:]) { self.counters = counters.filter { $0.value > 0 } }

    func dominates(_ other: TestVector) -> Bool { other.counters.allSatisfy { (counters[$0.key] ?? 0) >= $0.value } }

    func meet(_ other: TestVector) -> TestVector {
        TestVector(Dictionary(uniqueKeysWithValues: counters.compactMap { key, value in other.counters[key].map { (key, min(value, $0)) } }))
    }

    func join(_ other: TestVector) -> TestVector { TestVector(counters.merging(other.counters) { max($0, $1) }) }

    func incremented(_ replica: String) -> TestVector {
        var copy = self
        copy.counters[replica, default: 0] += 1
        return copy
    }

    var description: String { counters.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",") }
}

/// Replicas that edit one object and sync it at random, each keeping its history.
private struct Replicas {
    var current: [String: HistoryEntry<TestVector, Int>] = [:]
    var history: [String: [HistoryEntry<TestVector, Int>]] = [:]
    var nextID = 0

    mutating func record(_ replica: String, _ vector: TestVector) {
        nextID += 1
        let entry = HistoryEntry(vector: vector, id: nextID)
        current[replica] = entry
        history[replica, default: []].append(entry)
    }

    mutating func edit(_ replica: String) { record(replica, (current[replica]?.vector ?? TestVector()).incremented(replica)) }

    /// `to` takes `from`'s version when it dominates, or writes a version over both.
    mutating func sync(from: String, to: String) {
        guard let theirs = current[from] else { return }
        guard let ours = current[to] else { return adopt(theirs, at: to) }
        if theirs.vector.dominates(ours.vector) {
            adopt(theirs, at: to)
        } else if !ours.vector.dominates(theirs.vector) {
            record(to, ours.vector.join(theirs.vector).incremented(to))
        }
    }

    private mutating func adopt(_ entry: HistoryEntry<TestVector, Int>, at replica: String) {
        current[replica] = entry
        history[replica, default: []].append(entry)
    }
}

@Suite struct BaseSearchTests {
    private func entry(_ counters: [String: Int], _ id: Int) -> HistoryEntry<TestVector, Int> { HistoryEntry(vector: TestVector(counters), id: id) }

    @Test func aForkFindsTheVersionBothHadSeen() {
        let shared = [entry(["a": 1], 1), entry(["a": 2], 2)]
        let result = BaseSearch.search(
            ours: shared + [entry(["a": 3], 3)], theirs: shared + [entry(["a": 2, "b": 1], 4)], oursCurrent: TestVector(["a": 3]),
            theirsCurrent: TestVector(["a": 2, "b": 1]))
        guard case .found(let vector, let ours, let theirs) = result else { Issue.record("no base"); return }
        #expect(vector == TestVector(["a": 2]) && ours == 2 && theirs == 2)
    }

    @Test func noSharedVersionOrAPrunedOneGivesNoBase() {
        // Created on both sides.
        let created = BaseSearch.search(
            ours: [entry(["a": 1], 1)], theirs: [entry(["b": 1], 2)], oursCurrent: TestVector(["a": 1]), theirsCurrent: TestVector(["b": 1]))
        #expect(created.isNoBase)
        // {a=2} pruned from both histories: the older {a=1} is not a base.
        let pruned = BaseSearch.search(
            ours: [entry(["a": 1], 1), entry(["a": 3], 3)], theirs: [entry(["a": 1], 1), entry(["a": 2, "b": 1], 4)],
            oursCurrent: TestVector(["a": 3]), theirsCurrent: TestVector(["a": 2, "b": 1]))
        #expect(pruned.isNoBase)
    }

    /// Random edits and syncs among three replicas: whenever a base is found it is the newest
    /// version both had seen, the same whichever side asks, and it is never an older one once
    /// pruned.
    @Test func randomHistoriesFindTheNewestVersionBothHadSeen() {
        var found = 0
        for seed in UInt64(1)...3000 {
            var random = SeededGenerator(seed: seed)
            var replicas = Replicas()
            let names = ["a", "b", "c"]
            for _ in 0..<Int.random(in: 2...12, using: &random) {
                let one = names.randomElement(using: &random)!
                if Bool.random(using: &random) { replicas.edit(one) } else { replicas.sync(from: names.randomElement(using: &random)!, to: one) }
            }
            guard let ours = replicas.current["a"], let theirs = replicas.current["b"], !ours.vector.dominates(theirs.vector),
                !theirs.vector.dominates(ours.vector)
            else { continue }
            let ourHistory = replicas.history["a"]!
            let theirHistory = replicas.history["b"]!
            let candidates = (ourHistory + theirHistory).filter { ours.vector.dominates($0.vector) && theirs.vector.dominates($0.vector) }
            let result = BaseSearch.search(ours: ourHistory, theirs: theirHistory, oursCurrent: ours.vector, theirsCurrent: theirs.vector)
            let swapped = BaseSearch.search(ours: theirHistory, theirs: ourHistory, oursCurrent: theirs.vector, theirsCurrent: ours.vector)
            guard case .found(let vector, let ourID, let theirID) = result else {
                #expect(swapped.isNoBase, "seed \(seed)")
                // No base: no candidate is the meet (there may be older ones).
                #expect(!candidates.contains { $0.vector == ours.vector.meet(theirs.vector) }, "seed \(seed)")
                continue
            }
            found += 1
            #expect(candidates.allSatisfy { vector.dominates($0.vector) }, "seed \(seed): \(vector) is not the newest")
            #expect(ourHistory.contains { $0.id == ourID && $0.vector == vector } || ourID == nil, "seed \(seed)")
            #expect(theirHistory.contains { $0.id == theirID && $0.vector == vector } || theirID == nil, "seed \(seed)")
            if case .found(let swappedVector, let swappedOurs, let swappedTheirs) = swapped {
                #expect(swappedVector == vector && swappedOurs == theirID && swappedTheirs == ourID, "seed \(seed)")
            } else {
                Issue.record("seed \(seed): found one way only")
            }
            let pruned = BaseSearch.search(
                ours: ourHistory.filter { $0.vector != vector }, theirs: theirHistory.filter { $0.vector != vector }, oursCurrent: ours.vector,
                theirsCurrent: theirs.vector)
            #expect(pruned.isNoBase, "seed \(seed): an older version taken for the base")
        }
        #expect(found > 150)
    }
}

extension BaseSearch {
    var isNoBase: Bool {
        if case .noBase = self { return true }
        return false
    }
}

/// What the planner will write in ArchiveSync; here it shows the store's vector fits.
extension VersionVector: CausalVector {
    public func meet(_ other: VersionVector) -> VersionVector {
        VersionVector(
            Dictionary(uniqueKeysWithValues: counters.compactMap { replica, count in other.counters[replica].map { (replica, min(count, $0)) } }))
    }
}

@Suite struct StoreVectorBaseSearchTests {
    @Test func theStoresVersionVectorFindsAForksBase() {
        let (a, b) = (ReplicaID(rawValue: "a"), ReplicaID(rawValue: "b"))
        let shared = VersionVector([a: 2])
        let ours = VersionVector([a: 3])
        let theirs = VersionVector([a: 2, b: 1])
        let result = BaseSearch.search(
            ours: [HistoryEntry(vector: VersionVector([a: 1]), id: 1), HistoryEntry(vector: shared, id: 2), HistoryEntry(vector: ours, id: 3)],
            theirs: [HistoryEntry(vector: shared, id: 2), HistoryEntry(vector: theirs, id: 1)], oursCurrent: ours, theirsCurrent: theirs)
        guard case .found(let vector, let ourID, let theirID) = result else { return #expect(Bool(false), "no base") }
        #expect(vector == shared && ourID == 2 && theirID == 2)
    }
}
