import BenchSupport
import Foundation

/// The command line of `cache-bench`.
struct BenchOptions {
    /// Workload 1: objects warm in memory (the example cache: `countLimit: 1_000`) and
    /// how long each timed run reads.
    var hotObjects = 1_000
    var hitSeconds = 1.0
    /// Workload 2: objects in the store, and rounds of that many misses, alternating with the baseline.
    var objects = 10_000
    var rounds = 7
    /// Workload 3: external edits, each timed until the cache returns the new value.
    var edits = 300
    /// The workloads to run, 1 to 3.
    var only: Set<Int> = [1, 2, 3]
    /// Where the temporary directories are made.
    var directory = "/tmp"
    var quick = false

    static let usage = """
        usage: cache-bench [--quick] [--only N[,N...]] [--rounds N] [--dir PATH]

          --quick        smaller runs (1,000 objects, 0.3 s of hits, 3 rounds, 60 edits), for a fast check
          --only N       run only workload N (1-3); repeat or separate with commas for several
          --rounds N     rounds of workload 2 after its warm-up round (default 7)
          --dir PATH     make the temporary stores under PATH (default /tmp); removed afterwards

        Workloads: 1 warm hits on one and two threads (watcher running; and without one),
        2 misses that read from disk vs Data(contentsOf:) + JSONDecoder, 3 latency from an
        external write to the cache returning the new value, watcher running.
        """

    static func parse(_ arguments: [String]) throws -> BenchOptions {
        var options = BenchOptions()
        var only: Set<Int> = []
        var rest = arguments[...]
        func value(for flag: String) throws -> String {
            guard let next = rest.popFirst() else { throw BenchError("\(flag) needs a value") }
            return next
        }
        while let argument = rest.popFirst() {
            switch argument {
            case "--quick":
                options.quick = true
            case "--only":
                for part in try value(for: argument).split(separator: ",") {
                    guard let n = Int(part), (1...3).contains(n) else { throw BenchError("--only takes workload numbers 1 to 3, not '\(part)'") }
                    only.insert(n)
                }
            case "--rounds":
                guard let n = Int(try value(for: argument)), n > 0 else { throw BenchError("--rounds takes a positive number") }
                options.rounds = n
            case "--dir":
                options.directory = try value(for: argument)
            case "-h", "--help":
                print(usage)
                exit(0)
            default:
                throw BenchError("unknown argument '\(argument)'")
            }
        }
        if options.quick {
            options.objects = 1_000
            options.hitSeconds = 0.3
            options.rounds = min(options.rounds, 3)
            options.edits = 60
        }
        if !only.isEmpty { options.only = only }
        return options
    }
}
