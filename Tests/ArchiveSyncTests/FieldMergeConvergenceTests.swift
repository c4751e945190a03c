import ArchiveMerge
import ArchiveStore
import Foundation
import TestSupport
import Testing

@testable import ArchiveSync

/// The value at `path` (member names from the root) of `document`; nil when absent.
private func value(at path: [String], in document: Document) -> Document? {
    var current = document
    for name in path {
        guard case .object(let members) = current, let next = members[name] else { return nil }
        current = next
    }
    return current
}

/// A document with `value` at `path`, other members kept.
private func setting(_ value: Document, at path: ArraySlice<String>, in document: Document) -> Document {
    guard let name = path.first else { return value }
    var members: [String: Document] = [:]
    if case .object(let existing) = document { members = existing }
    members[name] = setting(value, at: path.dropFirst(), in: members[name] ?? .object([:]))
    return .object(members)
}

@Suite("Field merges: random field edits on three stores converge, losing nothing")
struct FieldMergeConvergenceTests {
    static let seeds = UInt64(ProcessInfo.processInfo.environment["MERGE_SEEDS"].flatMap { Int($0) } ?? 40)
    static let paths = [["name"], ["age"], ["address", "city"], ["address", "zip"]]

    /// Three stores share four objects, then each edits random fields of random objects (the
    /// same fields sometimes, on purpose), and pairs sync in a random order until all three
    /// agree. Then: all hold the same bytes; a second round of syncs changes nothing; and every
    /// field value a store wrote last in the round, where it differs from the round's start,
    /// is at its path in the object or in one of its conflict copies.
    @Test func randomFieldEditsOnThreeStoresConverge() async throws {
        let only = ProcessInfo.processInfo.environment["MERGE_SEED"].flatMap { UInt64($0) }
        var tally = (merges: 0, conflicts: 0)
        for seed in only.map({ $0...$0 }) ?? 1...Self.seeds {
            try await withTemporaryDirectory { dir in try await runSeed(seed, in: dir, tally: &tally) }
        }
        // The seeds exercise both outcomes, or the test proves little.
        #expect(only != nil || (tally.merges > 0 && tally.conflicts > 0), "\(tally)")
    }

    private func runSeed(_ seed: UInt64, in dir: String, tally: inout (merges: Int, conflicts: Int)) async throws {
        var rng = SeededGenerator(seed: seed)
        let stores = try (0..<3).map { try ArchiveStore(directory: dir + "/s\($0)") }
        let ids = try (0..<4).map { try ObjectID(collection: "Person", key: "p\($0)") }
        for id in ids {
            try stores[0].put(Data(#"{"address":{"city":"Oslo","zip":"0150"},"age":30,"name":"Ann"}"#.utf8), as: id)
        }
        for other in stores.dropFirst() { _ = try await Sync(local: stores[0], remote: other).run() }
        for round in 0..<3 {
            // What all three held when the round began: a value written back unchanged is no edit.
            let start = try ids.reduce(into: [ObjectID: Document]()) { $0[$1] = try Document(json: stores[0].data(for: $1)) }
            // Per store, the last value it wrote at each (object, path) this round.
            var written: [[ObjectID: [[String]: Document]]] = Array(repeating: [:], count: 3)
            for (s, store) in stores.enumerated() {
                for n in 0..<Int.random(in: 0...4, using: &rng) {
                    let id = ids.randomElement(using: &rng)!
                    let path = Self.paths.randomElement(using: &rng)!
                    let value = Document.string(Int.random(in: 0..<4, using: &rng) == 0 ? "shared" : "s\(s)-r\(round)-\(n)")
                    let document = setting(value, at: path[...], in: try Document(json: store.data(for: id)))
                    try store.put(try document.jsonData(), as: id)
                    written[s][id, default: [:]][path] = value
                }
            }
            var order = [(0, 1), (1, 2), (0, 2)]
            order.shuffle(using: &rng)
            for (x, y) in order + order {
                let report = try await Sync(local: stores[x], remote: stores[y]).run()
                #expect(report.skipped.isEmpty, "seed \(seed), round \(round): \(report)")
                tally.merges += report.merges.count
                tally.conflicts += report.conflicts.count
            }
            let context = "seed \(seed), round \(round)"
            let hashes = try stores.map { try $0.liveHashes() }
            #expect(hashes[0] == hashes[1] && hashes[1] == hashes[2], "the stores differ; \(context)")
            for (x, y) in order {
                let again = try await Sync(local: stores[x], remote: stores[y]).run()
                #expect(again.changes == 0 && again.vectorsMerged == 0, "a sync after convergence did something: \(again); \(context)")
            }
            let copies = try stores[0].conflictCopies()
            for (s, edits) in written.enumerated() {
                for (id, fields) in edits {
                    let holders = try [stores[0].data(for: id)] + copies.filter { $0.original == id }.map { try stores[0].data(for: $0.id) }
                    let documents = try holders.map { try Document(json: $0) }
                    for (path, written) in fields where value(at: path, in: start[id]!) != written {
                        #expect(
                            documents.contains { value(at: path, in: $0) == written },
                            "store \(s)'s \(path.joined(separator: ".")) = \(written) of \(id) was lost; \(context)")
                    }
                }
            }
        }
    }
}
