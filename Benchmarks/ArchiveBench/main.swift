// archive-bench: the performance targets of archive-sync, each measured as a ratio against a
// baseline run in the same process, because absolute times vary on a shared machine.
// See Benchmarks/README.md. Usage: archive-bench [--quick] [--only N] [--runs N] [--dir PATH]

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
    FileHandle.standardError.write(Data("archive-bench: \(error)\n\n\(BenchOptions.usage)\n".utf8))
    exit(2)
}
// Every store and baseline directory of this run lives under one root, removed at the end.
let runRoot = try ScratchDirectory(under: parsed.directory, name: "run")
let base = parsed.directory
parsed.directory = runRoot.path
let options = parsed

let modelBytes = try JSONEncoder().encode(Person.sample(12_345)).count
print(
    "archive-bench \(options.quick ? "--quick " : "")on \(Date.now.formatted(.iso8601.year().month().day())): \(machineDescription(directory: base))")
print(
    "model: Person, \(modelBytes) bytes of JSON; \(grouped(Double(options.count))) objects per workload, \(grouped(Double(options.largeCount))) in the large store"
)
print()
fflush(nil)  // show each part as it is measured, also through a pipe (make, CI logs)

let large = LargeStore(options)
let workloads: [(number: Int, name: String, body: () throws -> [String])] = [
    (1, "single saves", { try singleSaves(options) }),
    (2, "batch", { try batchSaves(options) }),
    (3, "cold loads", { try coldLoads(options) }),
    (4, "open + keys", { try openAndKeys(options, large: large) }),
    (5, "scan", { try scanUnchanged(options, large: large) }),
]
var summary: [String] = []
var failed = false
var slowCreation: [Int] = []
for workload in workloads where options.only.contains(workload.number) {
    do {
        // How slow making a file is just now: workloads 1-3 make one per object.
        let creation = try fileCreationCost(under: options.directory)
        if creation > 50 { slowCreation.append(workload.number) }
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
if !slowCreation.isEmpty {
    print("WARNING: creating a file was slow (over 50 us) before workload \(slowCreation.map(String.init).joined(separator: ", ")), most likely")
    print("  because many files were deleted on this file system in the last minutes (ext4 without a journal")
    print("  skips recently freed inodes). Both sides pay it per file, which pulls ratios toward 1.0x.")
}
exit(failed ? 1 : 0)
