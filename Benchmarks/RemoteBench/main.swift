// remote-bench: `archive-sync sync ./a root@127.0.0.1:b` over ssh against `rsync -a -e ssh` on
// the same files in the same run, as ratios, through an sshd of its own on 127.0.0.1.
// See Benchmarks/README.md.
// `remote-bench --help` gives the options.

import ArchiveProcess
import ArchiveStore
import ArgumentParser
import BenchCommandLine
import BenchSupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

RemoteBench.runBenchmark()

/// The command line of `remote-bench`.
struct RemoteBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remote-bench",
        abstract: "`archive-sync sync` over ssh against rsync -a -e ssh on the same files, through an sshd of its own on 127.0.0.1.",
        discussion: """
            Workloads (the issue's benchmark 5), each against rsync -a -e ssh on the same files: 1 first sync of N objects of 512 bytes into an empty store, against rsync followed by sync -f of the far directory; 2 no-op sync of the same, the time beyond ssh's own connection; 3 1,000 objects changed with the far side watched, against rsync and rsync --fsync. Workloads 2 and 3 also measure their floor over the same ssh: every file stat'ed on both sides at once (2), the same 1,000 files replaced on the far side (each written under a hidden name beside it, renamed over it) and flushed once (3). Without workload 1, its syncs still run (untimed) to fill the far stores.

            Exit status: 0 when every workload ran (a missed target prints FAIL), 1 when one failed to run, 2 for bad usage. See Benchmarks/README.md.
            """
    )

    @Flag(help: "10,000 objects instead of 100,000.")
    var quick = false

    @Option(help: ArgumentHelp("Repetitions of each workload (less than 1 counts as 1); medians are reported.", valueName: "N"))
    var runs = 3

    @Option(help: ArgumentHelp("Run only workload N (1-3); repeat or separate with commas for several.", valueName: "N[,N...]"))
    var only: [WorkloadNumbers] = []

    /// The far side of workload 2's floor: list and stat every entry of a directory.
    @Option(help: .hidden)
    var statFloor: String?

    /// The far side of workload 3's floor: replace the files named on its input in a directory, flushed once.
    @Option(help: .hidden)
    var writeFloor: String?

    @OptionGroup var scratch: ScratchOption

    @OptionGroup var archiveSync: ArchiveSyncOption

    func validate() throws {
        _ = try WorkloadNumbers.selected(only, of: 1...3)
    }
}

func timed(_ what: String, _ executable: String, _ arguments: [String]) throws -> Double {
    let result = try runTimed(executable, arguments)
    guard result.status == 0 else {
        throw BenchError("\(what) failed with status \(result.status): \(executable) \(arguments.joined(separator: " "))")
    }
    return result.seconds
}

/// The timed pairs of one workload, archive-sync's time first, and the references beside them.
struct Timings {
    var ours: [Double] = []
    var rsync: [Double] = []
    var flushedRsync: [Double] = []
    /// `rsync -a -e ssh` followed by `sync -f` of the far directory (the same durability as the store's).
    var rsyncThenSync: [Double] = []
}

extension RemoteBench {
    func run() throws {
        if try runFarSidePart() { return }
        let selected = try WorkloadNumbers.selected(only, of: 1...3)
        let count = quick ? 10_000 : 100_000
        let runs = max(1, self.runs)
        let base = scratch.directory
        let cli = archiveSyncPath(archiveSync.cli)
        guard access(cli, X_OK) == 0, let rsync = findOnPath("rsync"), let syncProgram = findOnPath("sync") else {
            print(
                "remote-bench: ERROR: needs archive-sync at \(cli) (or --cli PATH), rsync and sync (coreutils) on PATH; `make bench` builds and installs them"
            )
            Foundation.exit(1)
        }

        let scratch: ScratchDirectory
        do { scratch = try ScratchDirectory(under: base, name: "run") } catch {
            print("remote-bench: ERROR: \(error)")
            Foundation.exit(1)
        }
        defer { scratch.remove() }

        do {
            let sshd = try SSHD(in: try scratch.sub("sshd"))
            defer { sshd.stop() }
            let remote = ["--rsh", sshd.rsh, "--remote-cmd", cli]
            let rsyncSSH = ["-a", "-e", sshd.rsh]
            print(runHeading("remote-bench", quick: quick, directory: base))
            print("\(grouped(count)) objects of 512 bytes of JSON over ssh to 127.0.0.1; \(runs) runs, medians")
            print()

            let a = scratch.path + "/a"
            let store = try Blob.buildStore(at: a, count: count)
            // Settled: files older than the window in which a scan re-hashes them.
            sleep(3)
            _ = try store.scan()

            // rsync copies the objects' directory, as sync-bench does: the same files, without the manifest.
            let source = a + "/" + Blob.collection + "/"
            let ssh = sshd.rsh.split(separator: " ").map(String.init) + ["root@127.0.0.1", "true"]
            let durableRsync = rsyncHasFsync(rsync)
            var first = Timings()
            var noop = Timings()
            var changed = Timings()
            var connection: [Double] = []
            var floors = (noop: [Double](), changed: [Double]())
            var lastB = ""
            var lastR = ""
            for run in 0..<runs {
                let b = scratch.path + "/b\(run)"
                _ = try ArchiveStore(directory: b)
                let r = try scratch.sub("r\(run)")
                (lastB, lastR) = (b, r)
                let rs = try scratch.sub("rs\(run)")
                let rf = try scratch.sub("rf\(run)")
                let creation = try fileCreationCostOnceNormal(under: scratch.path)
                // Each timed step: the order turns each run, so that neither tool always goes first.
                func inTurn(_ steps: [() throws -> Void]) throws {
                    for step in run % 2 == 0 ? steps : steps.reversed() { try step() }
                }
                func flushedReference(_ timings: inout Timings, _ what: String, into directory: String) throws {
                    guard durableRsync else { return }
                    timings.flushedRsync.append(
                        try timed(what + " rsync --fsync", rsync, rsyncSSH + ["--fsync", source, "root@127.0.0.1:" + directory + "/"]))
                }
                try inTurn([
                    { first.ours.append(try timed("first sync", cli, ["sync", a, "root@127.0.0.1:" + b] + remote)) },
                    { first.rsync.append(try timed("first rsync", rsync, rsyncSSH + [source, "root@127.0.0.1:" + r + "/"])) },
                    {
                        guard selected.contains(1) else { return }  // only to be timed
                        // What the store's durability costs rsync: every file it wrote flushed
                        // (`sync -f`: the file system of the far directory, here the same one).
                        let copy = try timed("first rsync before sync -f", rsync, rsyncSSH + [source, "root@127.0.0.1:" + rs + "/"])
                        first.rsyncThenSync.append(copy + (try timed("sync -f", syncProgram, ["-f", rs])))
                    },
                    // (Workload 3 syncs 1,000 changes into the same copy.)
                    { if !selected.isDisjoint(with: [1, 3]) { try flushedReference(&first, "first", into: rf) } },
                ])
                // B's files settle too. The first scan after that re-hashes the files the sync wrote
                // (their stamps were recorded within the window in which a stamp cannot be trusted), once;
                // rsync gets an untimed no-op pass as well.
                sleep(3)
                let settling = try timed("settling sync", cli, ["sync", a, "root@127.0.0.1:" + b] + remote)
                let settlingCopy = try timed("settling rsync", rsync, rsyncSSH + [source, "root@127.0.0.1:" + r + "/"])
                connection.append(try timed("ssh alone", "/usr/bin/env", ssh))
                if selected.contains(2) {
                    noop.ours.append(try timed("no-op sync", cli, ["sync", a, "root@127.0.0.1:" + b] + remote))
                    noop.rsync.append(try timed("no-op rsync", rsync, rsyncSSH + [source, "root@127.0.0.1:" + r + "/"]))
                    floors.noop.append(try measureStatFloor(ssh: Array(ssh.dropLast()), near: source, far: b + "/" + Blob.collection))
                }

                // 1,000 changed, with the far side watched (by a watcher on its host, as a live
                // or cron set-up has it): the sync does not scan it.
                if selected.contains(3) {
                    let farWatcher = try startWatcher(cli: cli, store: b)
                    defer { farWatcher.stop() }
                    try waitUntilCurrent(cli: cli, stores: [b])
                    let fill = Character(UnicodeScalar(UInt8(ascii: "a") + UInt8(run % 26)))
                    let changedKeys = stride(from: run, to: count, by: count / 1_000).map { Blob.key($0) }
                    try store.batch { tx in
                        for i in stride(from: run, to: count, by: count / 1_000) {
                            try tx.save(Blob(i, fill: fill), forKey: Blob.key(i), in: Blob.collection)
                        }
                    }
                    try inTurn([
                        { changed.ours.append(try timed("sync of 1,000 changes", cli, ["sync", a, "root@127.0.0.1:" + b] + remote)) },
                        { changed.rsync.append(try timed("rsync of 1,000 changes", rsync, rsyncSSH + [source, "root@127.0.0.1:" + r + "/"])) },
                        { try flushedReference(&changed, "1,000 changes", into: rf) },
                    ])
                    // The floor changes the same 1,000 files in rsync's copy (its own 100,000), after rsync's
                    // run; twice, the faster kept, so that a slow spell of the disk does not raise it.
                    let names = changedKeys.map { $0 + ".json" }
                    let floorRuns = try (0..<2).map { _ in try measureWriteFloor(ssh: Array(ssh.dropLast()), near: source, replacing: names, in: r) }
                    floors.changed.append(floorRuns.min()!)
                }
                // Each run's stores are left in place until the end (see ScratchDirectory).
                func last(_ values: [Double]) -> String { values.last.map { milliseconds($0) } ?? "-" }
                print(
                    "run \(run + 1): first \(last(first.ours)) vs \(last(first.rsync)) (with sync -f \(last(first.rsyncThenSync))); first no-op (settling, not in the table) \(milliseconds(settling)) vs \(milliseconds(settlingCopy)); no-op \(last(noop.ours)) vs \(last(noop.rsync)) (floor: both sides stat'ed at once over ssh \(last(floors.noop))); 1,000 changed, far side watched \(last(changed.ours)) vs \(last(changed.rsync)) (floor: 1,000 of its files replaced and flushed once over ssh \(last(floors.changed))); ssh alone \(milliseconds(connection.last!)); \(Int(creation)) us to create a file before it\(durableRsync ? "; rsync --fsync: first \(last(first.flushedRsync)), 1,000 changed \(last(changed.flushedRsync))" : "")"
                )
                fflush(nil)
            }
            // The no-op again with both stores watched (the far one by a watcher on its host): neither
            // side scans, so what is left is ssh's connection and the exchange of two sequence numbers.
            let watchers = try selected.contains(2) ? [a, lastB].map { try startWatcher(cli: cli, store: $0) } : []
            defer {
                for watcher in watchers {
                    watcher.stop()
                }
            }
            if !watchers.isEmpty { try waitUntilCurrent(cli: cli, stores: [a, lastB]) }
            var watched = Timings()
            for _ in 0..<(watchers.isEmpty ? 0 : runs) {
                watched.ours.append(try timed("watched no-op sync", cli, ["sync", a, "root@127.0.0.1:" + lastB] + remote))
                watched.rsync.append(try timed("no-op rsync", rsync, rsyncSSH + [source, "root@127.0.0.1:" + lastR + "/"]))
            }
            // Without workload 1, its syncs only filled B and rsync's copy.
            if !selected.contains(1) { first = Timings() }
            report(count: count, floor: median(connection), first: first, noop: noop, watched: watched, changed: changed)
            reportFloors(
                connection: median(connection), noop: (floors.noop, noop.ours, noop.rsync), changed: (floors.changed, changed.ours, changed.rsync))
        } catch {
            print("remote-bench: ERROR: \(error)")
            Foundation.exit(1)
        }
    }

    /// The table of the issue's benchmark 5 (one-shot sync over ssh, restated).
    func report(count: Int, floor: Double, first: Timings, noop: Timings, watched: Timings, changed: Timings) {
        // Each side pays ssh's connection (key exchange, authentication, a session): the floor
        // under any tool that opens one per run. The no-op's target is on the time beyond it.
        print()
        print("ssh alone (`ssh host true`, the connection each run opens): \(milliseconds(floor))")
        print()
        print("| # | workload | target | archive-sync over ssh | anchor | anchor's time | ratio | verdict |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        // A workload left out (`--only`) has no times: its rows are left out.
        func row(_ number: Int, _ name: String, _ target: Double, ours: @autoclosure () -> Double, _ anchor: String, _ theirs: [Double]) {
            guard !theirs.isEmpty else { return }
            let ours = ours()
            let r = ours / median(theirs)
            print(
                "| \(number) | \(name) | <= \(ratio(target)) | \(milliseconds(ours)) | \(anchor) | \(milliseconds(median(theirs))) | **\(ratio(r))** | \(verdict(r <= target)) |"
            )
        }
        row(1, "first sync of \(grouped(count))", 1.0, ours: median(first.ours), "`rsync -a -e ssh` + `sync -f`", first.rsyncThenSync)
        row(1, "(reference)", 1.0, ours: median(first.ours), "`rsync -a -e ssh`", first.rsync)
        row(1, "(reference)", 1.0, ours: median(first.ours), "`rsync -a --fsync -e ssh`", first.flushedRsync)
        for (name, timings) in [("no-op, both sides scanned", noop), ("no-op, both sides watched", watched)] {
            row(2, name + ", beyond ssh's connection", 0.1, ours: max(0, median(timings.ours) - floor), "`rsync -a -e ssh` no-op", timings.rsync)
            row(2, name + " (whole, reference)", 0.1, ours: median(timings.ours), "`rsync -a -e ssh` no-op", timings.rsync)
        }
        row(3, "1,000 changed, far side watched", 0.5, ours: median(changed.ours), "`rsync -a -e ssh`", changed.rsync)
        row(3, "1,000 changed, far side watched", 0.5, ours: median(changed.ours), "`rsync -a --fsync -e ssh`", changed.flushedRsync)
        if first.flushedRsync.isEmpty && !first.ours.isEmpty { print("(this rsync has no --fsync: its rows are left out)") }
    }
}
