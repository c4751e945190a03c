import ArchiveProcess
import ArchiveStore
import BenchSupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

// The floors under benchmark 1's latency, measured in the same run: what no live session can
// do faster than, whatever its design (Benchmarks/README.md compares the latencies with them).

extension Bench {
    /// Medians (and p99) of: one byte to `cat` on the far side through ssh and back (the round
    /// trip every request pays), one durable save into a store (what landing an object on B
    /// pays, at least: one flushed commit), and an external write until inotify reports it.
    func floors() throws -> String {
        let count = quick ? 100 : 300
        let trip = try sshRoundTrips(count)
        let store = try ArchiveStore(directory: try scratch.sub("floor-store"))
        var saves: [Double] = []
        for n in 0..<count {
            let start = ContinuousClock.now
            try store.save(Blob(n), forKey: "floor\(n)", in: Blob.collection)
            saves.append((ContinuousClock.now - start).seconds)
        }
        let directory = try scratch.sub("floor-inotify")
        let arrivals = try Arrivals(watching: directory)
        defer { arrivals.stop() }
        let payload = try JSONEncoder().encode(Blob(0))
        var deliveries: [Double] = []
        for n in 0..<count {
            let name = "f\(n).json"
            let start = ContinuousClock.now
            try writeExternally(payload, named: name, in: directory)
            while arrivals.time(of: name) == nil { usleep(50) }
            deliveries.append((arrivals.time(of: name)! - start).seconds)
        }
        func figure(_ values: [Double]) -> String {
            String(format: "%.2f ms (p99 %.2f)", percentile(values, 50) * 1000, percentile(values, 99) * 1000)
        }
        return
            "1. floors, median of \(count): ssh round trip (a byte to `cat` and back) \(figure(trip)); a durable save of one object \(figure(saves)); an external write until inotify reports it (from the write's start, the rename included) \(figure(deliveries))"
    }

    /// `count` round trips of one byte through `ssh root@127.0.0.1 cat`, in seconds.
    private func sshRoundTrips(_ count: Int) throws -> [Double] {
        let words = sshd.rsh.split(separator: " ").map(String.init)
        let ssh = try ChildProcess(words[0], Array(words.dropFirst()) + ["root@127.0.0.1", "cat"], stdin: .pipe, stdout: .pipe, stderr: .null)
        defer {
            ssh.closeStandardInput()
            _ = ssh.wait(timeout: .seconds(5)) ?? ssh.kill()
        }
        guard let input = ssh.standardInput, let output = ssh.standardOutput else { throw BenchError("no pipes to ssh") }
        var times: [Double] = []
        var byte: UInt8 = 65
        for n in 0..<count + 10 {
            let start = ContinuousClock.now
            guard write(input, &byte, 1) == 1, read(output, &byte, 1) == 1 else {
                throw BenchError("ssh to cat: \(String(cString: strerror(errno)))")
            }
            if n >= 10 { times.append((ContinuousClock.now - start).seconds) }
        }
        return times
    }
}
