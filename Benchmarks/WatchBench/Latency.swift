import ArchiveStore
import ArchiveWatch
import BenchSupport
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Workload 1: how long one change takes from another program's `close()` to
/// `store.changes`, with a watcher in this process (`debounce: .zero`).
///
/// One file at a time is written into STORE/Person/ (open, write, close); the next is written
/// once both the store and a plain inotify watch on the same directory (the baseline: its own
/// thread blocked in `read`) have delivered it. So every write is timed on both sides. The
/// target is measured from the return of `close()`. The kernel queues the event inside
/// `close()`, so the raw read often comes before `close()` returns: the comparison with the
/// baseline is therefore timed, on both sides, from the call of `close()`.
func latency(_ options: BenchOptions) throws -> [String] {
    let scratch = try ScratchDirectory(under: options.directory, name: "latency")
    let storePath = try scratch.sub("store")
    let store = try ArchiveStore(directory: storePath)
    try store.save(Person.sample(-1), forKey: "seed")  // makes STORE/Person/
    let collectionPath = storePath + "/" + ArchiveStore.collectionName(of: Person.self)
    let directory = try openDirectory(collectionPath)
    defer { close(directory) }

    let warmup = 20
    let total = warmup + options.writes
    let files = try Person.encoded(0..<total)

    let watcher = try store.startWatching(WatchOptions(debounce: .zero, rescanInterval: nil))
    defer {
        watcher.stop()
        _ = watcher.waitUntilStopped(timeout: .seconds(5))
    }
    let delivered = Arrivals()
    let changes = store.changes  // subscribed here, before the first write
    let consumer = Task { for await change in changes { delivered.record(change.id.key) } }
    defer { consumer.cancel() }
    let raw = try RawInotify(watching: collectionPath)
    defer { raw.stop() }

    var storeTimes: [Double] = []  // from the return of close(): the target's measure
    var storeFromCall: [Double] = []  // from the call of close(), as the baseline
    var rawFromCall: [Double] = []
    var closeTimes: [Double] = []
    var rawBeforeReturn = 0
    for n in 0..<total {
        let closed = try writeExternalFile(files[n], named: Person.file(n), in: directory)
        guard let rawAt = raw.arrivals.wait(for: Person.file(n), timeout: .seconds(10)) else {
            throw BenchError("the plain inotify watch did not report \(Person.file(n)) within 10 s")
        }
        guard let storeAt = delivered.wait(for: Person.key(n), timeout: .seconds(10)) else {
            throw BenchError("store.changes did not deliver Person/\(Person.key(n)) within 10 s (statistics: \(watcher.statistics))")
        }
        if n >= warmup {
            storeTimes.append((storeAt - closed.afterClose).seconds)
            storeFromCall.append((storeAt - closed.beforeClose).seconds)
            rawFromCall.append((rawAt - closed.beforeClose).seconds)
            closeTimes.append((closed.afterClose - closed.beforeClose).seconds)
            if rawAt < closed.afterClose { rawBeforeReturn += 1 }
        }
    }
    let stats = watcher.statistics
    let recorded = try store.keys(of: Person.self).count
    if recorded != total + 1 { throw BenchError("the store holds \(recorded) objects, not \(total + 1)") }

    let p50 = percentile(storeTimes, 0.5)
    let p99 = percentile(storeTimes, 0.99)
    let (callP50, callP99) = (percentile(storeFromCall, 0.5), percentile(storeFromCall, 0.99))
    let (rawP50, rawP99) = (percentile(rawFromCall, 0.5), percentile(rawFromCall, 0.99))
    func ms(_ seconds: Double) -> String { milliseconds(seconds, digits: 3) }
    return [
        "1. latency, close() -> store.changes, \(grouped(storeTimes.count)) writes: p50 \(ms(p50)), p99 \(ms(p99)) (target p99 < 50 ms) \(verdict(p99 < 0.05))",
        "   from the call of close(): plain inotify on the same writes p50 \(ms(rawP50)), p99 \(ms(rawP99)); store.changes p50 \(ms(callP50)), p99 \(ms(callP99));"
            + " ratio \(ratio(callP50 / rawP50)) at p50, \(ratio(callP99 / rawP99)) at p99: the watcher adds \(ms(callP50 - rawP50)) and \(ms(callP99 - rawP99))",
        "   the raw event was read before close() returned in \(rawBeforeReturn) of \(grouped(storeTimes.count)) writes (close() p50 \(ms(percentile(closeTimes, 0.5))));"
            + " store max \(ms(storeTimes.max()!)); \(warmup) warm-up writes not counted;"
            + " watcher: \(stats.events) events, \(stats.batches) batches, \(stats.overflows) overflows, \(stats.fullScans) full scans",
    ]
}

/// When each name arrived, for a thread that waits for one.
final class Arrivals: @unchecked Sendable {
    private let condition = NSCondition()
    private var times: [String: ContinuousClock.Instant] = [:]

    /// Records the first arrival of `name`.
    func record(_ name: String, at instant: ContinuousClock.Instant = .now) {
        condition.lock()
        if times[name] == nil { times[name] = instant }
        condition.broadcast()
        condition.unlock()
    }

    /// When `name` arrived, waiting for it up to `timeout`; nil if it did not.
    func wait(for name: String, timeout: Duration) -> ContinuousClock.Instant? {
        let limit = Date(timeIntervalSinceNow: timeout.seconds)
        condition.lock()
        defer { condition.unlock() }
        while times[name] == nil {
            if !condition.wait(until: limit) { break }
        }
        return times[name]
    }
}

/// The baseline: a plain inotify watch (`IN_CLOSE_WRITE`) on one directory, with its own thread
/// blocked in `read`, which records the time each file's event is read.
final class RawInotify: @unchecked Sendable {
    let arrivals = Arrivals()
    private let fd: Int32
    private let wd: Int32
    private let stopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    init(watching directory: String) throws {
        fd = inotify_init1(Int32(IN_CLOEXEC))
        if fd < 0 { throw BenchError("inotify_init1: \(String(cString: strerror(errno)))") }
        wd = inotify_add_watch(fd, directory, UInt32(IN_CLOSE_WRITE))
        if wd < 0 {
            let code = errno
            close(fd)
            throw BenchError("inotify_add_watch \(directory): \(String(cString: strerror(code)))")
        }
        let thread = Thread { [self] in run() }
        thread.name = "raw inotify"
        thread.start()
    }

    private func run() {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while !stopping.load(ordering: .acquiring) {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            let now = ContinuousClock.now
            if count <= 0 {
                if count < 0 && errno == EINTR { continue }
                break
            }
            buffer.withUnsafeBytes { bytes in
                var offset = 0
                // struct inotify_event { int wd; uint32_t mask, cookie, len; char name[len]; }
                while offset + 16 <= count {
                    let length = Int(bytes.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                    let name = bytes[(offset + 16)..<(offset + 16 + length)].prefix { $0 != 0 }
                    if !name.isEmpty { arrivals.record(String(decoding: name, as: UTF8.self), at: now) }
                    offset += 16 + length
                }
            }
        }
        finished.signal()
    }

    /// Stops the thread (removing the watch queues `IN_IGNORED`, which wakes its `read`).
    func stop() {
        stopping.store(true, ordering: .releasing)
        inotify_rm_watch(fd, wd)
        finished.wait()
        close(fd)
    }
}
