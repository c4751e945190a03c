// sync-bench: `archive-sync sync` of two directories against `rsync -a` and `unison -batch` on
// the same files in the same run, as ratios. See Benchmarks/README.md.
// Usage: sync-bench [--quick] [--only N[,N...]] [--runs N] [--dir PATH] [--cli PATH]

import ArchiveStore
import BenchSupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

struct SyncBenchOptions {
    var count = 100_000
    var runs = 3
    var only: Set<Int> = [1, 2, 3, 4, 5]
    var directory = "/tmp"
    var cli: String?
    var quick = false

    static let usage = """
        usage: sync-bench [--quick] [--only N[,N...]] [--runs N] [--dir PATH] [--cli PATH]

          --quick        10,000 objects instead of 100,000
          --only N       run only workload N (1-5; 5 is measured with 1 and 2)
          --runs N       repetitions of the timed parts (default 3); medians are reported
          --dir PATH     where the stores go (default /tmp); removed afterwards
          --cli PATH     the archive-sync binary (default: next to sync-bench)

        Workloads: 1 first sync into an empty store vs rsync -a, 2 no-op sync with both sides
        scanned vs rsync and unison, 3 no-op sync of two watched stores, 4 1% changed on each
        side vs unison, 5 peak memory of the sync.
        """

    static func parse(_ arguments: [String]) throws -> SyncBenchOptions {
        var options = SyncBenchOptions()
        var rest = arguments[...]
        func value(_ flag: String) throws -> String {
            guard let next = rest.popFirst() else { throw BenchError("\(flag) needs a value") }
            return next
        }
        var only: Set<Int> = []
        while let argument = rest.popFirst() {
            switch argument {
            case "--quick": options.quick = true
            case "--only":
                for part in try value(argument).split(separator: ",") {
                    guard let n = Int(part), (1...5).contains(n) else { throw BenchError("--only takes 1 to 5, not '\(part)'") }
                    only.insert(n)
                }
            case "--runs":
                guard let n = Int(try value(argument)), n >= 1 else { throw BenchError("--runs takes a number of at least 1") }
                options.runs = n
            case "--dir": options.directory = try value(argument)
            case "--cli": options.cli = try value(argument)
            case "-h", "--help":
                print(usage)
                exit(0)
            default: throw BenchError("unknown argument '\(argument)'")
            }
        }
        if options.quick { options.count /= 10 }
        if !only.isEmpty { options.only = only }
        return options
    }
}

let options: SyncBenchOptions
do {
    options = try SyncBenchOptions.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    FileHandle.standardError.write(Data("sync-bench: \(error)\n\n\(SyncBenchOptions.usage)\n".utf8))
    exit(2)
}

do {
    let bench = try SyncBench(options)
    defer { bench.scratch.remove() }
    try bench.run()
} catch {
    print("sync-bench: ERROR: \(error)")
    exit(1)
}
