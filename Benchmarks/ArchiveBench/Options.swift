import BenchSupport
import Foundation

/// The command line of `archive-bench`.
struct BenchOptions {
    /// Objects per workload for workloads 1 to 3 (10,000; 1,000 with `--quick`).
    var count = 10_000
    /// Objects in the large store of workloads 4 and 5 (100,000; 10,000 with `--quick`).
    var largeCount = 100_000
    /// How many times the repeated measurements run (medians are reported).
    var runs = 5
    /// The workloads to run, 1 to 5.
    var only: Set<Int> = [1, 2, 3, 4, 5]
    /// Where the temporary directories are made.
    var directory = "/tmp"
    /// The `archive-sync` binary; by default the one next to this program.
    var cli: String?
    var quick = false

    static let usage = """
        usage: archive-bench [--quick] [--only N[,N...]] [--runs N] [--dir PATH] [--cli PATH]

          --quick        1/10 sizes (1,000 objects; a 10,000-object large store), for a fast check
          --only N       run only workload N (1-5); repeat or separate with commas for several
          --runs N       repetitions of the timed parts of workloads 3, 4 and 5 (default 5, at least 3)
          --dir PATH     make the temporary stores under PATH (default /tmp); removed afterwards
          --cli PATH     the archive-sync binary for workload 5 (default: next to archive-bench)

        Workloads: 1 durable single saves, 2 one batch of saves, 3 cold loads,
        4 open + keys of the large store, 5 scan of the unchanged large store vs rsync.
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
                    guard let n = Int(part), (1...5).contains(n) else { throw BenchError("--only takes workload numbers 1 to 5, not '\(part)'") }
                    only.insert(n)
                }
            case "--runs":
                guard let n = Int(try value(for: argument)), n >= 3 else { throw BenchError("--runs takes a number of at least 3") }
                options.runs = n
            case "--dir":
                options.directory = try value(for: argument)
            case "--cli":
                options.cli = try value(for: argument)
            case "-h", "--help":
                print(usage)
                exit(0)
            default:
                throw BenchError("unknown argument '\(argument)'")
            }
        }
        if options.quick {
            options.count /= 10
            options.largeCount /= 10
        }
        if !only.isEmpty { options.only = only }
        return options
    }
}
