import ArchiveStore
import BenchSupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Workload 2: `count` saves in ONE `store.batch { tx in ... }`, against the same Foundation
/// baseline as workload 1 (one atomic write per object), and the C floor of the batch's
/// order: per object, create and write a file in a staging directory and rename it into its
/// collection's directory, unflushed (on one thread, and split over two); then one append of
/// every object's bytes (what the manifest's one commit must hold at least: each version's
/// bytes are in its history row) and one `fdatasync`. That floor takes its objects already
/// encoded; a third form, on two threads, also encodes each with `JSONEncoder` as the store's
/// codec does, which the baseline (and so the 10x target) pays too.
///
/// Three rounds; in each, in a rotating order: count/3 baseline objects, one batch of `count`
/// objects into a fresh store, and each floor in a fresh directory, each followed by an untimed
/// `sync`. The batch and floor rates are from their median round; the baseline rate from all
/// its objects.
///
/// The fresh store's batch makes its collection, which it stages as a directory and renames
/// into place whole. After the three rounds (its removed files would slow the others'
/// creates), a second batch changes each object of each round's store: into a collection that
/// exists, each file is renamed over its last version. It has no target of its own; it shows
/// what a batch costs where the first one's shortcut does not apply.
func batchSaves(_ options: BenchOptions) throws -> [String] {
    let scratch = try ScratchDirectory(under: options.directory, name: "batch")
    let baseline = FoundationBaseline(directory: try scratch.sub("baseline"))
    let people = (0..<options.count).map(Person.sample)
    let encoded = try Person.encoded(0..<options.count)
    let rounds = 3
    let perRound = options.count / rounds

    var baselineSeconds = 0.0
    // The store's batch, the floor on one thread, the floor on two, the floor on two encoding.
    var times: [[Double]] = [[], [], [], []]
    // The second batch, into the collection the first made, in each round's store.
    var again: [Double] = []
    var stores: [String] = []
    let changed = people.map { person in
        var person = person
        person.age += 1
        return person
    }
    for round in 0..<rounds {
        let contenders: [() throws -> Void] = [
            {
                baselineSeconds += try seconds {
                    for n in round * perRound..<(round + 1) * perRound { try baseline.save(people[n], forKey: Person.key(n)) }
                }
            },
            {
                let path = try scratch.sub("store\(round)")
                stores.append(path)
                let store = try ArchiveStore(directory: path)
                times[0].append(
                    try seconds {
                        try store.batch { tx in
                            for (n, person) in people.enumerated() { try tx.save(person, forKey: Person.key(n)) }
                        }
                    })
                let stored = try store.keys(of: Person.self).count
                if stored != people.count { throw BenchError("the batch stored \(stored) objects, not \(people.count)") }
            },
            { times[1].append(try batchFloor(encoded, threads: 1, in: try scratch.sub("floor1-\(round)"))) },
            { times[2].append(try batchFloor(encoded, threads: 2, in: try scratch.sub("floor2-\(round)"))) },
            { times[3].append(try batchFloor(encoding: people, threads: 2, in: try scratch.sub("floor3-\(round)"))) },
        ]
        for step in contenders.indices {
            try contenders[(round + step) % contenders.count]()
            // Not timed: each starts with no other's files waiting to be written back (the
            // store's own `syncfs` ran when it was released).
            sync()
        }
    }
    // Each store opened again: one kept open would settle (`syncfs`, a checkpoint) while the
    // next contenders ran.
    for path in stores {
        let store = try ArchiveStore(directory: path)
        sync()
        again.append(
            try seconds {
                try store.batch { tx in
                    for (n, person) in changed.enumerated() { try tx.save(person, forKey: Person.key(n)) }
                }
            })
    }
    let medians = times.map(median)
    let rates = medians.map { Double(people.count) / $0 }
    let baselineCount = perRound * rounds
    let baselineRate = Double(baselineCount) / baselineSeconds
    let r = rates[0] / baselineRate
    let floor = max(rates[1], rates[2])
    return [
        "2. one batch of \(grouped(Double(people.count))): store \(perSecond(people.count, medians[0])), baseline \(perSecond(baselineCount, baselineSeconds)), ratio \(ratio(r)) (target >= 10x) \(verdict(r >= 10))",
        "   batch times: \(times[0].map(milliseconds).joined(separator: ", ")) (median \(milliseconds(medians[0])))",
        "   C floor, same rounds (create+write+rename unflushed per object, one append+fdatasync): one thread \(milliseconds(medians[1]))"
            + " (\(ratio(rates[1] / baselineRate)) of the baseline), two threads \(milliseconds(medians[2])) (\(ratio(rates[2] / baselineRate)));"
            + " the store reaches \(ratio(rates[0] / floor)) of the faster",
        "   the floor on two threads encoding each object with JSONEncoder (as the store's codec and the baseline do): \(milliseconds(medians[3]))"
            + " (\(ratio(rates[3] / baselineRate)) of the baseline); the store reaches \(ratio(rates[0] / rates[3])) of it (within 10%: \(verdict(rates[0] >= rates[3] * 0.9)))",
        "   a second batch changing the same \(grouped(Double(people.count))) objects, in the collection the first made (each file renamed over its last version): \(milliseconds(median(again)))"
            + " (\(ratio(Double(people.count) / median(again) / baselineRate)) of the baseline)",
    ]
}

/// The floor of one batch of `objects` in a fresh directory under `base`, with the files
/// written on `threads` threads: seconds.
private func batchFloor(_ objects: [[UInt8]], threads: Int, in base: String) throws -> Double {
    try batchFloor(count: objects.count, threads: threads, in: base) { n, _ in objects[n] }
}

/// The floor of one batch of `people`, each encoded in the timed part as the store's JSON
/// codec encodes (sorted keys, slashes unescaped), one encoder per thread.
private func batchFloor(encoding people: [Person], threads: Int, in base: String) throws -> Double {
    let encoders = (0..<threads).map { _ in
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return UncheckedBox(encoder)
    }
    return try batchFloor(count: people.count, threads: threads, in: base) { n, thread in Array(try encoders[thread].value.encode(people[n])) }
}

/// The floor's order for `count` objects, object `n`'s bytes made by `bytes(n, thread)`.
private func batchFloor(count: Int, threads: Int, in base: String, bytes: @escaping @Sendable (Int, Int) throws -> [UInt8]) throws -> Double {
    let collection = base + "/Person"
    let staging = base + "/.archive-sync/staging"
    for directory in [collection, staging] { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
    let files = try RawDirectory(collection, staging: staging)
    let log = try AppendedLog(base + "/.archive-sync/log")
    defer {
        files.close()
        log.close()
    }
    return try seconds {
        let written = LockedBytes(count: count)
        try onThreads(threads) { thread in
            for n in stride(from: thread, to: count, by: threads) {
                let object = try bytes(n, thread)
                try files.write(object, as: Person.file(n), sync: false)
                written.set(n, object)
            }
        }
        try log.append(written.joined())
    }
}

/// A value handed to one thread only (an encoder per thread).
private struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// Each object's bytes, set by the thread that made them, joined for the log once all are.
private final class LockedBytes: @unchecked Sendable {
    private let lock = NSLock()
    private var objects: [[UInt8]]
    init(count: Int) { objects = Array(repeating: [], count: count) }
    func set(_ n: Int, _ bytes: [UInt8]) {
        lock.lock()
        objects[n] = bytes
        lock.unlock()
    }
    func joined() -> [UInt8] { Array(objects.joined()) }
}
