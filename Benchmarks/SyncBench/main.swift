// sync-bench: `archive-sync sync` of two directories against `rsync -a` and `unison -batch` on
// the same files in the same run, as ratios. See Benchmarks/README.md; `sync-bench --help`
// gives the options.

import ArchiveStore
import ArgumentParser
import BenchCommandLine
import BenchSupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

SyncBenchCommand.runBenchmark()

/// The command line of `sync-bench`.
struct SyncBenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync-bench",
        abstract: "`archive-sync sync` of two directories against rsync -a and unison -batch on the same files, as ratios.",
        discussion: """
            Workloads: 1 first sync into an empty store vs rsync -a, 2 no-op sync with both sides scanned vs rsync and unison, 3 no-op sync of two watched stores, 4 1% changed on each side vs unison, 5 peak memory of the sync, 6 1% edited on both sides (half in disjoint fields) merged vs the same sync with --merge none.

            Exit status: 0 when every workload ran (a missed target prints FAIL), 1 when one failed to run, 2 for bad usage. See Benchmarks/README.md.
            """
    )

    @Flag(help: "10,000 objects instead of 100,000.")
    var quick = false

    @Option(
        help: ArgumentHelp(
            "Run only workload N (1-6; 5 is measured with 1 and 2); repeat or separate with commas for several.", valueName: "N[,N...]"))
    var only: [WorkloadNumbers] = []

    @Option(help: ArgumentHelp("Repetitions of the timed parts; medians are reported.", valueName: "N"))
    var runs = 3

    @OptionGroup var scratch: ScratchOption

    @OptionGroup var archiveSync: ArchiveSyncOption

    func validate() throws {
        _ = try WorkloadNumbers.selected(only, of: 1...6)
        guard runs >= 1 else { throw ValidationError("--runs takes a number of at least 1") }
    }

    func run() throws {
        let options = SyncBenchOptions(
            count: quick ? 10_000 : 100_000, runs: runs, only: try WorkloadNumbers.selected(only, of: 1...6), directory: scratch.directory,
            cli: archiveSync.cli,
            quick: quick)
        do {
            let bench = try SyncBench(options)
            defer { bench.scratch.remove() }
            try bench.run()
        } catch {
            print("sync-bench: ERROR: \(error)")
            Foundation.exit(1)
        }
    }
}

/// The settings of one run of `sync-bench`.
struct SyncBenchOptions {
    var count: Int
    var runs: Int
    var only: Set<Int>
    var directory: String
    var cli: String?
    var quick: Bool
}
