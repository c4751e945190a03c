import ArchiveCache
import ArchiveStore
import ArchiveWatch
import BenchSupport
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Workload 1: warm hits. Every object is in memory; each run reads keys round robin for a
/// fixed time through `value(forKey:)`, on one task and on two at once (the machine's two
/// cores). With a watcher in this process (the target), and without one (a stat per hit).
///
/// Each round also measures, right beside the cache: a frozen `[String: Person]` read without
/// any lock (the most two threads can get from handing out the same shared models: each copy
/// of a `Person` retains its strings and array, writes the other core must then fetch back),
/// the cache over a model with no heap storage (what the cache's own read path costs), and
/// the round trip of one cache line between the two threads (the host places the two vCPUs
/// near or far, and that moves every shared write's price).
func warmHits(_ options: BenchOptions) async throws -> [String] {
    let scratch = try ScratchDirectory(under: options.directory, name: "hits")
    let storePath = try scratch.sub("store")
    let count = try buildLargeStore(at: storePath, count: options.hotObjects)
    let store = try ArchiveStore(directory: storePath)
    let keys = (0..<count).map(Person.key)
    try store.batch { tx in
        for n in 0..<count { try tx.save(Reading.sample(n), forKey: Person.key(n)) }
    }
    // Files older than the 2 s window in which a stamp is not trusted (see ModelCache).
    for collection in ["Person", "Reading"] {
        for n in 0..<count {
            try FileManager.default.setAttributes(
                [.modificationDate: Date(timeIntervalSinceNow: -60)], ofItemAtPath: storePath + "/\(collection)/" + Person.file(n))
        }
    }
    let people = ModelCache<Person>(store: store, countLimit: count, costLimit: 1 << 30)
    let readings = ModelCache<Reading>(store: store, countLimit: count, costLimit: 1 << 30)
    let frozen = Dictionary(uniqueKeysWithValues: (0..<count).map { (Person.key($0), Person.sample($0)) })
    let seconds = options.hitSeconds

    func warm() async throws {
        for key in keys {
            _ = try await people.value(forKey: key)
            _ = try await readings.value(forKey: key)
        }
    }

    /// One round: each reader on one task, then on two; reads per second and cores used.
    func round(watched: Bool) async throws -> Round {
        try await warm()  // and re-stamped under this mode
        func runs(_ reader: some HitReader) async throws -> Runs {
            Runs(one: try await hitRate(keys, 1, seconds, reader), two: try await hitRate(keys, 2, seconds, reader))
        }
        var round = Round(roundTrip: cacheLineRoundTrip())
        round.cache = try await runs(CacheReader(cache: people))
        guard watched else { return round }
        round.frozen = try await runs(FrozenReader(models: frozen))
        round.flat = try await runs(CacheReader(cache: readings))
        return round
    }

    let watcher = try store.startWatching(WatchOptions(rescanInterval: nil))
    let loadsBefore = people.statistics.loads
    var rounds: [Round] = []
    for _ in 0..<3 { rounds.append(try await round(watched: true)) }
    let loadsDuring = people.statistics.loads - loadsBefore
    watcher.stop()
    _ = watcher.waitUntilStopped(timeout: .seconds(5))
    let unwatched = try await round(watched: false)

    let one = median(rounds.map(\.cache.one.rate))
    let two = median(rounds.map(\.cache.two.rate))
    let scaling = median(rounds.map(\.cache.ratio))
    var lines = [
        "1. warm hits, watcher running: one thread \(grouped(one))/s (target >= 2,000,000/s) \(verdict(one >= 2_000_000)); two threads \(grouped(two))/s = \(ratio(scaling)) of one (target > 1.0x) \(verdict(scaling > 1))",
        "   medians of \(rounds.count) rounds of \(seconds) s runs; \(grouped(count)) objects in memory; \(loadsDuring) disk loads during the runs (re-stamping). Each round, two threads / one:",
    ]
    for (n, round) in rounds.enumerated() {
        lines.append(
            "   round \(n + 1): cache line round trip \(String(format: "%.0f", round.roundTrip * 1e9)) ns; cache \(ratio(round.cache.ratio)) (\(round.cache.cores)); frozen dictionary \(ratio(round.frozen.ratio)) (\(round.frozen.cores)); cache of a flat model \(ratio(round.flat.ratio)) (\(round.flat.cores))"
        )
    }
    lines += [
        "   (cores: the process's CPU time over wall time, one thread / two; the machine is shared.) One thread: frozen dictionary \(grouped(median(rounds.map(\.frozen.one.rate))))/s, cache of a flat model \(grouped(median(rounds.map(\.flat.one.rate))))/s",
        "   without a watcher (one fstatat per hit): one thread \(grouped(unwatched.cache.one.rate))/s, two threads \(grouped(unwatched.cache.two.rate))/s",
    ]
    return lines
}

/// A model with no heap storage: copying it out of memory writes nothing shared.
struct Reading: Codable, Sendable {
    var id: Int
    var value: Double
    var time: Double
    var flags: Int

    static func sample(_ n: Int) -> Reading { Reading(id: n, value: Double(n) / 3, time: 1_700_000_000 + Double(n), flags: n % 7) }
}

/// What one round of workload 1 measured.
struct Round {
    var roundTrip: Double
    var cache = Runs()
    var frozen = Runs()
    var flat = Runs()
}

/// One reader's runs on one task and on two.
struct Runs {
    var one = HitRate(rate: 0, cores: 0)
    var two = HitRate(rate: 0, cores: 0)

    var ratio: Double { two.rate / one.rate }
    var cores: String { String(format: "%.2f / %.2f cores", one.cores, two.cores) }
}

/// Reads per second, and the cores the process used meanwhile (CPU time over wall time: the
/// machine is shared, so two tasks may not get two cores).
struct HitRate {
    var rate: Double
    var cores: Double
}

/// A warm read of `keys[index]`; false when it found nothing.
protocol HitReader: Sendable {
    func read(_ key: String) async throws -> Bool
}

struct CacheReader<Model: Codable & Sendable>: HitReader {
    let cache: ModelCache<Model>
    func read(_ key: String) async throws -> Bool { try await cache.value(forKey: key) != nil }
}

struct FrozenReader: HitReader {
    let models: [String: Person]
    func read(_ key: String) async throws -> Bool { blackHole(models[key]) }
}

/// Keeps the optimizer from dropping a read whose result is unused.
@inline(never)
func blackHole<T>(_ value: T?) -> Bool { value != nil }

/// `reader` over `keys` round robin for `seconds`, on `tasks` tasks at once.
func hitRate(_ keys: [String], _ tasks: Int, _ seconds: Double, _ reader: some HitReader) async throws -> HitRate {
    let cpuBefore = processCPUSeconds()
    let wallBefore = ContinuousClock.now
    let reads = try await withThrowingTaskGroup(of: Int.self) { group in
        for task in 0..<tasks {
            group.addTask {
                var reads = 0
                var index = task * 7919 % keys.count
                let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
                while ContinuousClock.now < deadline {
                    for _ in 0..<1000 {
                        guard try await reader.read(keys[index]) else { throw BenchError("\(keys[index]) missing") }
                        index += 1
                        if index == keys.count { index = 0 }
                    }
                    reads += 1000
                }
                return reads
            }
        }
        return try await group.reduce(0, +)
    }
    let wall = (ContinuousClock.now - wallBefore).seconds
    return HitRate(rate: Double(reads) / seconds, cores: (processCPUSeconds() - cpuBefore) / wall)
}

/// Seconds for one cache line to go to the other thread and back (the median of 3 runs of
/// 10,000 exchanges; only meaningful when both threads get a core).
func cacheLineRoundTrip() -> Double {
    final class Turn: Sendable { let value = Atomic<Int>(0) }
    let exchanges = 10_000
    var runs: [Double] = []
    for _ in 0..<3 {
        let turn = Turn()
        let partner = Thread {
            for n in 0...exchanges {
                while turn.value.load(ordering: .acquiring) != 2 * n + 1 {}
                turn.value.store(2 * n + 2, ordering: .releasing)
            }
        }
        partner.start()
        // Exchange 0 waits for the thread to start; the clock starts after it.
        turn.value.store(1, ordering: .releasing)
        while turn.value.load(ordering: .acquiring) != 2 {}
        let start = ContinuousClock.now
        for n in 1...exchanges {
            turn.value.store(2 * n + 1, ordering: .releasing)
            while turn.value.load(ordering: .acquiring) != 2 * n + 2 {}
        }
        runs.append((ContinuousClock.now - start).seconds / Double(exchanges))
    }
    return median(runs)
}

/// CPU seconds this process has used, all threads (`getrusage`).
func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
}

/// Workload 2: misses that read from disk. Each round empties memory and reads every key
/// once through `value(forKey:)` (each a miss: open, stamp, read, decode, the object's expiry),
/// against `Data(contentsOf:)` + `JSONDecoder().decode` of the same objects in plain files,
/// as the store-core issue's baseline, and `store.load` for reference. The three alternate
/// round by round; the ratio is the median of the rounds' ratios (the machine is shared: a
/// neighbour's burst then hits both sides of a round alike). The first round is a warm-up:
/// it also asks the manifest for each object's expiry, which later misses of an unchanged
/// file remember; it is reported on its own.
func misses(_ options: BenchOptions) async throws -> [String] {
    let scratch = try ScratchDirectory(under: options.directory, name: "misses")
    let storePath = try scratch.sub("store")
    let baseline = URL(fileURLWithPath: try scratch.sub("baseline"), isDirectory: true)
    let count = try buildLargeStore(at: storePath, count: options.objects)
    let encoder = JSONEncoder()
    for n in 0..<count { try encoder.encode(Person.sample(n)).write(to: baseline.appendingPathComponent(Person.file(n))) }
    let keys = (0..<count).map(Person.key)
    let urls = (0..<count).map { baseline.appendingPathComponent(Person.file($0)) }
    let cache = ModelCache<Person>(store: try ArchiveStore(directory: storePath), countLimit: count, costLimit: 1 << 30)
    let plainStore = try ArchiveStore(directory: storePath)

    var cacheTimes: [Double] = []
    var baselineTimes: [Double] = []
    var storeTimes: [Double] = []
    for _ in 0...options.rounds {
        cache.removeAllFromMemory()
        let start = ContinuousClock.now
        for key in keys {
            guard try await cache.value(forKey: key) != nil else { throw BenchError("\(key) missing") }
        }
        cacheTimes.append((ContinuousClock.now - start).seconds)
        baselineTimes.append(
            try seconds {
                for url in urls { _ = try JSONDecoder().decode(Person.self, from: Data(contentsOf: url)) }
            })
        storeTimes.append(try seconds { for key in keys { _ = try plainStore.load(Person.self, forKey: key) } })
    }
    let warmUp = (cache: cacheTimes.removeFirst(), baseline: baselineTimes.removeFirst())
    storeTimes.removeFirst()
    let ratios = zip(cacheTimes, baselineTimes).map { $1 / $0 }
    let r = median(ratios)
    let cacheSeconds = median(cacheTimes)
    let baselineSeconds = median(baselineTimes)
    return [
        "2. misses from disk, \(grouped(count)) per round: cache \(perSecond(count, cacheSeconds)), baseline \(perSecond(count, baselineSeconds)), ratio \(ratio(r)) (target >= 1.0x) \(verdict(r >= 1.0))",
        "   median ratio of \(options.rounds) rounds (each round's: \(ratios.map(ratio).joined(separator: " "))); store.load alone \(perSecond(count, median(storeTimes)))",
        "   warm-up round, expiries read from the manifest: cache \(perSecond(count, warmUp.cache)), baseline \(perSecond(count, warmUp.baseline)), ratio \(ratio(warmUp.baseline / warmUp.cache))",
    ]
}

/// Workload 3: invalidation latency. With a watcher in this process (debounce zero), another
/// program's write (a temp file renamed over the object's file, with plain system calls) is
/// timed from the rename's return until `value(forKey:)` returns the new value, polling every
/// 100 us. One edit at a time, each to a different object that is warm in memory.
func invalidationLatency(_ options: BenchOptions) async throws -> [String] {
    let timed = try await editLatencies(options, debounce: .zero, edits: options.edits, name: "latency")
    // For reference: the watcher's default debounce, fewer edits.
    let standard = try await editLatencies(options, debounce: WatchOptions().debounce, edits: max(options.edits / 10, 10), name: "latency-default")
    let p99 = percentile(timed.times, 0.99)
    return [
        "3. invalidation latency, external write to the new value, watcher running (debounce 0): p50 \(milliseconds(percentile(timed.times, 0.5), digits: 2)), p99 \(milliseconds(p99, digits: 2)) (target < 50 ms) \(verdict(p99 < 0.050)), max \(milliseconds(timed.times.max() ?? 0, digits: 2))",
        "   \(grouped(timed.times.count)) edits after 20 of warm-up; \(timed.invalidations) invalidations by the watcher",
        "   with the default debounce (50 ms), \(standard.times.count) edits: p50 \(milliseconds(percentile(standard.times, 0.5), digits: 2)), p99 \(milliseconds(percentile(standard.times, 0.99), digits: 2))",
    ]
}

/// Times `edits` external edits (after 20 of warm-up) with a watcher of the given debounce.
func editLatencies(_ options: BenchOptions, debounce: Duration, edits: Int, name: String) async throws -> (times: [Double], invalidations: Int) {
    let scratch = try ScratchDirectory(under: options.directory, name: name)
    let storePath = try scratch.sub("store")
    let count = edits + 20
    try buildLargeStore(at: storePath, count: (count + 9) / 10 * 10)
    let store = try ArchiveStore(directory: storePath)
    let cache = ModelCache<Person>(store: store)
    let watcher = try store.startWatching(WatchOptions(debounce: debounce, rescanInterval: nil))
    defer {
        watcher.stop()
        _ = watcher.waitUntilStopped(timeout: .seconds(5))
    }
    let encoder = JSONEncoder()
    let directory = storePath + "/Person/"
    var times: [Double] = []
    for n in 0..<count {
        let key = Person.key(n)
        guard var person = try await cache.value(forKey: key) else { throw BenchError("\(key) missing") }
        _ = try await cache.value(forKey: key)  // warm
        person.name = "Edited \(n)"
        let data = try encoder.encode(person)
        let temp = directory + ".edit-\(n)"
        guard FileManager.default.createFile(atPath: temp, contents: data) else { throw BenchError("cannot write \(temp)") }
        guard rename(temp, directory + Person.file(n)) == 0 else { throw BenchError("rename failed: \(errno)") }
        let written = ContinuousClock.now
        let deadline = written + .seconds(10)
        while try await cache.value(forKey: key)?.name != person.name {
            if ContinuousClock.now > deadline { throw BenchError("the cache still returned the old \(key) after 10 s") }
            usleep(100)
        }
        if n >= 20 { times.append((ContinuousClock.now - written).seconds) }
    }
    return (times, cache.statistics.invalidations)
}
