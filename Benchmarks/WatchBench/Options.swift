import BenchSupport
import Foundation

/// The command line of `watch-bench`.
struct BenchOptions {
    /// Workload 1: files written one at a time, each timed until its change is delivered.
    var writes = 1_000
    /// Workload 2: files written in one burst.
    var burst = 20_000
    /// Workload 3: objects in the store whose watcher's memory is measured.
    var storeSize = 100_000
    /// The workloads to run, 1 to 3.
    var only: Set<Int> = [1, 2, 3]
    /// Where the temporary directories are made.
    var directory = "/tmp"
    /// The `archive-sync` binary; by default the one next to this program.
    var cli: String?
    var quick = false

    static let usage = """
        usage: watch-bench [--quick] [--only N[,N...]] [--dir PATH] [--cli PATH]

          --quick        1/10 sizes (100 writes, a burst of 2,000, a 10,000-object store), for a fast check
          --only N       run only workload N (1-3); repeat or separate with commas for several
          --dir PATH     make the temporary stores under PATH (default /tmp); removed afterwards
          --cli PATH     the archive-sync binary for workloads 2 and 3 (default: next to watch-bench)

        Workloads: 1 latency of one change (in-process watcher, debounce 0) vs raw inotify,
        2 a burst of files under `archive-sync watch` vs store.scan(), 3 resident memory of
        `archive-sync watch` on a large store.
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
            options.writes /= 10
            options.burst /= 10
            options.storeSize /= 10
        }
        if !only.isEmpty { options.only = only }
        return options
    }
}
