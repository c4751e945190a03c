// watch-bench: the watcher's performance targets, each beside a baseline measured in the same
// run. See Benchmarks/README.md; `watch-bench --help` gives the options.

import ArchiveStore
import ArgumentParser
import BenchCommandLine
import BenchSupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

WatchBench.runBenchmark()

extension WatchBench {
    func run() throws {
        // Every store of this run lives under one root, removed at the end.
        let runRoot = try ScratchDirectory(under: scratch.directory, name: "run")
        let options = settings(directory: runRoot.path)
        print(runHeading("watch-bench", quick: quick, directory: scratch.directory))
        print(
            "\(grouped(options.writes)) timed writes, a burst of \(grouped(options.burst)) files, a store of \(grouped(options.storeSize)) objects"
        )
        print()
        fflush(nil)  // show each part as it is measured, also through a pipe (make, CI logs)

        let outcome = runWorkloads(
            [
                Workload(1, "latency") { try latency(options) },
                Workload(2, "burst") { try burst(options) },
                Workload(3, "memory") { try memory(options) },
            ], only: options.only, directory: options.directory)
        runRoot.remove()

        print("Summary:")
        outcome.summary.forEach { print("  " + $0) }
        Foundation.exit(outcome.failed ? 1 : 0)
    }
}
