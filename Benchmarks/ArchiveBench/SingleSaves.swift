import ArchiveStore
import BenchSupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Workload 1: `count` durable single saves, `store.save(model, forKey:)` in a loop, against
/// Foundation's atomic write of each object; and, in the same rounds, the C-level floor of
/// each durability order, with no encoding: write+fsync+rename (Foundation's); write+rename
/// unflushed then one `fdatasync` of a page appended to one file (the store's: its file written
/// in a staging directory and renamed into its collection's, as the store does, and one commit
/// of SQLite's WAL); and that append+fdatasync alone. A sixth is the store's order with each
/// object encoded in it by `JSONEncoder`, as the store's codec and the baseline encode: the
/// floor of a save of a model, not of bytes. A seventh is that with a SQLite commit in place of
/// the appended page (``SQLiteCommitFloor``): the floor of the design itself, a save made
/// durable by one manifest commit.
///
/// The seven alternate in 10 rounds of count/10 objects each, in a rotating order, so that a
/// slow spell of the shared machine's disk hits all of them alike. Each one's CPU time per
/// save is printed beside its wall time: the store's gap to its floor is CPU, its commit's.
func singleSaves(_ options: BenchOptions) throws -> [String] {
    let scratch = try ScratchDirectory(under: options.directory, name: "single")
    let store = try ArchiveStore(directory: try scratch.sub("store"))
    let baseline = FoundationBaseline(directory: try scratch.sub("baseline"))
    let oneSync = try RawDirectory(try scratch.sub("raw-one-fsync"))
    // The store's layout: staged in `.archive-sync/staging`, renamed into the collection's
    // directory. ext4 takes a new file's inode from its directory's block group, whose
    // recently freed inodes it skips one by one: where the file is made costs as much as the
    // flush on this machine, so the floor makes it where the store does.
    let unflushed = try RawDirectory(try scratch.sub("raw-unflushed/Person"), staging: try scratch.sub("raw-unflushed/.archive-sync/staging"))
    let log = try AppendedLog(try scratch.sub("raw-log") + "/log")
    let manifest = try SQLiteCommitFloor(try scratch.sub("raw-unflushed/.archive-sync") + "/manifest.db")
    defer {
        oneSync.close()
        unflushed.close()
        log.close()
        manifest.close()
    }
    let people = (0..<options.count).map(Person.sample)
    let bytes = Array(try JSONEncoder().encode(people[0]))
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    let contenders: [(Range<Int>) throws -> Void] = [
        { range in for n in range { try store.save(people[n], forKey: Person.key(n)) } },
        { range in for n in range { try baseline.save(people[n], forKey: Person.key(n)) } },
        { range in for n in range { try oneSync.write(bytes, as: "person\(n).json", sync: true) } },
        { range in
            for n in range {
                try unflushed.write(bytes, as: "person\(n).json", sync: false)
                try log.append(bytes)
            }
        },
        { range in for _ in range { try log.append(bytes) } },
        { range in
            for n in range {
                let encoded = Array(try encoder.encode(people[n]))
                try unflushed.write(encoded, as: "encoded\(n).json", sync: false)
                try log.append(encoded)
            }
        },
        { range in
            for n in range {
                let encoded = Array(try encoder.encode(people[n]))
                try unflushed.stage(encoded, as: "committed\(n).json")
                try manifest.commit(encoded, forKey: "committed\(n)")
                try unflushed.place("committed\(n).json")
            }
        },
    ]
    let rounds = 10
    let perRound = options.count / rounds
    var totals = [Double](repeating: 0, count: contenders.count)
    var cpu = [Double](repeating: 0, count: contenders.count)
    for round in 0..<rounds {
        let range = round * perRound..<(round + 1) * perRound
        for step in contenders.indices {
            let which = (round + step) % contenders.count
            let cpuBefore = processCPUSeconds()
            totals[which] += try seconds { try contenders[which](range) }
            cpu[which] += processCPUSeconds() - cpuBefore
        }
        try manifest.checkpoint()
    }
    let total = perRound * rounds
    let rate = totals.map { Double(total) / $0 }
    let r = rate[0] / rate[1]
    return [
        "1. single saves: store \(perSecond(total, totals[0])), baseline \(perSecond(total, totals[1])), ratio \(ratio(r)) (target >= 1.0x) \(verdict(r >= 1.0))",
        "   C floor, same rounds: write+fsync+rename (Foundation's order) \(perSecond(total, totals[2])),"
            + " write+rename, append a 4 KiB page+fdatasync (the store's order) \(perSecond(total, totals[3])), ratio \(ratio(rate[3] / rate[2]));"
            + " the append+fdatasync alone \(perSecond(total, totals[4]))",
        "   the store reaches \(ratio(rate[0] / rate[3])) of its 1-flush floor; the baseline \(ratio(rate[1] / rate[2])) of its 1-fsync floor",
        "   the store's order in C with each object encoded by JSONEncoder (a save of a model): \(perSecond(total, totals[5])),"
            + " \(ratio(rate[5] / rate[1])) of the baseline; the store reaches \(ratio(rate[0] / rate[5])) of it (within 10%: \(verdict(rate[0] >= rate[5] * 0.9)))",
        "   the same with a SQLite commit as its one flush (a history row with the bytes, the object's row: the design's floor):"
            + " \(perSecond(total, totals[6])), \(ratio(rate[6] / rate[1])) of the baseline; the store reaches \(ratio(rate[0] / rate[6])) of it"
            + " (within 10%: \(verdict(rate[0] >= rate[6] * 0.9)))",
        "   CPU per save (this process, every thread, user + system): store \(microseconds(cpu[0], total)), baseline \(microseconds(cpu[1], total)),"
            + " Foundation's order in C \(microseconds(cpu[2], total)), the store's order in C \(microseconds(cpu[3], total)), encoding too \(microseconds(cpu[5], total)),"
            + " with a SQLite commit \(microseconds(cpu[6], total));"
            + " wall time per save: store \(microseconds(totals[0], total)), the store's order in C \(microseconds(totals[3], total))",
    ]
}

/// The CPU time every thread of this process has used so far, user and system: where the
/// store's time goes beyond its floor's is CPU (its commit), which this shows apart from the
/// flush's wait, and which a loaded machine inflates less than the wall time.
private func processCPUSeconds() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) * 1e-9
}

/// `seconds` spread over `count` saves, in microseconds per save.
private func microseconds(_ seconds: Double, _ count: Int) -> String {
    String(format: "%.0f us", seconds / Double(count) * 1e6)
}
