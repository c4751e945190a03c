import Foundation
import TestSupport
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
    // The simulator finds archive-sync and crash-writer in the products directory.
    let archiveSync = try #require(builtProduct(named: "archive-sync"), "archive-sync is not built")
    let products = URL(fileURLWithPath: archiveSync).deletingLastPathComponent().path
    let result = try run("/usr/bin/env", ["python3", simulator.path, "--bin", products + "/archive-sync"] + arguments)
    let text = result.output + result.errorOutput
    var simulated = SimulatorRun(status: result.status, output: text)
    if let last = result.output.split(separator: "\n").last, last.hasPrefix("power-cut: ") {
        let numbers = last.split(separator: " ").compactMap { Int($0) }
        if numbers.count == 2 { (simulated.checked, simulated.broken) = (numbers[0], numbers[1]) }
    }
    return simulated
}

/// Simulated power cuts (docs/power-cut.md): each workload runs under the recorder, and each
/// state a cut could leave on disk, with unflushed writes lost, kept or torn and unflushed
/// creates, renames and unlinks lost or kept, is opened and checked with the CLI.
///
/// Serialized: each run keeps both cores busy for up to a minute. Each runs on a thread of its
/// own (`offPool`), so that the test runner's two cooperative threads stay free for other suites.
@Suite("Power cuts", .serialized)
struct PowerCutTests {
    /// Every state opens, verifies clean, and holds every acknowledged save, remove and restore
    /// with its bytes and version number; nothing unacknowledged is half-written.
    @Test func everyAcknowledgedChangeSurvivesAPowerCut() async throws {
        let run = try await offPool { try runSimulator(["--states", "240", "--seed", "20"]) }
        #expect(run.checked == 240, "\(run.output)")
        #expect(run.broken == 0 && run.status == 0, "\(run.output)")
    }

    /// Write faults (ENOSPC from the Nth call on, or one EIO) at a sample of the calls each
    /// command makes: each fails with exit status 1 and one sentence naming the store and the
    /// reason, the store as left verifies clean and holds every acknowledged change, and the
    /// command run again completes.
    @Test func everyWriteFaultFailsCleanly() async throws {
        let run = try await offPool {
            try runSimulator(["--states", "0", "--faults", "48", "--seed", "20", "--workloads", "saves,removes,restore,sync,recovery"])
        }
        #expect((run.checked ?? 0) >= 40, "\(run.output)")
        #expect(run.broken == 0 && run.status == 0, "\(run.output)")
    }

    /// The recorder logs calls in the order they happened across processes, not only threads:
    /// a create that another process made after seeing a rename is logged after that rename,
    /// even when the renaming process is held between its call and its record.
    @Test func theRecorderLogsOtherProcessesCallsInTheirOrder() async throws {
        let script = simulator.deletingLastPathComponent().appendingPathComponent("recorder_order.py")
        let result = try await offPool { try run("/usr/bin/env", ["python3", script.path]) }
        #expect(result.status == 0, "\(result.output)\(result.errorOutput)")
        #expect(result.output.contains("the rename was logged before the create"), "\(result.output)")
    }

    /// The checker can fail: a disk that drops the last write it had flushed breaks an invariant
    /// in some state.
    @Test func theCheckerCatchesALostFlushedWrite() async throws {
        let run = try await offPool {
            try runSimulator(["--states", "30", "--seed", "20", "--workloads", "saves", "--sabotage", "drop-flushed", "--expect-broken"])
        }
        #expect(run.checked == 30, "\(run.output)")
        #expect((run.broken ?? 0) > 0 && run.status == 0, "\(run.output)")
    }
}
