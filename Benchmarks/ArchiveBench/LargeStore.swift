import ArchiveStore
import BenchSupport
import Foundation

/// The large store that workloads 4 and 5 share, built once (on first use) with batches of
/// 10,000 objects (1,000 with `--quick`).
final class LargeStore {
    struct Built {
        let path: String
        let count: Int
        /// When the last write finished: scans treat stamps younger than 2 s as racy.
        let finished: ContinuousClock.Instant
    }

    private let options: BenchOptions
    private var built: Built?
    private var buildNote: String?

    init(_ options: BenchOptions) { self.options = options }

    func get() throws -> Built {
        if let built { return built }
        let scratch = try ScratchDirectory(under: options.directory, name: "large")
        let path = try scratch.sub("store")
        let count = options.largeCount
        var saved = 0
        let elapsed = try seconds { saved = try buildLargeStore(at: path, count: count) }
        let note =
            "   (the \(grouped(Double(count)))-object store was built with \(largeStoreBatches) batches of \(grouped(Double(saved / largeStoreBatches))) in \(String(format: "%.1f s", elapsed)))"
        let made = Built(path: path, count: saved, finished: .now)
        built = made
        buildNote = note
        return made
    }

    /// How the store was built, once: for the first workload that used it.
    func takeBuildNote() -> [String] {
        defer { buildNote = nil }
        return buildNote.map { [$0] } ?? []
    }
}

/// Workload 4: open a store of 100,000 objects and list its keys: `ArchiveStore(directory:)`
/// then `keys(of:)`, `runs` times; the median is reported. Target: under 100 ms.
func openAndKeys(_ options: BenchOptions, large: LargeStore) throws -> [String] {
    let built = try large.get()
    var opens: [Double] = []
    var lists: [Double] = []
    var totals: [Double] = []
    for _ in 0..<options.runs {
        var store: ArchiveStore?
        var keys: [String] = []
        let open = try seconds { store = try ArchiveStore(directory: built.path) }
        let list = try seconds { keys = try store!.keys(of: Person.self) }
        if keys.count != built.count { throw BenchError("keys(of:) returned \(keys.count) keys, not \(built.count)") }
        opens.append(open)
        lists.append(list)
        totals.append(open + list)
    }
    // For scale only: listing the collection's directory with Foundation.
    var listings: [Double] = []
    for _ in 0..<options.runs {
        listings.append(try seconds { _ = try FileManager.default.contentsOfDirectory(atPath: built.path + "/Person") })
    }
    let total = median(totals)
    return [
        "4. open + keys of \(grouped(Double(built.count))): \(milliseconds(total)) (median of \(options.runs)), ratio \(ratio(total / 0.1)) of the budget (target < 100 ms) \(verdict(total < 0.1))",
        "   open \(milliseconds(median(opens))), keys \(milliseconds(median(lists))); for scale, FileManager.contentsOfDirectory of the collection: \(milliseconds(median(listings)))",
    ] + large.takeBuildNote()
}
