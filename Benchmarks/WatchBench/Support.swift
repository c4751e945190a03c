import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The model the other programs write: the same small Codable struct as archive-bench's.
struct Person: Codable, Sendable, Equatable {
    var id: Int
    var name: String
    var email: String
    var age: Int
    var tags: [String]
    var score: Double
    var joined: Date

    static func sample(_ n: Int) -> Person {
        Person(
            id: n, name: "Person Number \(n)", email: "person.number\(n)@example.com", age: 18 + n % 70,
            tags: ["customer", "newsletter", "region-\(n % 17)", "tier-\(n % 3)", "since-\(2015 + n % 10)"],
            score: Double(n % 1000) / 8, joined: Date(timeIntervalSince1970: 1_700_000_000 + Double(n) * 37.25))
    }

    static func key(_ n: Int) -> String { "person\(n)" }
    static func file(_ n: Int) -> String { "person\(n).json" }

    /// The JSON of objects `range`, encoded up front so that no timed loop encodes.
    static func encoded(_ range: Range<Int>) throws -> [[UInt8]] {
        let encoder = JSONEncoder()
        return try range.map { Array(try encoder.encode(sample($0))) }
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Writes `bytes` to a new file `name` in the directory `directory` as another program would:
/// open, write, close (no fsync, no rename), as `echo {...} > Person/x.json` does.
/// - Returns: the times right before and right after `close()`, which queues the inotify event.
@discardableResult
func writeExternalFile(_ bytes: [UInt8], named name: String, in directory: Int32) throws -> (
    beforeClose: ContinuousClock.Instant, afterClose: ContinuousClock.Instant
) {
    let fd = openat(directory, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    if fd < 0 { throw BenchError("open \(name): \(String(cString: strerror(errno)))") }
    let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    let code = errno
    let beforeClose = ContinuousClock.now
    close(fd)
    let afterClose = ContinuousClock.now
    if written != bytes.count { throw BenchError("write \(name): \(String(cString: strerror(code)))") }
    return (beforeClose, afterClose)
}

/// Opens a directory for `writeExternalFile`.
func openDirectory(_ path: String) throws -> Int32 {
    let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    if fd < 0 { throw BenchError("open \(path): \(String(cString: strerror(errno)))") }
    return fd
}

// MARK: - Timing

/// Seconds taken by `body`, by the monotonic clock.
func seconds(_ body: () throws -> Void) rethrows -> Double {
    let start = ContinuousClock.now
    try body()
    return (ContinuousClock.now - start).seconds
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) * 1e-18 }
}

/// The nearest-rank percentile `p` (0...1) of `values`.
func percentile(_ values: [Double], _ p: Double) -> Double {
    precondition(!values.isEmpty)
    let sorted = values.sorted()
    let rank = Int((p * Double(sorted.count)).rounded(.up))
    return sorted[min(max(rank, 1), sorted.count) - 1]
}

// MARK: - Formatting

/// 12345.6 → "12,346".
func grouped(_ value: Double) -> String {
    let digits = String(Int(value.rounded()))
    var out = ""
    for (offset, character) in digits.reversed().enumerated() {
        if offset > 0, offset % 3 == 0, character != "-" { out.append(",") }
        out.append(character)
    }
    return String(out.reversed())
}

func grouped(_ value: Int) -> String { grouped(Double(value)) }
func milliseconds(_ seconds: Double, digits: Int = 1) -> String { String(format: "%.\(digits)f ms", seconds * 1000) }
func megabytes(kilobytes: Int) -> String { String(format: "%.1f MB", Double(kilobytes) / 1024) }
func ratio(_ value: Double) -> String { String(format: "%.2fx", value) }
func verdict(_ pass: Bool) -> String { pass ? "PASS" : "FAIL" }

// MARK: - Directories

/// A fresh directory under the base directory. Nothing is removed until the run ends (main
/// removes the run's root): see archive-bench's `ScratchDirectory` for why.
struct ScratchDirectory {
    let path: String

    init(under base: String, name: String) throws {
        var template = Array("\(base)/watch-bench-\(name).XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw BenchError("cannot make a temporary directory under \(base): \(String(cString: strerror(errno)))")
        }
        path = String(cString: made)
    }

    func sub(_ name: String) throws -> String {
        let sub = path + "/" + name
        try FileManager.default.createDirectory(atPath: sub, withIntermediateDirectories: true)
        return sub
    }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// Microseconds to create one empty file (no fsync), from 1,000 files made in a new directory
/// under `base`. About 10-20 us normally; far more for a few minutes after mass deletions.
func fileCreationCost(under base: String) throws -> Double {
    let directory = try ScratchDirectory(under: base, name: "probe")
    let fd = try openDirectory(directory.path)
    defer { close(fd) }
    let count = 1000
    let elapsed = try seconds {
        for n in 0..<count { try writeExternalFile([], named: "f\(n)", in: fd) }
    }
    return elapsed / Double(count) * 1e6
}

// MARK: - The machine

/// One line naming the machine: cores, memory, kernel and the file system of `directory`.
func machineDescription(directory: String) -> String {
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
