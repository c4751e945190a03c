// archive-bench: the performance targets of archive-sync, each measured as a ratio against a
// baseline run in the same process, because absolute times vary on a shared machine.
// See Benchmarks/README.md; `archive-bench --help` gives the options.

import ArchiveStore
import ArgumentParser
import BenchCommandLine
import BenchSupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

ArchiveBench.runBenchmark()

extension ArchiveBench {
    func run() throws {
        // Every store and baseline directory of this run lives under one root, removed at the end.
        let runRoot = try ScratchDirectory(under: scratch.directory, name: "run")
        let options = settings(directory: runRoot.path)
        let modelBytes = try JSONEncoder().encode(Person.sample(12_345)).count
        print(runHeading("archive-bench", quick: quick, directory: scratch.directory))
        print(
            "model: Person, \(modelBytes) bytes of JSON; \(grouped(Double(options.count))) objects per workload, \(grouped(Double(options.largeCount))) in the large store"
        )
        print()
        fflush(nil)  // show each part as it is measured, also through a pipe (make, CI logs)

        let large = LargeStore(options)
        let outcome = runWorkloads(
            [
                Workload(1, "single saves") { try singleSaves(options) },
                Workload(2, "batch") { try batchSaves(options) },
                Workload(3, "cold loads") { try coldLoads(options) },
                Workload(4, "open + keys") { try openAndKeys(options, large: large) },
                Workload(5, "scan") { try scanUnchanged(options, large: large) },
                Workload(6, "eight threads") { try threadedSaves(options) },
            ], only: options.only, directory: options.directory)
        runRoot.remove()

        print("Summary:")
        outcome.summary.forEach { print("  " + $0) }
        if !outcome.slowCreation.isEmpty {
            print(
                "WARNING: creating a file was slow (over 50 us) before workload \(outcome.slowCreation.map(String.init).joined(separator: ", ")), most likely"
            )
            print("  because many files were deleted on this file system in the last minutes (ext4 without a journal")
            print("  skips recently freed inodes). Both sides pay it per file, which pulls ratios toward 1.0x.")
        }
        Foundation.exit(outcome.failed ? 1 : 0)
    }
}
