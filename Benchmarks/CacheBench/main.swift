// cache-bench: the model cache's performance targets, each beside its baseline measured in
// the same run. See Benchmarks/README.md; `cache-bench --help` gives the options.

import ArgumentParser
import BenchCommandLine
import BenchSupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

await CacheBench.runAsyncBenchmark()

extension CacheBench {
    func run() async throws {
        // Every store of this run lives under one root, removed at the end.
        let runRoot = try ScratchDirectory(under: scratch.directory, name: "run")
        let options = settings(directory: runRoot.path)
        print(runHeading("cache-bench", quick: quick, directory: scratch.directory))
        print(
            "warm hits for \(options.hitSeconds) s per run over \(grouped(options.hotObjects)) objects, \(grouped(options.objects)) misses per round, \(grouped(options.edits)) timed external edits"
        )
        print()
        fflush(nil)

        let workloads: [(number: Int, name: String, body: () async throws -> [String])] = [
            (1, "warm hits", { try await warmHits(options) }),
            (2, "misses", { try await misses(options) }),
            (3, "invalidation latency", { try await invalidationLatency(options) }),
        ]
        var summary: [String] = []
        var failed = false
        for workload in workloads where options.only.contains(workload.number) {
            do {
                let lines = try await workload.body()
                lines.forEach { print($0) }
                summary += lines.filter { $0.first?.isNumber == true }
            } catch {
                let line = "\(workload.number). \(workload.name): ERROR: \(error)"
                print(line)
                summary.append(line)
                failed = true
            }
            print()
            fflush(nil)
        }
        runRoot.remove()
        print("Summary")
        summary.forEach { print($0) }
        Foundation.exit(failed ? 1 : 0)
    }
}
