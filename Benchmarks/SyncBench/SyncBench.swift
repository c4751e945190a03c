import ArchiveStore
import BenchSupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The workloads of the two-directory sync issue, each against rsync or unison in the same run.
final class SyncBench {
    let options: SyncBenchOptions
    let scratch: ScratchDirectory
    let cli: String
    let rsync: String
    let unison: String
    private var lines: [String] = []
    /// Peak resident memory of each timed sync, in kilobytes, by what it did.
    private var memory: [(String, Int)] = []

    init(_ options: SyncBenchOptions) throws {
        self.options = options
        scratch = try ScratchDirectory(under: options.directory, name: "run")
        cli = try archiveSyncBinary(options.cli)
        guard let rsync = findOnPath("rsync"), let unison = findOnPath("unison") else {
            throw BenchError("rsync and unison are needed (apt-get install -y rsync unison; `make bench` installs them)")
        }
        self.rsync = rsync
        self.unison = unison
        // Unison keeps its archives under $UNISON: here, inside the run's directory.
        setenv("UNISON", try scratch.sub("unison-home"), 1)
    }

    private func say(_ line: String) {
        print(line)
        fflush(nil)
        if line.first?.isNumber == true { lines.append(line) }
    }

    private func timed(_ what: String, _ executable: String, _ arguments: [String]) throws -> Double {
        let result = try runTimed(executable, arguments)
        guard result.status == 0 else {
            throw BenchError("\(what) failed with status \(result.status): \(executable) \(arguments.joined(separator: " "))")
        }
        if executable == cli { memory.append((what, result.maxResidentKilobytes)) }
        return result.seconds
    }

    /// Benchmarks/tools/no-flush.c built in the run's directory, for workload 1's floor; nil
    /// when there is no C compiler.
    private func noFlushLibrary() throws -> String? {
        guard let cc = findOnPath("cc") else { return nil }
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("tools/no-flush.c").path
        let library = scratch.path + "/no-flush.so"
        _ = try timed("cc", cc, ["-O2", "-shared", "-fPIC", "-o", library, source])
        return library
    }

    func run() throws {
        let n = options.count
        print(runHeading("sync-bench", quick: options.quick, directory: options.directory))
        print("\(grouped(n)) objects of 512 bytes of JSON; \(options.runs) runs, medians; \(unisonVersion())")
        print()

        // Store A, settled: its files are older than the 2 s in which a scan re-hashes them.
        let a = scratch.path + "/a"
        let store = try Blob.buildStore(at: a, count: n)
        Thread.sleep(forTimeInterval: 2.1)
        _ = try store.scan()
        let source = a + "/" + Blob.collection + "/"

        // 1. First sync into an empty store (durable) against `rsync -a` followed by `sync -f` of
        // its target: the copy made durable once, as the store's sync makes its own (issue 20's
        // anchor, like for like). Beside it, plain `rsync -a` (its copy left in the page cache)
        // and `rsync -a --fsync` (each file flushed as it is written).
        let durableRsync = options.only.contains(1) && rsyncHasFsync(rsync)
        var ours: [Double] = []
        var theirs: [Double] = []
        var anchor: [Double] = []
        var flushed: [Double] = []
        var floor: [Double] = []
        let noFlush = options.only.contains(1) ? try noFlushLibrary() : nil
        var b = ""
        var rsyncCopy = ""
        for round in 0..<max(1, min(options.runs, 2)) {
            if options.only.contains(1) {
                let creation = try fileCreationCostOnceNormal(under: scratch.path)
                print(String(format: "   file system before round \(round + 1): %.0f us to create an empty file", creation))
            }
            let target = scratch.path + "/b\(round)"
            let copy = try scratch.sub("rsync\(round)") + "/"
            _ = try runCapturing(cli, ["init", target])
            // The order turns each round, so that neither side always reads A's files first.
            var steps: [() throws -> Void] = [
                { ours.append(try self.timed("first sync", self.cli, ["sync", a, target])) },
                { theirs.append(try self.timed("rsync", self.rsync, ["-a", source, copy])) },
            ]
            if options.only.contains(1) {
                let syncedCopy = try scratch.sub("rsync-sync\(round)") + "/"
                steps.append {
                    anchor.append(
                        try self.timed(
                            "rsync + sync -f", "/bin/sh", ["-c", "\"$0\" -a \"$1\" \"$2\" && sync -f \"$2\"", self.rsync, source, syncedCopy]))
                }
            }
            if let noFlush {
                // The floor of a write path that flushes once: the same sync with every flush
                // a no-op, then one `sync -f` of its target.
                let floorTarget = scratch.path + "/floor\(round)"
                _ = try runCapturing(cli, ["init", floorTarget])
                steps.append {
                    floor.append(
                        try self.timed(
                            "no-flush sync + sync -f", "/bin/sh",
                            ["-c", "LD_PRELOAD=\"$0\" \"$1\" sync \"$2\" \"$3\" && sync -f \"$3\"", noFlush, self.cli, a, floorTarget]))
                }
            }
            if durableRsync {
                let flushedCopy = try scratch.sub("rsync-fsync\(round)") + "/"
                steps.append { flushed.append(try self.timed("rsync --fsync", self.rsync, ["-a", "--fsync", source, flushedCopy])) }
            }
            for step in round % 2 == 0 ? steps : steps.reversed() { try step() }
            if round == 0 { (b, rsyncCopy) = (target, copy) }
        }
        if options.only.contains(1) {
            let first = median(ours) / median(anchor)
            say(
                "1. first sync of \(grouped(n)) into an empty store (durable): \(secondsText(median(ours))), rsync -a + sync -f \(secondsText(median(anchor))), ratio \(ratio(first)) (target <= 1.0x) \(verdict(first <= 1.0))"
            )
            print(
                "   beside it, rsync -a (no flush): \(secondsText(median(theirs))); the first sync takes \(ratio(median(ours) / median(theirs))) of it"
            )
            if noFlush != nil {
                print(
                    "   floor (the same sync with no flush, then sync -f): \(secondsText(median(floor))); the first sync takes \(ratio(median(ours) / median(floor))) of it (target <= 1.10x \(verdict(median(ours) <= 1.1 * median(floor)))), the floor \(ratio(median(floor) / median(anchor))) of rsync -a + sync -f"
                )
            } else {
                print("   (no C compiler to build tools/no-flush.c: the floor is left out)")
            }
            if durableRsync {
                print(
                    "   rsync -a --fsync (each file flushed): \(secondsText(median(flushed))); the first sync takes \(ratio(median(ours) / median(flushed))) of it"
                )
            } else {
                print("   (this rsync has no --fsync: the durable reference is left out)")
            }
        }

        // Unison's pair: two plain copies, and its first run to build its archives (untimed).
        let ua = try scratch.sub("unison-a")
        let ub = try scratch.sub("unison-b")
        _ = try timed("rsync", rsync, ["-a", source, ua + "/"])
        _ = try timed("rsync", rsync, ["-a", source, ub + "/"])
        let unisonArguments = [ua, ub, "-batch", "-silent"]
        let unisonFirst = try timed("unison", unison, unisonArguments)
        print("   unison's first run on two equal copies (untimed for the ratios): \(secondsText(unisonFirst))")

        // Settle B: its files were just written. One untimed sync re-hashes them once.
        Thread.sleep(forTimeInterval: 2.1)
        _ = try timed("settling sync", cli, ["sync", a, b])

        // 2. No-op sync, both sides scanned, against rsync with nothing to copy and unison with nothing to do.
        if options.only.contains(2) || options.only.contains(5) {
            var (noop, rsyncNoop, unisonNoop) = ([Double](), [Double](), [Double]())
            var unisonMemory: [Int] = []
            for _ in 0..<options.runs {
                noop.append(try timed("no-op sync", cli, ["sync", a, b]))
                rsyncNoop.append(try timed("rsync", rsync, ["-a", source, rsyncCopy]))
                let u = try runTimed(unison, unisonArguments)
                guard u.status == 0 else { throw BenchError("unison failed with status \(u.status)") }
                unisonNoop.append(u.seconds)
                unisonMemory.append(u.maxResidentKilobytes)
            }
            let vsRsync = median(noop) / median(rsyncNoop)
            let vsUnison = median(noop) / median(unisonNoop)
            if options.only.contains(2) {
                say(
                    "2. no-op sync of \(grouped(n)), both scanned: \(milliseconds(median(noop))), rsync -a \(milliseconds(median(rsyncNoop))) (ratio \(ratio(vsRsync)), target <= 0.5x \(verdict(vsRsync <= 0.5))), unison \(milliseconds(median(unisonNoop))) (ratio \(ratio(vsUnison)), target <= 0.25x \(verdict(vsUnison <= 0.25)))"
                )
                print("   unison's peak memory: \(megabytes(kilobytes: unisonMemory.max()!))")
            }
        }

        // 3. No-op sync of two watched stores.
        if options.only.contains(3) {
            let watchers = try [a, b].map { try startWatcher(cli: cli, store: $0) }
            defer { watchers.forEach { $0.stop() } }
            try waitUntilCurrent(cli: cli, stores: [a, b])
            var watched: [Double] = []
            for _ in 0..<max(options.runs, 5) { watched.append(try timed("watched no-op sync", cli, ["sync", a, b])) }
            say(
                "3. no-op sync of \(grouped(n)), both watched: \(milliseconds(median(watched))) (target < 50 ms) \(verdict(median(watched) < 0.050))")
        }

        // 4. 1% changed on each side (different objects), against unison on the same changes.
        if options.only.contains(4) {
            let changed = max(1, n / 100)
            var (ours, theirs) = ([Double](), [Double]())
            for round in 0..<options.runs {
                // Side A changes objects round*2*changed ..< +changed, side B the next `changed`.
                let fill: Character = round % 2 == 0 ? "y" : "z"
                for i in 0..<changed {
                    let inA = (round * 2 * changed + i) % n
                    let inB = (round * 2 * changed + changed + i) % n
                    let dataA = try JSONEncoder.sorted.encode(Blob(inA, fill: fill))
                    let dataB = try JSONEncoder.sorted.encode(Blob(inB, fill: fill))
                    try dataA.write(to: URL(fileURLWithPath: source + Blob.file(inA)))
                    try dataA.write(to: URL(fileURLWithPath: ua + "/" + Blob.file(inA)))
                    try dataB.write(to: URL(fileURLWithPath: b + "/" + Blob.collection + "/" + Blob.file(inB)))
                    try dataB.write(to: URL(fileURLWithPath: ub + "/" + Blob.file(inB)))
                }
                ours.append(try timed("1% sync", cli, ["sync", a, b]))
                theirs.append(try timed("unison", unison, unisonArguments))
            }
            let vsUnison = median(ours) / median(theirs)
            say(
                "4. \(grouped(changed)) of \(grouped(n)) changed on each side: \(milliseconds(median(ours))), unison \(milliseconds(median(theirs))), ratio \(ratio(vsUnison)) (target <= 0.3x) \(verdict(vsUnison <= 0.3))"
            )
        }

        // 6. Concurrent edits of the same objects, merged field by field or kept as copies.
        if options.only.contains(6) { try mergeWorkload(a: a, b: b) }

        // 5. Peak memory of every timed sync above.
        if options.only.contains(5), let peak = memory.max(by: { $0.1 < $1.1 }) {
            say(
                "5. peak memory of a sync of \(grouped(n)): \(megabytes(kilobytes: peak.1)) (\(peak.0)) (target < 40 MB) \(verdict(peak.1 < 40 * 1024))"
            )
            let each = Dictionary(memory.map { ($0.0, $0.1) }, uniquingKeysWith: max).sorted { $0.key < $1.key }
            print("   by run: " + each.map { "\($0.key) \(megabytes(kilobytes: $0.value))" }.joined(separator: ", "))
        }

        print()
        print("Summary:")
        for line in lines { print("  " + line) }
    }

    /// Workload 6: 1% of the objects edited on both sides, half of them in different fields
    /// (which merge) and half in the same field (a conflict copy each), synced with merging on;
    /// then as many other objects edited alike, synced with `--merge none`. The order alternates.
    private func mergeWorkload(a: String, b: String) throws {
        let n = options.count
        let changed = max(2, n / 100)
        var (merging, copying) = ([Double](), [Double]())
        for round in 0..<options.runs {
            // From the middle up, away from workload 4's objects.
            let first = n / 2 + round * 2 * changed
            for step in 0..<2 {
                let objects = (first + step * changed..<first + (step + 1) * changed).map { $0 % n }
                for i in objects { try editBothSides(i, a: a, b: b, disjoint: i % 2 == 0) }
                if (round + step) % 2 == 0 {
                    merging.append(try timed("merging sync", cli, ["sync", a, b]))
                } else {
                    copying.append(try timed("sync --merge none", cli, ["sync", a, b, "--merge", "none"]))
                }
            }
        }
        let cost = median(merging) / median(copying)
        say(
            "6. \(grouped(changed)) of \(grouped(n)) edited on both sides, half in disjoint fields: merging \(milliseconds(median(merging))), --merge none \(milliseconds(median(copying))), ratio \(ratio(cost)) (target <= 1.2x) \(verdict(cost <= 1.2))"
        )
    }

    /// Rewrites object `i` on both sides: in different fields when `disjoint` (they merge), else
    /// the same field two ways (a conflict).
    private func editBothSides(_ i: Int, a: String, b: String, disjoint: Bool) throws {
        let original = Blob(i)
        let (here, there): ([String: Any], [String: Any]) =
            disjoint
            ? (["n": i, "pad": original.pad, "a": 1], ["n": i, "pad": original.pad, "b": 1])
            : (["n": i, "pad": String(original.pad.dropLast()) + "y"], ["n": i, "pad": String(original.pad.dropLast()) + "z"])
        for (store, object) in [(a, here), (b, there)] {
            let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
            try data.write(to: URL(fileURLWithPath: store + "/" + Blob.collection + "/" + Blob.file(i)))
        }
    }

    private func unisonVersion() -> String {
        (try? runCapturing(unison, ["-version"]).output.trimmingCharacters(in: .whitespacesAndNewlines)) ?? "unison"
    }
}

private func secondsText(_ seconds: Double) -> String { String(format: "%.2f s", seconds) }

extension JSONEncoder {
    /// Sorted keys, as the store writes.
    fileprivate static let sorted: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }()
}
