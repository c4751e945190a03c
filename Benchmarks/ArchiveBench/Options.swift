import ArgumentParser
import BenchCommandLine
import BenchSupport
import Foundation

/// The command line of `archive-bench`.
struct ArchiveBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "archive-bench",
        abstract: "The store's performance targets, each as a ratio against a baseline measured in the same run.",
        discussion: """
            Workloads: 1 durable single saves, 2 one batch of saves, 3 cold loads, 4 open + keys of the large store, 5 scan of the unchanged large store vs rsync, 6 eight threads saving at once vs one.

            Exit status: 0 when every workload ran (a missed target prints FAIL), 1 when one failed to run, 2 for bad usage. See Benchmarks/README.md.
            """
    )

    @Flag(help: "1/10 sizes (1,000 objects; a 10,000-object large store), for a fast check.")
    var quick = false

    @Option(help: ArgumentHelp("Run only workload N (1-6); repeat or separate with commas for several.", valueName: "N[,N...]"))
    var only: [WorkloadNumbers] = []

    @Option(help: ArgumentHelp("Repetitions of the timed parts of workloads 3, 4 and 5 (at least 3).", valueName: "N"))
    var runs = 5

    @OptionGroup var scratch: ScratchOption

    @OptionGroup var archiveSync: ArchiveSyncOption

    func validate() throws {
        _ = try WorkloadNumbers.selected(only, of: 1...6)
        guard runs >= 3 else { throw ValidationError("--runs takes a number of at least 3") }
    }

    /// What the workloads run with, their stores under `directory`.
    func settings(directory: String) -> BenchOptions {
        BenchOptions(
            count: quick ? 1_000 : 10_000, largeCount: quick ? 10_000 : 100_000, runs: runs,
            only: (try? WorkloadNumbers.selected(only, of: 1...6)) ?? [], directory: directory, cli: archiveSync.cli, quick: quick)
    }
}

/// The settings of one run of `archive-bench`.
struct BenchOptions {
    /// Objects per workload for workloads 1 to 3 (10,000; 1,000 with `--quick`).
    var count: Int
    /// Objects in the large store of workloads 4 and 5 (100,000; 10,000 with `--quick`).
    var largeCount: Int
    /// How many times the repeated measurements run (medians are reported).
    var runs: Int
    /// The workloads to run, 1 to 5.
    var only: Set<Int>
    /// Where the temporary directories are made.
    var directory: String
    /// The `archive-sync` binary; by default the one next to this program.
    var cli: String?
    var quick: Bool
}
