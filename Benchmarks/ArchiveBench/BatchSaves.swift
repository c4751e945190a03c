import ArchiveStore
import BenchSupport
import Foundation

/// Workload 2: `count` saves in ONE `store.batch { tx in ... }`, against the same Foundation
/// baseline as workload 1 (one atomic write per object).
///
/// Three rounds; each writes count/3 baseline objects, then one batch of `count` objects into a
/// fresh store. The batch rate is from the median batch; the baseline rate from all its objects.
func batchSaves(_ options: BenchOptions) throws -> [String] {
    let scratch = try ScratchDirectory(under: options.directory, name: "batch")
    let baseline = FoundationBaseline(directory: try scratch.sub("baseline"))
    let people = (0..<options.count).map(Person.sample)
    let rounds = 3
    let perRound = options.count / rounds

    var batchTimes: [Double] = []
    var baselineSeconds = 0.0
    for round in 0..<rounds {
        baselineSeconds += try seconds {
            for n in round * perRound..<(round + 1) * perRound { try baseline.save(people[n], forKey: Person.key(n)) }
        }
        let store = try ArchiveStore(directory: try scratch.sub("store\(round)"))
        batchTimes.append(
            try seconds {
                try store.batch { tx in
                    for (n, person) in people.enumerated() { try tx.save(person, forKey: Person.key(n)) }
                }
            })
        let stored = try store.keys(of: Person.self).count
        if stored != people.count { throw BenchError("the batch stored \(stored) objects, not \(people.count)") }
    }
    let batchSeconds = median(batchTimes)
    let baselineCount = perRound * rounds
    let r = (Double(people.count) / batchSeconds) / (Double(baselineCount) / baselineSeconds)
    return [
        "2. one batch of \(grouped(Double(people.count))): store \(perSecond(people.count, batchSeconds)), baseline \(perSecond(baselineCount, baselineSeconds)), ratio \(ratio(r)) (target >= 10x) \(verdict(r >= 10))",
        "   batch times: \(batchTimes.map(milliseconds).joined(separator: ", ")) (median \(milliseconds(batchSeconds)))",
    ]
}
