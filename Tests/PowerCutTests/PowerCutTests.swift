import Foundation
import Testing

/// Tests/PowerCut/powercut.py, found from this file's path (the tests run from a checkout).
private let simulator = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("PowerCut/powercut.py")

/// What one run of the simulator printed, and how it exited.
private struct SimulatorRun {
    var status: Int32
    var output: String
    /// The numbers of its last line, `power-cut: N states checked, M broke an invariant`.
    var checked: Int?
    var broken: Int?
}

private func runSimulator(_ arguments: [String]) throws -> SimulatorRun {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    // The simulator finds archive-sync and crash-writer beside this test runner.
    let runner = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    process.arguments = ["python3", simulator.path, "--bin", runner.path] + arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let text = String(decoding: data, as: UTF8.self)
    var run = SimulatorRun(status: process.terminationStatus, output: text)
    if let last = text.split(separator: "\n").last, last.hasPrefix("power-cut: ") {
        let numbers = last.split(separator: " ").compactMap { Int($0) }
        if numbers.count == 2 { (run.checked, run.broken) = (numbers[0], numbers[1]) }
    }
    return run
}

/// Simulated power cuts (docs/power-cut.md): each workload runs under the recorder, and each
/// state a cut could leave on disk, with unflushed writes lost, kept or torn and unflushed
/// creates, renames and unlinks lost or kept, is opened and checked with the CLI.
@Suite("Power cuts")
struct PowerCutTests {
    /// Every state opens, verifies clean, and holds every acknowledged save, remove and restore
    /// with its bytes and version number; nothing unacknowledged is half-written.
    @Test func everyAcknowledgedChangeSurvivesAPowerCut() throws {
        let run = try runSimulator(["--states", "240", "--seed", "20"])
        #expect(run.checked == 240, "\(run.output)")
        #expect(run.broken == 0 && run.status == 0, "\(run.output)")
    }

    /// The checker can fail: a disk that drops the last write it had flushed breaks an invariant
    /// in some state.
    @Test func theCheckerCatchesALostFlushedWrite() throws {
        let run = try runSimulator(["--states", "30", "--seed", "20", "--workloads", "saves", "--sabotage", "drop-flushed", "--expect-broken"])
        #expect(run.checked == 30, "\(run.output)")
        #expect((run.broken ?? 0) > 0 && run.status == 0, "\(run.output)")
    }
}
