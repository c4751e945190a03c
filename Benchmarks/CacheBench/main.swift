// cache-bench: the model cache's performance targets, each beside its baseline measured in
// the same run. See Benchmarks/README.md. Usage: cache-bench [--quick] [--only N] [--dir PATH]

import BenchSupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

var parsed: BenchOptions
do {
    parsed = try BenchOptions.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    FileHandle.standardError.write(Data("cache-bench: \(error)\n\n\(BenchOptions.usage)\n".utf8))
    exit(2)
}
// Every store of this run lives under one root, removed at the end.
let runRoot = try ScratchDirectory(under: parsed.directory, name: "run")
let base = parsed.directory
parsed.directory = runRoot.path
let options = parsed

print("cache-bench \(options.quick ? "--quick " : "")on \(Date.now.formatted(.iso8601.year().month().day())): \(machineDescription(directory: base))")
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
exit(failed ? 1 : 0)
