// remote-bench: `archive-sync sync ./a root@127.0.0.1:b` over ssh against `rsync -a -e ssh` on
// the same files in the same run, as ratios, through an sshd of its own on 127.0.0.1.
// See Benchmarks/README.md.
// Usage: remote-bench [--quick] [--runs N] [--dir PATH] [--cli PATH]

import ArchiveStore
import BenchSupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

let usage = """
    usage: remote-bench [--quick] [--runs N] [--dir PATH] [--cli PATH]

      --quick        10,000 objects instead of 100,000
      --runs N       repetitions of each workload (default 3); medians are reported
      --dir PATH     where the stores go (default /tmp); removed afterwards
      --cli PATH     the archive-sync binary (default: next to remote-bench)

    Workloads, each against rsync -a -e ssh on the same files: 1 first sync of N objects of
    512 bytes into an empty store, 2 no-op sync of the same, 3 1,000 objects changed.
    """

var count = 100_000
var runs = 3
var base = "/tmp"
var cliOption: String?
var quick = false
nonisolated(unsafe) var arguments = CommandLine.arguments.dropFirst()
func value(_ flag: String) -> String {
    guard let next = arguments.popFirst() else {
        FileHandle.standardError.write(Data("remote-bench: \(flag) needs a value\n\n\(usage)\n".utf8))
        exit(2)
    }
    return next
}
while let argument = arguments.popFirst() {
    switch argument {
    case "--quick": quick = true
    case "--runs": runs = max(1, Int(value(argument)) ?? 3)
    case "--dir": base = value(argument)
    case "--cli": cliOption = value(argument)
    case "-h", "--help":
        print(usage)
        exit(0)
    default:
        FileHandle.standardError.write(Data("remote-bench: unknown argument '\(argument)'\n\n\(usage)\n".utf8))
        exit(2)
    }
}
if quick { count /= 10 }

/// One object of exactly 512 bytes of JSON, as the issue's workload names.
struct Blob: Codable {
    var n: Int
    var pad: String

    init(_ n: Int, fill: Character = "x") {
        self.n = n
        pad = String(repeating: fill, count: 512 - 15 - String(n).count)
    }
}

/// An sshd of the benchmark's own on 127.0.0.1, spawned with posix_spawn and stopped by its pid.
final class SSHD {
    let directory: String
    let port: Int
    private var pid: pid_t = 0

    var rsh: String {
        "ssh -p \(port) -i \(directory)/user_key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR"
    }

    init(in directory: String) throws {
        self.directory = directory
        let sshd = "/usr/sbin/sshd"
        guard access(sshd, X_OK) == 0, let keygen = findOnPath("ssh-keygen") else {
            throw BenchError("openssh-server is needed (`make bench` installs it)")
        }
        try FileManager.default.createDirectory(atPath: "/run/sshd", withIntermediateDirectories: true)
        for key in ["host_key", "user_key"] {
            guard try runCapturing(keygen, ["-q", "-t", "ed25519", "-N", "", "-f", "\(directory)/\(key)"]).status == 0 else {
                throw BenchError("ssh-keygen failed")
            }
        }
        try FileManager.default.copyItem(atPath: "\(directory)/user_key.pub", toPath: "\(directory)/authorized_keys")
        port = 20_000 + Int(getpid() % 20_000)
        try """
        Port \(port)
        ListenAddress 127.0.0.1
        HostKey \(directory)/host_key
        AuthorizedKeysFile \(directory)/authorized_keys
        PermitRootLogin prohibit-password
        PasswordAuthentication no
        StrictModes no
        UsePAM no
        PidFile \(directory)/sshd.pid
        """.write(toFile: "\(directory)/sshd_config", atomically: true, encoding: .utf8)
        let words: [String] = [sshd, "-D", "-f", "\(directory)/sshd_config", "-E", "\(directory)/sshd.log"]
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        guard posix_spawn(&pid, sshd, &actions, nil, argv, environ) == 0 else { throw BenchError("cannot start sshd") }
        for _ in 0..<500 {
            if try runCapturing("/usr/bin/env", rsh.split(separator: " ").map(String.init) + ["root@127.0.0.1", "true"]).status == 0 { return }
            usleep(20_000)
        }
        stop()
        throw BenchError("sshd did not come up on 127.0.0.1:\(port); see \(directory)/sshd.log")
    }

    func stop() {
        guard pid > 0 else { return }
        kill(pid, SIGTERM)
        waitpid(pid, nil, 0)
        pid = 0
    }
}

func timed(_ what: String, _ executable: String, _ arguments: [String]) throws -> Double {
    let result = try runTimed(executable, arguments)
    guard result.status == 0 else {
        throw BenchError("\(what) failed with status \(result.status): \(executable) \(arguments.joined(separator: " "))")
    }
    return result.seconds
}

let cli =
    cliOption
    ?? URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("archive-sync").path
guard access(cli, X_OK) == 0, let rsync = findOnPath("rsync") else {
    print("remote-bench: ERROR: needs archive-sync at \(cli) (or --cli PATH) and rsync on PATH; `make bench` builds and installs them")
    exit(1)
}

let scratch: ScratchDirectory
do { scratch = try ScratchDirectory(under: base, name: "run") } catch {
    print("remote-bench: ERROR: \(error)")
    exit(1)
}
defer { scratch.remove() }

do {
    let sshd = try SSHD(in: try scratch.sub("sshd"))
    defer { sshd.stop() }
    let remote = ["--rsh", sshd.rsh, "--remote-cmd", cli]
    let rsyncSSH = ["-a", "-e", sshd.rsh]
    print(
        "remote-bench \(quick ? "--quick " : "")on \(Date.now.formatted(.iso8601.year().month().day())): \(machineDescription(directory: base))"
    )
    print("\(grouped(count)) objects of 512 bytes of JSON over ssh to 127.0.0.1; \(runs) runs, medians")
    print()

    let a = scratch.path + "/a"
    let store = try ArchiveStore(directory: a)
    for part in 0..<10 {
        try store.batch { tx in
            for i in part * count / 10..<(part + 1) * count / 10 { try tx.save(Blob(i), forKey: "item\(i)", in: "Item") }
        }
    }
    // Settled: files older than the window in which a scan re-hashes them.
    sleep(3)
    _ = try store.scan()

    // rsync copies the objects' directory, as sync-bench does: the same files, without the manifest.
    let source = a + "/Item/"
    let ssh = sshd.rsh.split(separator: " ").map(String.init) + ["root@127.0.0.1", "true"]
    var first: [(Double, Double)] = []
    var noop: [(Double, Double)] = []
    var changed: [(Double, Double)] = []
    var connection: [Double] = []
    // For reference, not the targets: `rsync --fsync`, which flushes each file it writes.
    let durableRsync = rsyncHasFsync(rsync)
    var firstFlushed: [Double] = []
    var changedFlushed: [Double] = []
    var lastB = ""
    var lastR = ""
    for run in 0..<runs {
        let b = scratch.path + "/b\(run)"
        _ = try ArchiveStore(directory: b)
        let r = try scratch.sub("r\(run)")
        (lastB, lastR) = (b, r)
        let rf = try scratch.sub("rf\(run)")
        let creation = try fileCreationCostOnceNormal(under: scratch.path)
        // Each timed step: the order turns each run, so that neither tool always goes first.
        func inTurn(_ steps: [() throws -> Void]) throws {
            for step in run % 2 == 0 ? steps : steps.reversed() { try step() }
        }
        var (sync, copy) = (0.0, 0.0)
        try inTurn([
            { sync = try timed("first sync", cli, ["sync", a, "root@127.0.0.1:" + b] + remote) },
            { copy = try timed("first rsync", rsync, rsyncSSH + [source, "root@127.0.0.1:" + r + "/"]) },
            {
                guard durableRsync else { return }
                firstFlushed.append(try timed("first rsync --fsync", rsync, rsyncSSH + ["--fsync", source, "root@127.0.0.1:" + rf + "/"]))
            },
        ])
        first.append((sync, copy))
        // B's files settle too. The first scan after that re-hashes the files the sync wrote
        // (their stamps were recorded within the window in which a stamp cannot be trusted), once;
        // rsync gets an untimed no-op pass as well.
        sleep(3)
        let settling = try timed("settling sync", cli, ["sync", a, "root@127.0.0.1:" + b] + remote)
        let settlingCopy = try timed("settling rsync", rsync, rsyncSSH + [source, "root@127.0.0.1:" + r + "/"])
        connection.append(try timed("ssh alone", "/usr/bin/env", ssh))
        noop.append(
            (
                try timed("no-op sync", cli, ["sync", a, "root@127.0.0.1:" + b] + remote),
                try timed("no-op rsync", rsync, rsyncSSH + [source, "root@127.0.0.1:" + r + "/"])
            ))
        let fill = Character(UnicodeScalar(UInt8(ascii: "a") + UInt8(run % 26)))
        try store.batch { tx in
            for i in stride(from: run, to: count, by: count / 1_000) { try tx.save(Blob(i, fill: fill), forKey: "item\(i)", in: "Item") }
        }
        var (changedSync, changedCopy) = (0.0, 0.0)
        try inTurn([
            { changedSync = try timed("sync of 1,000 changes", cli, ["sync", a, "root@127.0.0.1:" + b] + remote) },
            { changedCopy = try timed("rsync of 1,000 changes", rsync, rsyncSSH + [source, "root@127.0.0.1:" + r + "/"]) },
            {
                guard durableRsync else { return }
                changedFlushed.append(
                    try timed("rsync --fsync of 1,000 changes", rsync, rsyncSSH + ["--fsync", source, "root@127.0.0.1:" + rf + "/"]))
            },
        ])
        changed.append((changedSync, changedCopy))
        // Each run's stores are left in place until the end (see ScratchDirectory).
        print(
            "run \(run + 1): first \(milliseconds(sync)) vs \(milliseconds(copy)); first no-op (settling, not in the table) \(milliseconds(settling)) vs \(milliseconds(settlingCopy)); no-op \(milliseconds(noop.last!.0)) vs \(milliseconds(noop.last!.1)); 1,000 changed \(milliseconds(changed.last!.0)) vs \(milliseconds(changed.last!.1)); ssh alone \(milliseconds(connection.last!)); \(Int(creation)) us to create a file before it\(durableRsync ? "; rsync --fsync: first \(milliseconds(firstFlushed.last!)), 1,000 changed \(milliseconds(changedFlushed.last!))" : "")"
        )
        fflush(nil)
    }
    // The no-op again with both stores watched (the far one by a watcher on its host): neither
    // side scans, so what is left is ssh's connection and the exchange of two sequence numbers.
    let watchers = try [a, lastB].map { try startWatcher(cli: cli, store: $0) }
    defer {
        for watcher in watchers {
            watcher.terminate()
            watcher.waitUntilExit()
        }
    }
    try waitUntilCurrent(cli: cli, stores: [a, lastB])
    var watched: [(Double, Double)] = []
    for _ in 0..<runs {
        watched.append(
            (
                try timed("watched no-op sync", cli, ["sync", a, "root@127.0.0.1:" + lastB] + remote),
                try timed("no-op rsync", rsync, rsyncSSH + [source, "root@127.0.0.1:" + lastR + "/"])
            ))
    }

    // Each side pays ssh's connection (key exchange, authentication, a session): the floor
    // under any tool that opens one per run. The last column is the time beyond it.
    let floor = median(connection)
    print()
    print("ssh alone (`ssh host true`, the connection each run opens): \(milliseconds(floor))")
    print()
    print("| workload | target | archive-sync over ssh | rsync -a -e ssh | ratio | verdict | ratio beyond ssh's connection |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for (name, target, pairs) in [
        ("1. first sync of \(grouped(count))", 1.0, first), ("2. no-op sync, both sides scanned", 0.3, noop),
        ("2. no-op sync, both sides watched", 0.3, watched), ("3. 1,000 changed", 0.5, changed),
    ] {
        let ours = median(pairs.map(\.0))
        let theirs = median(pairs.map(\.1))
        print(
            "| \(name) | <= \(ratio(target)) | \(milliseconds(ours)) | \(milliseconds(theirs)) | **\(ratio(ours / theirs))** | \(verdict(ours / theirs <= target)) | \(ratio(max(0, ours - floor) / max(0.001, theirs - floor))) |"
        )
    }
    print()
    if durableRsync {
        // The store flushes what it writes before it records it; plain rsync leaves its files
        // in the page cache. The same workloads with each file flushed, for reference:
        for (name, flushed, pairs) in [("1. first sync", firstFlushed, first), ("3. 1,000 changed", changedFlushed, changed)] {
            let ours = median(pairs.map(\.0))
            print(
                "for reference, \(name) with rsync -a --fsync -e ssh: \(milliseconds(median(flushed))); archive-sync takes \(ratio(ours / median(flushed))) of it"
            )
        }
    } else {
        print("(this rsync has no --fsync: the durable reference is left out)")
    }
} catch {
    print("remote-bench: ERROR: \(error)")
    exit(1)
}
