import ArchiveStore
import BenchSupport
import Foundation

/// Workload 3: cold loads. Open a fresh `ArchiveStore` on a store of `count` objects and
/// `load` every key, against `Data(contentsOf:)` + `JSONDecoder().decode` of the baseline's
/// files. "Cold" means a fresh store object and fresh decoders; the page cache is kept.
///
/// Store and baseline alternate for `runs` rounds; the rates are from the median round.
func coldLoads(_ options: BenchOptions) throws -> [String] {
    let scratch = try ScratchDirectory(under: options.directory, name: "loads")
    let storePath = try scratch.sub("store")
    let baseline = FoundationBaseline(directory: try scratch.sub("baseline"))
    let count = options.count
    // Setup, not timed: the same objects in the store (one batch) and as baseline files.
    try ArchiveStore(directory: storePath).batch { tx in
        for n in 0..<count { try tx.save(Person.sample(n), forKey: Person.key(n)) }
    }
    try baseline.fill(count)
    let keys = (0..<count).map(Person.key)

    var storeTimes: [Double] = []
    var baselineTimes: [Double] = []
    var loaded = 0
    for _ in 0..<options.runs {
        loaded = 0
        storeTimes.append(
            try seconds {
                let store = try ArchiveStore(directory: storePath)
                for key in keys where try store.load(Person.self, forKey: key) != nil { loaded += 1 }
            })
        if loaded != count { throw BenchError("the store loaded \(loaded) objects, not \(count)") }
        baselineTimes.append(
            try seconds {
                for key in keys { _ = try baseline.load(forKey: key) }
            })
    }
    let storeSeconds = median(storeTimes)
    let baselineSeconds = median(baselineTimes)
    let r = baselineSeconds / storeSeconds
    return [
        "3. cold loads of \(grouped(Double(count))): store \(perSecond(count, storeSeconds)), baseline \(perSecond(count, baselineSeconds)), ratio \(ratio(r)) (target >= 1.0x) \(verdict(r >= 1.0))",
        "   medians of \(options.runs) rounds; store: open + \(grouped(Double(count))) loads in \(milliseconds(storeSeconds)), baseline \(milliseconds(baselineSeconds))",
    ]
}
