import ArchiveProcess
import BenchSupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

// The floors under workloads 2 and 3: what any tool that opens an ssh connection per run must
// pay, whatever its design, measured in the same run through the same sshd. The far side's
// part is this program itself, started over ssh with a hidden option (`--stat-floor DIR`,
// `--write-floor DIR`), so that the floor pays a process start there as archive-sync does.

/// Lists `directory` and `lstat`s every entry, on as many threads as there are cores (as the
/// store's scan does): the least a no-op must do on a side nobody watches, since an in-place
/// edit changes no directory's stamp. Returns how many entries it looked at.
func statEveryEntry(of directory: String) throws -> Int {
    guard let stream = opendir(directory) else { throw BenchError("cannot list \(directory): \(String(cString: strerror(errno)))") }
    defer { closedir(stream) }
    // Names in one buffer, NUL-terminated, with their offsets: no allocation per entry.
    var names: [CChar] = []
    var offsets: [Int] = []
    while let entry = readdir(stream) {
        withUnsafeBytes(of: entry.pointee.d_name) { raw in
            let name = raw.bindMemory(to: CChar.self)
            guard name[0] != 46 else { return }  // ".", ".." and hidden files
            offsets.append(names.count)
            var i = 0
            while name[i] != 0 {
                names.append(name[i])
                i += 1
            }
            names.append(0)
        }
    }
    guard !offsets.isEmpty else { return 0 }
    let fd = dirfd(stream)
    let starts = offsets
    let threads = max(1, ProcessInfo.processInfo.activeProcessorCount)
    let seen = LockedCount()
    names.withUnsafeBufferPointer { buffer in
        let base = UnsafeSendable(buffer.baseAddress!)
        DispatchQueue.concurrentPerform(iterations: threads) { part in
            var status = stat()
            var count = 0
            for index in stride(from: part, to: starts.count, by: threads)
            where fstatat(fd, base.value + starts[index], &status, AT_SYMLINK_NOFOLLOW) == 0 {
                count += 1
            }
            seen.add(count)
        }
    }
    return seen.total
}

/// Replaces each existing file `names` in `directory` with 512 new bytes, atomically (written
/// under a hidden name in the same directory, as rsync does, and renamed over the old file,
/// neither flushed: on this ext4 that costs 0.25-0.9x of making the file in a staging
/// directory beside, as the store does; Benchmarks/LOG.md), and makes them
/// durable the cheapest way a store can: their bytes also appended to one log, flushed once
/// (`fdatasync`), as the store's one manifest commit per page holds a page's bytes.
func writeFilesFlushedOnce(_ names: [String], into directory: String) throws {
    let bytes = [UInt8](repeating: 97, count: 512)
    let staging = directory + "/.floor-staging"
    guard mkdir(staging, 0o755) == 0 || errno == EEXIST else { throw BenchError("cannot make \(staging): \(String(cString: strerror(errno)))") }
    let log = open(staging + "/log", O_CREAT | O_WRONLY | O_APPEND, 0o644)
    guard log >= 0 else { throw BenchError("cannot create \(staging)/log: \(String(cString: strerror(errno)))") }
    defer { close(log) }
    for (n, name) in names.enumerated() {
        let temp = directory + "/.floor-\(n)"
        // Each one is a change: the file is there to be replaced.
        var status = stat()
        guard lstat(directory + "/" + name, &status) == 0 else { throw BenchError("no \(directory)/\(name) to replace") }
        let fd = open(temp, O_CREAT | O_EXCL | O_WRONLY, 0o644)
        guard fd >= 0, write(fd, bytes, bytes.count) == bytes.count, close(fd) == 0, rename(temp, directory + "/" + name) == 0,
            write(log, bytes, bytes.count) == bytes.count
        else {
            throw BenchError("cannot replace \(directory)/\(name): \(String(cString: strerror(errno)))")
        }
    }
    guard fdatasync(log) == 0 else { throw BenchError("fdatasync: \(String(cString: strerror(errno)))") }
}

/// A pointer that threads share for reading only.
private struct UnsafeSendable<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

/// A count that threads add to.
private final class LockedCount: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func add(_ count: Int) {
        lock.lock()
        value += count
        lock.unlock()
    }
    var total: Int {
        lock.lock()
        defer { lock.unlock() }
        return value
    }
}

/// This program's own path, to start it on the far side.
func ownExecutable() -> String {
    (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
}

extension RemoteBench {
    /// The hidden far-side modes: true when one ran (the program then exits).
    func runFarSidePart() throws -> Bool {
        if let directory = statFloor {
            print("\(try statEveryEntry(of: directory)) entries")
            return true
        }
        if let directory = writeFloor {
            // Told by this side when it knows what to send (`measureWriteFloor`).
            var go: UInt8 = 0
            guard read(0, &go, 1) == 1 else { throw BenchError("the write floor's far side was not told to start") }
            // Then the names of the files to replace, one per line, until this side closes.
            let names = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self).split(separator: "\n").map(String.init)
            try writeFilesFlushedOnce(names, into: directory)
            return true
        }
        return false
    }

    /// Workload 2's floor, in seconds: this side `lstat`s every file of `near` while the far
    /// side, started over `ssh`, does the same to `far`; both at once, as a sync's two scans.
    func measureStatFloor(ssh: [String], near: String, far: String) throws -> Double {
        let start = ContinuousClock.now
        let done = DispatchSemaphore(value: 0)
        let here = Thread {
            _ = try? statEveryEntry(of: near)
            done.signal()
        }
        here.start()
        let remote = try runTimed("/usr/bin/env", ssh + [ownExecutable(), "--stat-floor", far])
        done.wait()
        guard remote.status == 0 else { throw BenchError("the far side's stat floor failed with status \(remote.status)") }
        return (ContinuousClock.now - start).seconds
    }

    /// Workload 3's floor, in seconds: this side `lstat`s every file of `near` while ssh
    /// connects and the far side starts; once both are done, the far side replaces the files
    /// `names` in `directory` (rsync's copy of the store's 100,000 files), each written under a
    /// hidden name and renamed over its old self as any atomic write does, unflushed, and makes
    /// them durable with one flush of an appended log (`writeFilesFlushedOnce`): a durable
    /// atomic change of 1,000 existing files, with no manifest.
    /// The stat is in the floor because this side is not watched: finding which 1,000 of its
    /// files changed takes a look at each (rsync's pass does the same); it usually hides
    /// under the connection.
    func measureWriteFloor(ssh: [String], near: String, replacing names: [String], in directory: String) throws -> Double {
        let start = ContinuousClock.now
        let far = try ChildProcess("/usr/bin/env", ssh + [ownExecutable(), "--write-floor", directory], stdin: .pipe, stdout: .null, stderr: .null)
        _ = try statEveryEntry(of: near)
        let go: UInt8 = 1
        let message = [go] + Array(names.joined(separator: "\n").utf8)
        _ = message.withUnsafeBytes { write(far.standardInput!, $0.baseAddress, $0.count) }
        far.closeStandardInput()
        let status = far.waitUntilExit()
        guard status == 0 else { throw BenchError("the far side's write floor failed with status \(status)") }
        return (ContinuousClock.now - start).seconds
    }
}

extension RemoteBench {
    /// The floors beside the table: each against rsync's time, as the target is, and what
    /// archive-sync's time is of it (the issue asks for within 10% of a floor over a target).
    func reportFloors(
        connection: Double, noop: (floor: [Double], ours: [Double], rsync: [Double]), changed: (floor: [Double], ours: [Double], rsync: [Double])
    ) {
        if !noop.floor.isEmpty, !noop.ours.isEmpty {
            let floor = max(0, median(noop.floor) - connection)
            let ours = max(0, median(noop.ours) - connection)
            print(
                "floor of 2 (every file stat'ed on both sides at once, the far side's through ssh, a process start included): \(milliseconds(median(noop.floor))), \(milliseconds(floor)) beyond ssh's connection, \(ratio(floor / median(noop.rsync))) of rsync's no-op; the scanned no-op takes \(ratio(ours / max(floor, 1e-6))) of it beyond ssh (within 10%: \(verdict(ours <= floor * 1.1)))"
            )
        }
        if !changed.floor.isEmpty, !changed.ours.isEmpty {
            let floor = median(changed.floor)
            print(
                "floor of 3 (ssh's connection, with this side's files stat'ed meanwhile, then 1,000 of the far side's 100,000 files replaced (each written under a hidden name beside it and renamed over it) and flushed once): \(milliseconds(floor)), \(ratio(floor / median(changed.rsync))) of rsync's; 1,000 changed takes \(ratio(median(changed.ours) / floor)) of it (within 10%: \(verdict(median(changed.ours) <= floor * 1.1)))"
            )
        }
    }
}
