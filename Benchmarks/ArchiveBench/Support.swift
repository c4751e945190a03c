import ArchiveStore
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The model every workload saves: a small Codable struct of about 200 bytes of JSON.
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
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
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

func median(_ values: [Double]) -> Double {
    precondition(!values.isEmpty)
    let sorted = values.sorted()
    let middle = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
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

func perSecond(_ count: Int, _ seconds: Double) -> String { "\(grouped(Double(count) / seconds))/s" }
func milliseconds(_ seconds: Double) -> String { String(format: "%.1f ms", seconds * 1000) }
func ratio(_ value: Double) -> String { String(format: "%.2fx", value) }
func verdict(_ pass: Bool) -> String { pass ? "PASS" : "FAIL" }

// MARK: - Directories

/// A fresh directory under the base directory.
///
/// Nothing is removed until the whole run ends (main removes the run's root): on ext4 without
/// a journal, as here, making a file right after many were deleted is slow for minutes (the
/// inode allocator skips recently freed inodes), which would skew the workloads that follow.
struct ScratchDirectory {
    let path: String

    init(under base: String, name: String) throws {
        var template = Array("\(base)/archive-bench-\(name).XXXXXX".utf8CString)
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

// MARK: - Child processes

/// Runs `executable` with `arguments` and captures what it prints (stdout and stderr). Not for
/// timing: Foundation's `waitUntilExit` polls in 50 ms steps.
func runCapturing(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    try process.run()
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: output, as: UTF8.self))
}

/// Runs `executable` with `arguments`, its output sent to /dev/null, and times it from spawn
/// to exit with `posix_spawn` and `waitpid`. Returns the exit status (128+N for signal N).
func runTimed(_ executable: String, _ arguments: [String]) throws -> (status: Int32, seconds: Double) {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    let start = ContinuousClock.now
    let rc = posix_spawn(&pid, executable, &actions, nil, argv, environ)
    if rc != 0 { throw BenchError("cannot start \(executable): \(String(cString: strerror(rc)))") }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 {
        if errno != EINTR { throw BenchError("waitpid: \(String(cString: strerror(errno)))") }
    }
    let elapsed = (ContinuousClock.now - start).seconds
    let exited = status & 0x7F == 0
    return (exited ? (status >> 8) & 0xFF : 128 + (status & 0x7F), elapsed)
}

/// The absolute path of `name` found on `PATH`, or nil.
func findOnPath(_ name: String) -> String? {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
    for directory in path.split(separator: ":") {
        let candidate = "\(directory)/\(name)"
        if access(candidate, X_OK) == 0 { return candidate }
    }
    return nil
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
        "\(info.activeProcessorCount) cores, \(String(format: "%.0f", gib)) GiB, Linux \(release), \(directory) on \(fileSystemType(of: directory))"
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
