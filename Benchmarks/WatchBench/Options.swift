import ArgumentParser
import BenchCommandLine
import BenchSupport
import Foundation

/// The command line of `watch-bench`.
struct WatchBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch-bench",
        abstract: "The watcher's performance targets, each beside a baseline measured in the same run.",
        discussion: """
            Workloads: 1 latency of one change (in-process watcher, debounce 0) vs raw inotify, 2 a burst of files under `archive-sync watch` vs store.scan(), 3 resident memory of `archive-sync watch` on a large store.

            Exit status: 0 when every workload ran (a missed target prints FAIL), 1 when one failed to run, 2 for bad usage. See Benchmarks/README.md.
            """
    )

    @Flag(help: "1/10 sizes (100 writes, a burst of 2,000, a 10,000-object store), for a fast check.")
    var quick = false

    @Option(help: ArgumentHelp("Run only workload N (1-3); repeat or separate with commas for several.", valueName: "N[,N...]"))
    var only: [WorkloadNumbers] = []

    @OptionGroup var scratch: ScratchOption

    @OptionGroup var archiveSync: ArchiveSyncOption

    func validate() throws {
        _ = try WorkloadNumbers.selected(only, of: 1...3)
    }

    /// What the workloads run with, their stores under `directory`.
    func settings(directory: String) -> BenchOptions {
        let scale = quick ? 10 : 1
        return BenchOptions(
            writes: 1_000 / scale, burst: 20_000 / scale, storeSize: 100_000 / scale,
            only: (try? WorkloadNumbers.selected(only, of: 1...3)) ?? [], directory: directory, cli: archiveSync.cli, quick: quick)
    }
}

/// The settings of one run of `watch-bench`.
struct BenchOptions {
    /// Workload 1: files written one at a time, each timed until its change is delivered.
    var writes: Int
    /// Workload 2: files written in one burst.
    var burst: Int
    /// Workload 3: objects in the store whose watcher's memory is measured.
    var storeSize: Int
    /// The workloads to run, 1 to 3.
    var only: Set<Int>
    /// Where the temporary directories are made.
    var directory: String
    /// The `archive-sync` binary; by default the one next to this program.
    var cli: String?
    var quick: Bool
}
