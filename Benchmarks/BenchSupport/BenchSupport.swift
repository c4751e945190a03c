// What archive-bench and watch-bench share: the model they write, timing, formatting, scratch
// directories and the description of the machine.

import ArchiveStore
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The model every workload saves or writes: a small Codable struct of about 200 bytes of JSON.
public struct Person: Codable, Sendable, Equatable {
    public var id: Int
    public var name: String
    public var email: String
    public var age: Int
    public var tags: [String]
    public var score: Double
    public var joined: Date

    public static func sample(_ n: Int) -> Person {
        Person(
            id: n, name: "Person Number \(n)", email: "person.number\(n)@example.com", age: 18 + n % 70,
            tags: ["customer", "newsletter", "region-\(n % 17)", "tier-\(n % 3)", "since-\(2015 + n % 10)"],
            score: Double(n % 1000) / 8, joined: Date(timeIntervalSince1970: 1_700_000_000 + Double(n) * 37.25))
    }

    public static func key(_ n: Int) -> String { "person\(n)" }
    public static func file(_ n: Int) -> String { "person\(n).json" }

    /// The JSON of objects `range`, encoded up front so that no timed loop encodes.
    public static func encoded(_ range: Range<Int>) throws -> [[UInt8]] {
        let encoder = JSONEncoder()
        return try range.map { Array(try encoder.encode(sample($0))) }
    }
}

/// How many batches ``buildLargeStore(at:count:)`` saves in.
public let largeStoreBatches = 10

/// Makes a store of about `count` people at `path`, saved in ``largeStoreBatches`` batches
/// (fast: one barrier each). Returns how many it saved: a multiple of the batch count.
@discardableResult
public func buildLargeStore(at path: String, count: Int) throws -> Int {
    let store = try ArchiveStore(directory: path)
    let perBatch = count / largeStoreBatches
    for batch in 0..<largeStoreBatches {
        try store.batch { tx in
            for n in batch * perBatch..<(batch + 1) * perBatch { try tx.save(Person.sample(n), forKey: Person.key(n)) }
        }
    }
    return perBatch * largeStoreBatches
}

public struct BenchError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

// MARK: - Timing

/// Seconds taken by `body`, by the monotonic clock.
public func seconds(_ body: () throws -> Void) rethrows -> Double {
    let start = ContinuousClock.now
    try body()
    return (ContinuousClock.now - start).seconds
}

extension Duration {
    public var seconds: Double { Double(components.seconds) + Double(components.attoseconds) * 1e-18 }
}

public func median(_ values: [Double]) -> Double {
    precondition(!values.isEmpty)
    let sorted = values.sorted()
    let middle = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

/// The nearest-rank percentile `p` (0...1) of `values`.
public func percentile(_ values: [Double], _ p: Double) -> Double {
    precondition(!values.isEmpty)
    let sorted = values.sorted()
    let rank = Int((p * Double(sorted.count)).rounded(.up))
    return sorted[min(max(rank, 1), sorted.count) - 1]
}

// MARK: - Formatting

/// 12345.6 → "12,346".
public func grouped(_ value: Double) -> String {
    let digits = String(Int(value.rounded()))
    var out = ""
    for (offset, character) in digits.reversed().enumerated() {
        if offset > 0, offset % 3 == 0, character != "-" { out.append(",") }
        out.append(character)
    }
    return String(out.reversed())
}

public func grouped(_ value: Int) -> String { grouped(Double(value)) }
public func perSecond(_ count: Int, _ seconds: Double) -> String { "\(grouped(Double(count) / seconds))/s" }
public func milliseconds(_ seconds: Double) -> String { milliseconds(seconds, digits: 1) }
public func milliseconds(_ seconds: Double, digits: Int) -> String { String(format: "%.\(digits)f ms", seconds * 1000) }
public func megabytes(kilobytes: Int) -> String { String(format: "%.1f MB", Double(kilobytes) / 1024) }
public func ratio(_ value: Double) -> String { String(format: "%.2fx", value) }
public func verdict(_ pass: Bool) -> String { pass ? "PASS" : "FAIL" }

// MARK: - Directories

/// A fresh directory under the base directory, named after the running benchmark.
///
/// Nothing is removed until the whole run ends (main removes the run's root): on ext4 without
/// a journal, as here, making a file right after many were deleted is slow for minutes (the
/// inode allocator skips recently freed inodes), which would skew the workloads that follow.
public struct ScratchDirectory {
    public let path: String

    public init(under base: String, name: String) throws {
        var template = Array("\(base)/\(ProcessInfo.processInfo.processName)-\(name).XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw BenchError("cannot make a temporary directory under \(base): \(String(cString: strerror(errno)))")
        }
        path = String(cString: made)
    }

    public func sub(_ name: String) throws -> String {
        let sub = path + "/" + name
        try FileManager.default.createDirectory(atPath: sub, withIntermediateDirectories: true)
        return sub
    }

    public func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// Microseconds to create one empty file (no fsync), from 1,000 files made in a new directory
/// under `base`. About 10-20 us normally; far more for a few minutes after mass deletions.
public func fileCreationCost(under base: String) throws -> Double {
    let directory = try ScratchDirectory(under: base, name: "probe")
    let fd = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    defer { close(fd) }
    let count = 1000
    let elapsed = try seconds {
        for n in 0..<count {
            let file = openat(fd, "f\(n)", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
            if file < 0 { throw BenchError("cannot create a file in \(directory.path): \(String(cString: strerror(errno)))") }
            close(file)
        }
    }
    return elapsed / Double(count) * 1e6
}

/// Waits until making a file costs `normal` microseconds or less (``fileCreationCost(under:)``,
/// every 10 s, for at most `limit`), so that a workload that makes a file per object is not
/// timed in the slow spell after mass deletions. Both tools pay that spell per file, which
/// pulls ratios toward 1.0x and swings them from run to run. Returns the last cost measured.
public func fileCreationCostOnceNormal(under base: String, normal: Double = 50, limit: Duration = .seconds(180)) throws -> Double {
    let deadline = ContinuousClock.now + limit
    var cost = try fileCreationCost(under: base)
    while cost > normal, ContinuousClock.now < deadline {
        Thread.sleep(forTimeInterval: 10)
        cost = try fileCreationCost(under: base)
    }
    return cost
}

// MARK: - The machine

/// The first line a benchmark prints: the program, `--quick` when given, the date and the
/// machine (``machineDescription(directory:)`` of `directory`).
public func runHeading(_ program: String, quick: Bool, directory: String) -> String {
    "\(program) \(quick ? "--quick " : "")on \(Date.now.formatted(.iso8601.year().month().day())): \(machineDescription(directory: directory))"
}

/// One line naming the machine: cores, memory, kernel and the file system of `directory`.
public func machineDescription(directory: String) -> String {
    let info = ProcessInfo.processInfo
    let gib = Double(info.physicalMemory) / Double(1 << 30)
    var names = utsname()
    uname(&names)
    let release = withUnsafeBytes(of: names.release) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
    return
        "nproc \(info.activeProcessorCount), \(String(format: "%.0f", gib)) GiB, Linux \(release), \(directory) on \(fileSystemType(of: directory))"
}

/// The type of the file system mounted at the longest mount point above `path` (/proc/self/mounts).
private func fileSystemType(of path: String) -> String {
    let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
    guard let mounts = try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8) else { return "an unknown file system" }
    var best: (mountPoint: String, type: String)?
    for line in mounts.split(separator: "\n") {
        let fields = line.split(separator: " ")
        guard fields.count >= 3 else { continue }
        let mountPoint = String(fields[1])
        let inside = mountPoint == "/" || resolved == mountPoint || resolved.hasPrefix(mountPoint + "/")
        if inside, mountPoint.count >= (best?.mountPoint.count ?? 0) { best = (mountPoint, String(fields[2])) }
    }
    return best.map { "\($0.type) (mounted at \($0.mountPoint))" } ?? "an unknown file system"
}
