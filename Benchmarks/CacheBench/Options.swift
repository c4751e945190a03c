import ArgumentParser
import BenchCommandLine
import BenchSupport
import Foundation

/// The command line of `cache-bench`.
struct CacheBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cache-bench",
        abstract: "The model cache's performance targets, each beside its baseline measured in the same run.",
        discussion: """
            Workloads: 1 warm hits on one and two threads (watcher running; and without one), 2 misses that read from disk vs Data(contentsOf:) + JSONDecoder, 3 latency from an external write to the cache returning the new value, watcher running.

            Exit status: 0 when every workload ran (a missed target prints FAIL), 1 when one failed to run, 2 for bad usage. See Benchmarks/README.md.
            """
    )

    @Flag(help: "Smaller runs (1,000 objects, 0.3 s of hits, at most 3 rounds, 60 edits), for a fast check.")
    var quick = false

    @Option(help: ArgumentHelp("Run only workload N (1-3); repeat or separate with commas for several.", valueName: "N[,N...]"))
    var only: [WorkloadNumbers] = []

    @Option(help: ArgumentHelp("Rounds of workload 2 after its warm-up round.", valueName: "N"))
    var rounds = 7

    @OptionGroup var scratch: ScratchOption

    func validate() throws {
        _ = try WorkloadNumbers.selected(only, of: 1...3)
        guard rounds > 0 else { throw ValidationError("--rounds takes a positive number") }
    }

    /// What the workloads run with, their stores under `directory`.
    func settings(directory: String) -> BenchOptions {
        BenchOptions(
            hitSeconds: quick ? 0.3 : 1.0, objects: quick ? 1_000 : 10_000, rounds: quick ? min(rounds, 3) : rounds, edits: quick ? 60 : 300,
            only: (try? WorkloadNumbers.selected(only, of: 1...3)) ?? [], directory: directory, quick: quick)
    }
}

/// The settings of one run of `cache-bench`.
struct BenchOptions {
    /// Workload 1: objects warm in memory (the example cache: `countLimit: 1_000`) and
    /// how long each timed run reads.
    var hotObjects = 1_000
    var hitSeconds: Double
    /// Workload 2: objects in the store, and rounds of that many misses, alternating with the baseline.
    var objects: Int
    var rounds: Int
    /// Workload 3: external edits, each timed until the cache returns the new value.
    var edits: Int
    /// The workloads to run, 1 to 3.
    var only: Set<Int>
    /// Where the temporary directories are made.
    var directory: String
    var quick: Bool
}
