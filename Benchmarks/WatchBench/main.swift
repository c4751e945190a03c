// watch-bench: the watcher's performance targets, each beside a baseline measured in the same
// run. See Benchmarks/README.md. Usage: watch-bench [--quick] [--only N] [--dir PATH] [--cli PATH]

import ArchiveStore
import BenchSupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

var parsed: BenchOptions
do {
    parsed = try BenchOptions.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    FileHandle.standardError.write(Data("watch-bench: \(error)\n\n\(BenchOptions.usage)\n".utf8))
    exit(2)
}
// Every store of this run lives under one root, removed at the end.
let runRoot = try ScratchDirectory(under: parsed.directory, name: "run")
let base = parsed.directory
parsed.directory = runRoot.path
let options = parsed

print("watch-bench \(options.quick ? "--quick " : "")on \(Date.now.formatted(.iso8601.year().month().day())): \(machineDescription(directory: base))")
print(
    "\(grouped(options.writes)) timed writes, a burst of \(grouped(options.burst)) files, a store of \(grouped(options.storeSize)) objects"
)
print()
fflush(nil)  // show each part as it is measured, also through a pipe (make, CI logs)

let workloads: [(number: Int, name: String, body: () throws -> [String])] = [
    (1, "latency", { try latency(options) }),
    (2, "burst", { try burst(options) }),
    (3, "memory", { try memory(options) }),
]
var summary: [String] = []
var failed = false
for workload in workloads where options.only.contains(workload.number) {
    do {
        let creation = try fileCreationCost(under: options.directory)
        let lines = try workload.body() + [String(format: "   file system before this workload: %.0f us to create an empty file", creation)]
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

print("Summary:")
summary.forEach { print("  " + $0) }
exit(failed ? 1 : 0)
