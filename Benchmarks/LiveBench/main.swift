// live-bench: live sessions (`archive-sync sync A root@127.0.0.1:B --watch`) over ssh to an
// sshd of its own on 127.0.0.1: the issue's benchmarks 1-4 (propagation latency, sustained
// load, idle cost, start-up on 100,000 objects each side). See Benchmarks/README.md.
// `live-bench --help` gives the options.

import ArchiveProcess
import ArchiveStore
import ArchiveSync
import ArgumentParser
import BenchCommandLine
import BenchSupport
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

LiveBench.runBenchmark()

struct LiveBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "live-bench",
        abstract: "Live sessions (sync A B --watch) over ssh to an sshd of its own on 127.0.0.1.",
        discussion: """
            Workloads: 1 propagation latency (an external write on A until the same bytes are in B's file; 1,000 writes spaced 20 ms; default debounce and --debounce 0); 2 sustained load (1,000 writes/s on A, then 500/s on each side; lag p99, peak memory of each side); 3 idle (CPU of each side and bytes on the wire); 4 start-up on 100,000 objects each side, both watched.

            Exit status: 0 when every workload ran (a missed target prints FAIL), 1 when one failed to run, 2 for bad usage. See Benchmarks/README.md.
            """
    )

    @Flag(help: "Shorter runs: 200 timed writes, 10 s of load and of idleness, 10,000 objects at start-up.")
    var quick = false

    @Option(help: ArgumentHelp("Run only these workloads (1-4), comma-separated or repeated.", valueName: "N"))
    var only: [String] = []

    @OptionGroup var scratch: ScratchOption

    @OptionGroup var archiveSync: ArchiveSyncOption

    func run() throws {
        let selected = Set(only.flatMap { $0.split(separator: ",") }.compactMap { Int($0) })
        let cli = archiveSyncPath(archiveSync.cli)
        guard access(cli, X_OK) == 0 else {
            print("live-bench: ERROR: needs archive-sync at \(cli) (or --cli PATH)")
            Foundation.exit(1)
        }
        do {
            let scratch = try ScratchDirectory(under: scratch.directory, name: "live")
            defer { scratch.remove() }
            let sshd = try SSHD(in: try scratch.sub("sshd"))
            defer { sshd.stop() }
            let bench = Bench(cli: cli, sshd: sshd, scratch: scratch, quick: quick)
            print(runHeading("live-bench", quick: quick, directory: self.scratch.directory))
            var lines: [String] = []
            for (number, workload) in [(1, bench.latency), (2, bench.sustained), (3, bench.idle), (4, bench.startUp)]
            where selected.isEmpty || selected.contains(number) {
                let result = try workload()
                for line in result { print(line) }
                fflush(nil)
                lines += result
            }
            print()
            for line in lines { print(line) }
        } catch {
            print("live-bench: ERROR: \(error)")
            Foundation.exit(1)
        }
    }
}

/// A running live session and the far side it started.
struct Session {
    let process: ChildProcess
    let output: String

    /// Whether a line of its `--json` output holds `text`.
    func said(_ text: String) -> Bool { ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").contains(text) }

    func stop() { _ = process.stop() }
}

/// The names a writer wrote, and when.
final class Written: Sendable {
    let list = Mutex<[(String, ContinuousClock.Instant)]>([])
}

struct Bench {
    let cli: String
    let sshd: SSHD
    let scratch: ScratchDirectory
    let quick: Bool

    /// Two stores, A here and B "there" (through ssh), each with the collection's directory.
    func stores(_ name: String) throws -> (a: String, b: String) {
        let a = try scratch.sub(name + "-a")
        let b = try scratch.sub(name + "-b")
        for path in [a, b] { try ArchiveStore(directory: path).save(Blob(-1), forKey: "seed-\(path.hash)", in: Blob.collection) }
        return (a, b)
    }

    /// `sync A root@127.0.0.1:B --watch --json` and its options; returns once it is connected
    /// and its first cycle is done.
    func startSession(_ a: String, _ b: String, _ options: [String] = []) throws -> Session {
        let output = scratch.path + "/session-\(UUID().uuidString).jsonl"
        // Its stderr is kept beside (with ARCHIVE_SYNC_LIVE_TRACE set, the session's trace).
        let process = try ChildProcess(
            cli, ["sync", a, "root@127.0.0.1:" + b, "--watch", "--json", "--rsh", sshd.rsh, "--remote-cmd", cli] + options, stdin: .null,
            stdout: .file(output), stderr: .file(output + ".err"))
        let session = Session(process: process, output: output)
        let store = try ArchiveStore(directory: a)
        let deadline = ContinuousClock.now + .seconds(300)
        while !store.liveSessions().contains(where: { $0.pid == process.pid && $0.peers.first?.lastCycle != nil }) {
            guard ContinuousClock.now < deadline, process.isRunning else { throw BenchError("the session did not start: \(output)") }
            usleep(5_000)
        }
        return session
    }

    /// The far side's `serve` process of the session on `b`.
    func farSide(_ b: String) -> Int32? { processes(with: ["serve", "--stdio", b]).first }

    /// Benchmark 1: an external write on A (a temp file renamed into A's collection) until the
    /// same file is complete in B, one at a time, spaced 20 ms; p50 and p99.
    func latency() throws -> [String] {
        var lines = [try floors()]
        for (label, options, target) in [
            ("default debounce", [String](), (50.0, 100.0, 200.0)), ("--debounce 0", ["--debounce", "0"], (20.0, 20.0, .infinity)),
        ] {
            let (a, b) = try stores("latency\(lines.count)")
            let session = try startSession(a, b, options)
            defer { session.stop() }
            let arrivals = try Arrivals(watching: b + "/" + Blob.collection)
            defer { arrivals.stop() }
            let count = quick ? 200 : 1_000
            let payload = try JSONEncoder().encode(Blob(0))
            var times: [Double] = []
            for n in 0..<count + 20 {
                let name = "w\(n).json"
                let start = ContinuousClock.now
                try writeExternally(payload, named: name, in: a + "/" + Blob.collection)
                let written = ContinuousClock.now
                let deadline = written + .seconds(10)
                while arrivals.time(of: name) == nil {
                    guard ContinuousClock.now < deadline else { throw BenchError("\(name) did not reach B within 10 s") }
                    usleep(200)
                }
                if n >= 20 { times.append((arrivals.time(of: name)! - written).seconds) }
                let spaced = start + .milliseconds(20)
                if ContinuousClock.now < spaced { Thread.sleep(forTimeInterval: (spaced - ContinuousClock.now).seconds) }
            }
            let (p50, p99) = (percentile(times, 50) * 1000, percentile(times, 99) * 1000)
            let pass = p50 <= target.1 && p99 <= target.2
            lines.append(
                "1. propagation latency, \(label), \(count) writes spaced 20 ms: p50 \(String(format: "%.1f", p50)) ms, p99 \(String(format: "%.1f", p99)) ms, max \(String(format: "%.1f", times.max()! * 1000)) ms (target p50 <= \(Int(target.1)) ms\(target.2.isFinite ? ", p99 <= \(Int(target.2)) ms" : "")) \(verdict(pass))"
            )
        }
        return lines
    }

    /// Writes `rate` new objects per second into `directory` for `seconds`, named `prefix` + n,
    /// on a thread of its own; returns the names and when each was written.
    func writer(into directory: String, prefix: String, rate: Int, seconds: Int) -> (Thread, Written) {
        let written = Written()
        let payload = (try? JSONEncoder().encode(Blob(0))) ?? Data()
        let thread = Thread {
            let start = ContinuousClock.now
            for n in 0..<rate * seconds {
                let due = start + .microseconds(Int64(n) * 1_000_000 / Int64(rate))
                if ContinuousClock.now < due { Thread.sleep(forTimeInterval: (due - ContinuousClock.now).seconds) }
                let name = "\(prefix)\(n).json"
                try? writeExternally(payload, named: name, in: directory)
                let now = ContinuousClock.now
                written.list.withLock { $0.append((name, now)) }
            }
        }
        return (thread, written)
    }

    /// Benchmark 2: 1,000 writes/s on A, then 500/s on each side at once, for 60 s each.
    func sustained() throws -> [String] {
        let seconds = quick ? 10 : 60
        var lines: [String] = []
        for (label, rates) in [("1,000 writes/s on A", (1_000, 0)), ("500 writes/s on each side", (500, 500))] {
            let (a, b) = try stores("load\(rates.1)")
            let session = try startSession(a, b)
            defer { session.stop() }
            let arrivedInB = try Arrivals(watching: b + "/" + Blob.collection)
            let arrivedInA = try Arrivals(watching: a + "/" + Blob.collection)
            defer {
                arrivedInA.stop()
                arrivedInB.stop()
            }
            let toB = writer(into: a + "/" + Blob.collection, prefix: "a", rate: rates.0, seconds: seconds)
            let toA = writer(into: b + "/" + Blob.collection, prefix: "b", rate: max(1, rates.1), seconds: rates.1 == 0 ? 0 : seconds)
            toB.0.start()
            toA.0.start()
            while !toB.0.isFinished || !toA.0.isFinished { usleep(50_000) }
            let sent = (toB.1.list.withLock { $0 }, toA.1.list.withLock { $0 })
            let deadline = ContinuousClock.now + .seconds(120)
            while arrivedInB.count(of: sent.0.map(\.0)) < sent.0.count || arrivedInA.count(of: sent.1.map(\.0)) < sent.1.count {
                guard ContinuousClock.now < deadline else { break }
                usleep(50_000)
            }
            var lags: [Double] = []
            var missing = 0
            for (names, arrivals) in [(sent.0, arrivedInB), (sent.1, arrivedInA)] {
                for (name, at) in names {
                    if let arrived = arrivals.time(of: name) { lags.append((arrived - at).seconds) } else { missing += 1 }
                }
            }
            let near = peakKilobytes(session.process.pid)
            let far = farSide(b).map(peakKilobytes) ?? 0
            let p99 = lags.isEmpty ? .infinity : percentile(lags, 99)
            let pass = missing == 0 && p99 <= 1.0 && near <= 50 * 1024 && far <= 50 * 1024
            lines.append(
                "2. sustained, \(label) for \(seconds) s: \(grouped(lags.count)) of \(grouped(sent.0.count + sent.1.count)) arrived\(missing > 0 ? " (\(missing) MISSING)" : ""); lag p50 \(milliseconds(percentile(lags, 50))), p99 \(milliseconds(p99)), max \(milliseconds(lags.max() ?? 0)); peak memory here \(megabytes(kilobytes: near)), far side \(megabytes(kilobytes: far)) (target: all, p99 <= 1 s, each <= 50 MB) \(verdict(pass))"
            )
        }
        return lines
    }

    /// Benchmark 3: nothing changes for 60 s: each side's CPU, and the bytes on the wire.
    func idle() throws -> [String] {
        let seconds = quick ? 10 : 60
        let (a, b) = try stores("idle")
        let session = try startSession(a, b)
        defer { session.stop() }
        sleep(2)
        guard let far = farSide(b) else { throw BenchError("no far side for \(b)") }
        let before = (cpuSeconds(session.process.pid) ?? 0, cpuSeconds(far) ?? 0, connectionBytes(toPort: sshd.port))
        sleep(UInt32(seconds))
        let after = (cpuSeconds(session.process.pid) ?? 0, cpuSeconds(far) ?? 0, connectionBytes(toPort: sshd.port))
        let near = (after.0 - before.0) / Double(seconds) * 100
        let farCPU = (after.1 - before.1) / Double(seconds) * 100
        let sent = after.2.sent - before.2.sent
        let received = after.2.received - before.2.received
        let pass = near <= 0.5 && farCPU <= 0.5
        return [
            "3. idle for \(seconds) s: CPU here \(String(format: "%.3f", near))%, far side \(String(format: "%.3f", farCPU))%; on the wire (TCP payload, ssh's encryption included) \(grouped(sent)) bytes sent, \(grouped(received)) received (\(String(format: "%.0f", Double(sent + received) / Double(seconds))) B/s) (target CPU <= 0.5% each, only keepalives) \(verdict(pass))"
        ]
    }

    /// Benchmark 4: 100,000 objects each side (the same, synced), both watched by `archive-sync
    /// watch`; from the session's start until its first cycle is done.
    func startUp() throws -> [String] {
        let count = quick ? 10_000 : 100_000
        let a = scratch.path + "/start-a"
        let b = scratch.path + "/start-b"
        _ = try Blob.buildStore(at: a, count: count)
        _ = try ArchiveStore(directory: b)
        let remote = ["--rsh", sshd.rsh, "--remote-cmd", cli]
        guard try runTimed(cli, ["sync", a, "root@127.0.0.1:" + b] + remote).status == 0 else { throw BenchError("the first sync failed") }
        sleep(3)  // the files settle: older than the window in which a scan re-hashes them
        let watchers = try [a, b].map { try startWatcher(cli: cli, store: $0) }
        defer { for watcher in watchers { _ = watcher.stop() } }
        try waitUntilCurrent(cli: cli, stores: [a, b])
        var times: [Double] = []
        for _ in 0..<3 {
            let start = ContinuousClock.now
            let session = try startSession(a, b)
            times.append((ContinuousClock.now - start).seconds)
            session.stop()
        }
        let time = median(times)
        // The floor under the first cycle: ssh's connection alone, and a one-shot sync of the
        // same watched stores (ssh, the far program's start, the handshake, an incremental walk
        // of nothing). The session's full compare, which follows its first cycle, is the same
        // walk as `sync --full`: its cost is what --full adds to the one-shot sync.
        var floor: [Double] = []
        var incremental: [Double] = []
        var full: [Double] = []
        for _ in 0..<3 {
            floor.append(try runTimed("/usr/bin/env", sshd.rsh.split(separator: " ").map(String.init) + ["root@127.0.0.1", "true"]).seconds)
            for (label, extra) in [("incremental", [String]()), ("--full", ["--full"])] {
                let result = try runTimed(cli, ["sync", a, "root@127.0.0.1:" + b] + remote + extra)
                guard result.status == 0 else { throw BenchError("the one-shot sync (\(label)) failed") }
                if extra.isEmpty { incremental.append(result.seconds) } else { full.append(result.seconds) }
            }
        }
        let compare = max(0, median(full) - median(incremental))
        return [
            "4. start-up on \(grouped(count)) objects each side, both watched: first cycle done after \(milliseconds(time)) (median of 3: \(times.map { milliseconds($0) }.joined(separator: ", ")); includes ssh's connection) (target <= 1 s) \(verdict(time <= 1.0))",
            "   floor: ssh alone \(milliseconds(median(floor))); one-shot sync of the same stores, incremental \(milliseconds(median(incremental))), --full \(milliseconds(median(full))): the full compare that follows the first cycle costs about \(milliseconds(compare)) (medians of 3)",
        ]
    }
}
