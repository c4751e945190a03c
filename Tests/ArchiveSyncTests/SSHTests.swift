import ArchiveStore
import Foundation
import TestSupport
import Testing

@testable import ArchiveSync

#if canImport(Glibc)
    import Glibc
#endif

/// The pids of the processes whose parent is `parent` and whose command name is `name`.
func children(of parent: Int32, named name: String) -> [Int32] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap { Int32($0) }.filter { pid in
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")")
        else { return false }
        let comm = stat[stat.index(after: open)..<close]
        let fields = stat[stat.index(close, offsetBy: 2)...].split(separator: " ")
        return comm == name && fields.count > 1 && Int32(fields[1]) == parent
    }
}

extension RemoteSyncTests {
    @Suite("Sync between hosts through a real sshd on 127.0.0.1")
    struct SSHTests {
        @Test func syncAndDiffRunThroughSSHEitherWay() async throws {
            let server = try SSHServer.start()
            defer { server.stop() }
            try await withTemporaryDirectory { dir in
                let a = try ArchiveStore(directory: dir + "/a")
                let b = try ArchiveStore(directory: dir + "/b")
                try a.put(Data("{\"name\":\"ann\"}".utf8), as: ObjectID(collection: "Person", key: "p1"))
                try b.put(Data("{\"name\":\"bob\"}".utf8), as: ObjectID(collection: "Person", key: "p2"))
                let remote = ["--rsh", server.rsh, "--remote-cmd", archiveSyncProgram]

                let diff = try await runArchiveSyncOffPool(["diff", dir + "/a", server.location(dir + "/b")] + remote)
                #expect(
                    diff.status == 0 && diff.output.contains("copy     Person/p1 to B") && diff.output.contains("copy     Person/p2 to A"), "\(diff)")
                let first = try await runArchiveSyncOffPool(["sync", dir + "/a", server.location(dir + "/b")] + remote)
                #expect(first.status == 0 && first.output.contains("1 copied to B, 1 copied to A"), "\(first)")
                #expect(try a.liveHashes() == b.liveHashes())

                // The far side first.
                try b.put(Data("{\"name\":\"bob, edited\"}".utf8), as: ObjectID(collection: "Person", key: "p2"))
                let second = try await runArchiveSyncOffPool(["sync", server.location(dir + "/b"), dir + "/a", "--json"] + remote)
                #expect(
                    second.status == 0 && second.output.contains("\"copiedToB\" : 1") && second.output.contains("\"incremental\" : true"), "\(second)"
                )
                #expect(try a.liveHashes() == b.liveHashes())
                let third = try await runArchiveSyncOffPool(["sync", dir + "/a", server.location(dir + "/b")] + remote)
                #expect(third.status == 0 && third.output.hasSuffix(": 0 changes\n"), "\(third)")
            }
        }

        @Test func aMissingProgramOrAWrongPathOnTheFarHostIsAClearMessage() async throws {
            let server = try SSHServer.start()
            defer { server.stop() }
            try await withTemporaryDirectory { dir in
                _ = try ArchiveStore(directory: dir + "/a")
                let missing = try await runArchiveSyncOffPool(
                    ["sync", dir + "/a", server.location(dir + "/a2"), "--rsh", server.rsh, "--remote-cmd", "/nonexistent/archive-sync"])
                #expect(
                    missing.status == 1 && missing.errorOutput.contains("before the handshake") && missing.errorOutput.contains("exit 127")
                        && missing.errorOutput.contains("/nonexistent/archive-sync"), "\(missing)")
                let wrongPath = try await runArchiveSyncOffPool(
                    ["sync", dir + "/a", server.location(dir + "/no store here"), "--rsh", server.rsh, "--remote-cmd", archiveSyncProgram])
                #expect(wrongPath.status == 1 && wrongPath.errorOutput.contains("\(dir)/no store here is not a usable store"), "\(wrongPath)")
                let refused = try await runArchiveSyncOffPool(
                    [
                        "sync", dir + "/a", "root@127.0.0.1:" + dir + "/b", "--rsh", "ssh -p 1 -o BatchMode=yes -o ConnectTimeout=5", "--remote-cmd",
                        archiveSyncProgram,
                    ])
                #expect(refused.status == 1 && refused.errorOutput.contains("Connection refused"), "\(refused)")
            }
        }

        /// 65 MiB, over the protocol's 63 MiB: refused with one sentence before anything is
        /// written, whether the object would go to the far side or come from it.
        @Test func anObjectOverTheLimitIsRefusedBeforeAnythingIsSyncedPushOrPull() async throws {
            let server = try SSHServer.start()
            defer { server.stop() }
            try await withTemporaryDirectory { dir in
                let a = try ArchiveStore(directory: dir + "/a")
                let b = try ArchiveStore(directory: dir + "/b")
                let big = Data("{\"v\":\"".utf8) + Data(repeating: UInt8(ascii: "x"), count: 65 << 20) + Data("\"}".utf8)
                try a.put(big, as: ObjectID(collection: "Blob", key: "big"))
                try a.put(Data("{\"v\":\"a\"}".utf8), as: ObjectID(collection: "Person", key: "pa"))
                try b.put(Data("{\"v\":\"b\"}".utf8), as: ObjectID(collection: "Person", key: "pb"))
                let (hashesA, hashesB) = (try a.liveHashes(), try b.liveHashes())
                let remote = ["--rsh", server.rsh, "--remote-cmd", archiveSyncProgram]
                let limit = "over the 63 MiB (66060288 bytes) the sync protocol carries in one object between hosts, so nothing was synced"

                let push = try await runArchiveSyncOffPool(["sync", dir + "/a", server.location(dir + "/b")] + remote)
                #expect(push.status == 1 && push.errorOutput.split(separator: "\n").count == 1, "\(push)")
                #expect(push.errorOutput.contains("Blob/big in \(a.path) is \(big.count) bytes, \(limit)"), "\(push)")
                #expect(try a.liveHashes() == hashesA && b.liveHashes() == hashesB)

                let pull = try await runArchiveSyncOffPool(["sync", dir + "/b", server.location(dir + "/a")] + remote)
                #expect(pull.status == 1 && pull.errorOutput.split(separator: "\n").count == 1, "\(pull)")
                #expect(pull.errorOutput.contains("Blob/big in \(server.location(dir + "/a")) is \(big.count) bytes, \(limit)"), "\(pull)")
                #expect(try a.liveHashes() == hashesA && b.liveHashes() == hashesB)
            }
        }

        /// The randomized convergence test of two-directory sync, with B behind ssh.
        @Test func randomEditsOnBothSidesConvergeOverSSH() async throws {
            let server = try SSHServer.start()
            defer { server.stop() }
            let seeds = UInt64(ProcessInfo.processInfo.environment["SSH_SYNC_SEEDS"].flatMap { Int($0) } ?? 5)
            for seed in 1...seeds {
                try await withTemporaryDirectory { dir in
                    try await ConvergenceTests().runSeed(seed, in: dir) { a, b, options in
                        let command =
                            server.rsh.split(separator: " ").map(String.init) + [
                                "root@127.0.0.1", "\(archiveSyncProgram) serve --stdio '\(b.path)'",
                            ]
                        let far = try RemoteReplica(command: command, name: server.location(b.path), peer: a.replica)
                        return Sync(a: LocalReplica(a), b: far, options: options)
                    }
                }
            }
        }

        /// The same, through a pipe to `serve --stdio` without ssh, with more seeds.
        @Test func randomEditsOnBothSidesConvergeOverAPipe() async throws {
            let seeds = UInt64(ProcessInfo.processInfo.environment["PIPE_SYNC_SEEDS"].flatMap { Int($0) } ?? 15)
            for seed in 1...seeds {
                try await withTemporaryDirectory { dir in
                    try await ConvergenceTests().runSeed(seed, in: dir) { a, b, options in
                        Sync(a: try pipeReplica(b.path), b: LocalReplica(a), options: options)
                    }
                }
            }
        }

        /// ssh killed in the middle of a first sync: both stores stay consistent (each object old
        /// or new), and the next sync completes the work.
        @Test func killingSSHMidTransferLeavesBothStoresConsistentAndTheNextSyncCompletes() async throws {
            let server = try SSHServer.start()
            defer { server.stop() }
            try await withTemporaryDirectory { dir in
                let a = try ArchiveStore(directory: dir + "/a")
                let count = 20_000
                try await offPool { try fill(a, count: count, size: 400, tag: "a") }
                _ = try ArchiveStore(directory: dir + "/b")
                let sync = try RunningCommand(
                    ["sync", dir + "/a", server.location(dir + "/b"), "--rsh", server.rsh, "--remote-cmd", archiveSyncProgram],
                    executable: archiveSyncProgram)
                // Kill ssh once some objects have arrived, and before all have.
                var arrived = 0
                let deadline = Date().addingTimeInterval(120)
                while arrived == 0 && Date() < deadline && sync.isRunning {
                    arrived = (try? FileManager.default.contentsOfDirectory(atPath: dir + "/b/Item").count) ?? 0
                    try await Task.sleep(for: .milliseconds(5))
                }
                let ssh = children(of: sync.pid, named: "ssh")
                #expect(ssh.count == 1, "no ssh child of the sync to kill")
                for pid in ssh { kill(pid, SIGKILL) }
                // It reads EOF from ssh's stdout at once; the rest is its bounded wait for ssh.
                let killed = try await offPool { [sync] in try sync.finish(within: .seconds(120)) }
                #expect(killed.status == 1 && killed.errorOutput.contains("connection to the far side closed"), "\(killed)")
                #expect(arrived > 0 && arrived < count, "the kill came at \(arrived) of \(count) objects, not mid-transfer")

                // Each object in B is absent or A's: never half. The far side may still finish its
                // last batch; the next sync waits for its lock, for at most two minutes.
                var rerun = CommandResult(status: -1, stdout: Data(), stderr: Data())
                let lockDeadline = ContinuousClock.now + .seconds(120)
                while ContinuousClock.now < lockDeadline {
                    let filesA = filesOnDisk(dir + "/a")
                    for (path, data) in filesOnDisk(dir + "/b") where !path.contains(".archive-sync-tmp.") {
                        #expect(filesA[path] == data, "\(path) in B is neither absent nor A's")
                    }
                    rerun = try await runArchiveSyncOffPool([
                        "sync", dir + "/a", server.location(dir + "/b"), "--rsh", server.rsh, "--remote-cmd", archiveSyncProgram,
                    ])
                    if !rerun.errorOutput.contains("another sync") { break }
                    try await Task.sleep(for: .milliseconds(100))
                }
                #expect(rerun.status == 0, "\(rerun)")
                let b = try ArchiveStore(directory: dir + "/b")
                #expect(try a.liveHashes() == b.liveHashes())
                #expect(filesOnDisk(dir + "/a") == filesOnDisk(dir + "/b"))
                let verify = try await runArchiveSyncOffPool(["verify", dir + "/b"])
                #expect(verify.status == 0, "\(verify)")
            }
        }
    }
}
