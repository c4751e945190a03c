import ArchiveStore
import BenchSupport
import Foundation
import Synchronization

/// Workload 6: durable single saves from eight threads at once, each saving its own keys,
/// against one thread saving the same number of objects into the same store. Saves that land
/// together share one commit and one flush of the manifest's WAL (group commit).
///
/// Three rounds, each timing one thread and then eight (the order alternating), count/10
/// objects per run; each rate is from all its rounds.
func threadedSaves(_ options: BenchOptions) throws -> [String] {
    let scratch = try ScratchDirectory(under: options.directory, name: "threads")
    let store = try ArchiveStore(directory: try scratch.sub("store"))
    let threads = 8
    let perRun = max(threads, options.count / 10) / threads * threads
    let people = (0..<perRun).map(Person.sample)
    var oneThread = 0.0
    var eightThreads = 0.0
    for round in 0..<3 {
        // Keys new to the store in every run, so that each save writes.
        let prefix = "r\(round)"
        let single = {
            try seconds { for n in 0..<perRun { try store.save(people[n], forKey: "\(prefix)-one-\(n)") } }
        }
        let several = {
            try seconds {
                try onThreads(threads) { thread in
                    for n in stride(from: thread, to: perRun, by: threads) { try store.save(people[n], forKey: "\(prefix)-eight-\(n)") }
                }
            }
        }
        if round % 2 == 0 {
            oneThread += try single()
            eightThreads += try several()
        } else {
            eightThreads += try several()
            oneThread += try single()
        }
    }
    let total = perRun * 3
    let r = oneThread / eightThreads
    return [
        "6. eight threads saving at once: \(perSecond(total, eightThreads)), one thread \(perSecond(total, oneThread)), ratio \(ratio(r)) (target >= 4x) \(verdict(r >= 4))"
    ]
}

/// Runs `body(0)` ... `body(count - 1)` each on a thread of its own, all at once, and waits
/// for them; rethrows the first error.
func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) throws -> Void) throws {
    let done = DispatchGroup()
    let failure = Mutex<(any Error)?>(nil)
    for index in 0..<count {
        done.enter()
        Thread.detachNewThread {
            do { try body(index) } catch { failure.withLock { $0 = $0 ?? error } }
            done.leave()
        }
    }
    done.wait()
    if let error = failure.withLock({ $0 }) { throw error }
}
