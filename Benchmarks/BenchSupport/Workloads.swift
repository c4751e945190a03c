// The loop of a benchmark program's numbered workloads, as archive-bench and watch-bench run
// them.

import Foundation

/// One numbered workload: its body returns its lines of figures, those that start with its
/// number being the ones the summary repeats.
public struct Workload {
    public let number: Int
    public let name: String
    public let body: () throws -> [String]

    public init(_ number: Int, _ name: String, _ body: @escaping () throws -> [String]) {
        self.number = number
        self.name = name
        self.body = body
    }
}

/// What ``runWorkloads(_:only:directory:)`` ran.
public struct WorkloadsOutcome {
    /// The lines for the summary: each workload's numbered lines, or its error.
    public var summary: [String] = []
    /// Whether a workload failed to run.
    public var failed = false
    /// The workloads before which making a file was slow (over 50 us).
    public var slowCreation: [Int] = []
}

/// Runs the workloads `only` names, in order. Before each, measures what making a file under
/// `directory` costs just now (``fileCreationCost(under:)``); prints each workload's lines, and
/// that cost, as soon as it ends, also through a pipe (make, CI logs).
public func runWorkloads(_ workloads: [Workload], only: Set<Int>, directory: String) -> WorkloadsOutcome {
    var outcome = WorkloadsOutcome()
    for workload in workloads where only.contains(workload.number) {
        do {
            let creation = try fileCreationCost(under: directory)
            if creation > 50 { outcome.slowCreation.append(workload.number) }
            let lines = try workload.body() + [String(format: "   file system before this workload: %.0f us to create an empty file", creation)]
            lines.forEach { print($0) }
            outcome.summary += lines.filter { $0.first?.isNumber == true }
        } catch {
            let line = "\(workload.number). \(workload.name): ERROR: \(error)"
            print(line)
            outcome.summary.append(line)
            outcome.failed = true
        }
        print()
        fflush(nil)
    }
    return outcome
}
