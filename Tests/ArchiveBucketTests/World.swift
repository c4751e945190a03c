import ArchiveStore
import Foundation
import TestSupport
import Testing

/// Stores that edit at random between syncs, and what each edit must leave once they converge.
struct World {
    let stores: [ArchiveStore]
    var rng: SeededGenerator
    /// Contents written that no one saw before the next sync: each must stay live somewhere.
    private var written: [Data] = []
    /// Objects deleted where no other store touched them in the round: they must stay gone.
    private var deleted: Set<ObjectID> = []
    private var touched: [ObjectID: Set<Int>] = [:]
    private var round = 0

    init(stores: [ArchiveStore], seed: UInt64) {
        self.stores = stores
        rng = SeededGenerator(seed: seed)
    }

    mutating func editAll(operations: Int) {
        round += 1
        written = []
        touched = [:]
        var deletes: [ObjectID: Int] = [:]
        for (index, store) in stores.enumerated() {
            for n in 0..<operations {
                let id = try! ObjectID(collection: "Person", key: "k\(Int.random(in: 0..<6, using: &rng))")
                touched[id, default: []].insert(index)
                if Int.random(in: 0..<4, using: &rng) == 0, (try? store.data(for: id)) != nil {
                    try! store.remove(id)
                    deletes[id] = index
                } else {
                    let data = Data("{\"v\":\"round \(round) store \(index) op \(n)\"}".utf8)
                    _ = try! store.put(data, as: id)
                    deletes[id] = nil
                }
            }
        }
        // The last write of each store to each object is what the others must keep.
        written = stores.flatMap { store in touched.keys.compactMap { try? store.data(for: $0) } }.filter {
            String(decoding: $0, as: UTF8.self).contains("round \(round) ")
        }
        deleted = Set(deletes.filter { touched[$0.key] == [$0.value] }.keys)
    }

    func checkConverged() throws {
        let first = try stores[0].liveContents()
        for store in stores.dropFirst() { #expect(try store.liveContents() == first, "\(store.path) differs from \(stores[0].path)") }
        let live = Set(first.values)
        for data in written { #expect(live.contains(data), "lost: \(String(decoding: data, as: UTF8.self))") }
        for id in deleted { #expect(first[id] == nil, "\(id) was deleted and came back") }
    }
}
