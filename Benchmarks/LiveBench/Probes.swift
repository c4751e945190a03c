import BenchSupport
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

// What live-bench observes from the outside: files arriving in a directory (inotify), a
// process's CPU time and peak memory (/proc), and the bytes of one TCP connection (ss).

/// The first time each file name appears in a directory (created, or renamed into it), from a
/// thread of its own blocked on inotify: when a sync landed an object there.
final class Arrivals: @unchecked Sendable {
    private let fd: Int32
    private let state = Mutex<[String: ContinuousClock.Instant]>([:])
    private let stopped = Atomic<Bool>(false)
    private var thread: Thread?

    init(watching directory: String) throws {
        fd = inotify_init1(Int32(IN_CLOEXEC))
        guard fd >= 0, inotify_add_watch(fd, directory, UInt32(IN_MOVED_TO | IN_CLOSE_WRITE)) >= 0 else {
            throw BenchError("cannot watch \(directory) with inotify: \(String(cString: strerror(errno)))")
        }
        let thread = Thread { [self] in readEvents() }
        thread.stackSize = 1 << 20
        self.thread = thread
        thread.start()
    }

    private func readEvents() {
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while !stopped.load(ordering: .relaxed) {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) == 1 else { continue }
            let count = read(fd, &buffer, buffer.count)
            guard count > 0 else { continue }
            let now = ContinuousClock.now
            var names: [String] = []
            var offset = 0
            buffer.withUnsafeBytes { raw in
                while offset + MemoryLayout<inotify_event>.size <= count {
                    let length = Int(raw.load(fromByteOffset: offset + 12, as: UInt32.self))
                    let start = offset + MemoryLayout<inotify_event>.size
                    if length > 0 {
                        let bytes = raw[start..<start + length].prefix { $0 != 0 }
                        names.append(String(decoding: bytes, as: UTF8.self))
                    }
                    offset = start + length
                }
            }
            state.withLock { seen in
                for name in names where seen[name] == nil { seen[name] = now }
            }
        }
    }

    /// When `name` first appeared, if it has.
    func time(of name: String) -> ContinuousClock.Instant? { state.withLock { $0[name] } }

    /// How many of `names` have appeared.
    func count(of names: [String]) -> Int { state.withLock { seen in names.count { seen[$0] != nil } } }

    func stop() {
        stopped.store(true, ordering: .relaxed)
        while thread?.isFinished == false { usleep(10_000) }
        close(fd)
    }
}

/// A process's user + system CPU time in seconds (/proc/PID/stat), nil once it is gone.
func cpuSeconds(_ pid: Int32) -> Double? {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return nil }
    let fields = stat[stat.index(close, offsetBy: 2)...].split(separator: " ")
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// A process's peak resident memory (VmHWM) in kilobytes.
func peakKilobytes(_ pid: Int32) -> Int { (try? procStatus(pid)["VmHWM"]) ?? 0 }

/// The pids of the processes whose command line holds every one of `words`.
func processes(with words: [String]) -> [Int32] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap { Int32($0) }.filter { pid in
        guard pid != getpid(), let raw = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return false }
        let line = String(decoding: raw.map { $0 == 0 ? 32 : $0 }, as: UTF8.self)
        return words.allSatisfy { line.contains($0) }
    }
}

/// The TCP payload bytes sent and received so far by the connections to 127.0.0.1:`port`
/// (their client ends: what crosses the wire once each way), from `ss -ti`.
func connectionBytes(toPort port: Int) -> (sent: Int, received: Int) {
    guard let ss = findOnPath("ss"), let result = try? runCapturing(ss, ["-tinH", "state", "established", "dst", "127.0.0.1:\(port)"]) else {
        return (0, 0)
    }
    func total(_ key: String) -> Int {
        result.output.split(whereSeparator: \.isWhitespace).reduce(0) { sum, word in
            word.hasPrefix(key + ":") ? sum + (Int(word.dropFirst(key.count + 1)) ?? 0) : sum
        }
    }
    return (total("bytes_sent"), total("bytes_received"))
}

/// Writes `data` into `directory/name` as another program would: a temp file renamed over it.
func writeExternally(_ data: Data, named name: String, in directory: String) throws {
    let temporary = directory + "/." + name + ".tmp"
    guard FileManager.default.createFile(atPath: temporary, contents: data) else { throw BenchError("cannot write \(temporary)") }
    guard rename(temporary, directory + "/" + name) == 0 else { throw BenchError("cannot rename \(temporary): \(String(cString: strerror(errno)))") }
}

/// The `p`-th percentile (0-100) of `values`, by nearest rank.
func percentile(_ values: [Double], _ p: Double) -> Double {
    precondition(!values.isEmpty)
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, max(0, Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1))]
}
