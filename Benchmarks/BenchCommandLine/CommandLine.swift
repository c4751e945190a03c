// The benchmarks' command lines: ArgumentParser's parsing and help, with the exit statuses
// Benchmarks/README.md gives (2 for bad usage, where ArgumentParser's own is 64). A module of
// its own, apart from BenchSupport, so that keyed-bench links none of the store.

import ArgumentParser
import Foundation

/// The value of `--only`: workload numbers separated by commas ("1,3"). The option may also be
/// repeated; ``selected(_:of:)`` joins them.
public struct WorkloadNumbers: ExpressibleByArgument, Sendable {
    public let numbers: [Int]

    public init?(argument: String) {
        var numbers: [Int] = []
        for part in argument.split(separator: ",") {
            guard let n = Int(part) else { return nil }
            numbers.append(n)
        }
        self.numbers = numbers
    }

    /// The workloads that `only` names, or all of `range` when it names none. Throws a usage
    /// error for a number outside `range`.
    public static func selected(_ only: [WorkloadNumbers], of range: ClosedRange<Int>) throws -> Set<Int> {
        let numbers = only.flatMap(\.numbers)
        if let wrong = numbers.first(where: { !range.contains($0) }) {
            throw ValidationError("--only takes workload numbers \(range.lowerBound) to \(range.upperBound), not '\(wrong)'")
        }
        return numbers.isEmpty ? Set(range) : Set(numbers)
    }
}

extension ParsableCommand {
    /// Parses this process's arguments and runs the command. `--help` prints the help and exits
    /// 0; bad usage prints what was wrong and the usage to stderr and exits 2; an error thrown by
    /// `run()` is printed and exits 1.
    public static func runBenchmark() {
        var command = parseBenchmarkArguments()
        do {
            try command.run()
        } catch {
            exit(withError: error)
        }
    }

    /// The parsed command, or the process's exit as ``runBenchmark()`` describes.
    static func parseBenchmarkArguments() -> any ParsableCommand {
        do {
            return try parseAsRoot()
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                print(fullMessage(for: error))
                Foundation.exit(0)
            }
            FileHandle.standardError.write(Data("\(fullMessage(for: error))\n".utf8))
            Foundation.exit(code == .validationFailure ? 2 : code.rawValue)
        }
    }
}

extension AsyncParsableCommand {
    /// ``ParsableCommand/runBenchmark()`` for a command whose `run()` is async. (Another name:
    /// top-level code would pick the synchronous one.)
    public static func runAsyncBenchmark() async {
        let parsed = parseBenchmarkArguments()
        do {
            if var command = parsed as? any AsyncParsableCommand {
                try await command.run()
            } else {
                var command = parsed
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }
}

/// `--dir PATH`: where a benchmark makes its temporary stores.
public struct ScratchOption: ParsableArguments {
    @Option(name: .customLong("dir"), help: ArgumentHelp("Make the temporary stores under PATH; removed afterwards.", valueName: "PATH"))
    public var directory = "/tmp"

    public init() {}
}

/// `--cli PATH`: the `archive-sync` binary a benchmark runs (BenchSupport's `archiveSyncPath`).
public struct ArchiveSyncOption: ParsableArguments {
    @Option(help: ArgumentHelp("The archive-sync binary to run (default: the one next to this program).", valueName: "PATH"))
    public var cli: String?

    public init() {}
}
