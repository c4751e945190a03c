import ArchiveStore
import Foundation
import TestSupport
import Testing

@testable import ArchiveSync

#if canImport(Glibc)
    import Glibc
#endif

/// Store A with `count` objects, an empty store B, and a far side for B that stays busy for
/// `seconds` after its session ended (`slowExitingServe`), leaving `marker` when done.
private func storesWithASlowFarSide(in dir: String, count: Int, seconds: Int) throws -> (
    a: ArchiveStore, b: ArchiveStore, marker: String, farSide: String
) {
    let a = try ArchiveStore(directory: dir + "/a")
    try fill(a, count: count, size: 100, tag: "a")
    let marker = dir + "/far side done"
    return (a, try ArchiveStore(directory: dir + "/b"), marker, try slowExitingServe(in: dir, seconds: seconds, marker: marker))
}

/// A far side that stays busy for `seconds` after its session ended (as a store's settle at
/// exit does) and then leaves `marker`: `serve --stdio` through a wrapper script.
private func slowExitingServe(in dir: String, seconds: Int, marker: String) throws -> String {
    let script = dir + "/slow-exit.sh"
    let text = """
        #!/bin/sh
        "\(archiveSyncProgram)" "$@"
        status=$?
        sleep \(seconds)
        touch "\(marker)"
        exit $status
        """
    try text.write(toFile: script, atomically: true, encoding: .utf8)
    chmod(script, 0o755)
    return script
}

/// Waits up to 30 s for `condition`, off the cooperative pool.
private func comesTrue(_ condition: @escaping @Sendable () -> Bool) async throws -> Bool {
    try await offPool {
        let deadline = ContinuousClock.now + .seconds(30)
        while !condition() {
            if ContinuousClock.now > deadline { return false }
            usleep(20_000)
        }
        return true
    }
}

extension RemoteSyncTests {
    @Suite("A sync does not wait for the far process's exit once the session has ended")
    struct FarSideExitTests {
        /// The far side's reply to `end` comes after every write it made is durable in its
        /// manifest; what its process does after that (its store's `syncfs`) is not this side's wait.
        @Test func aSyncOverSSHReturnsOnceTheFarSideHasAnsweredEndAndTheFarSideFinishesOnItsOwn() async throws {
            let server = try SSHServer.start()
            defer { server.stop() }
            try await withTemporaryDirectory { dir in
                let (a, b, marker, farSide) = try storesWithASlowFarSide(in: dir, count: 50, seconds: 4)

                let sync = try await runArchiveSyncOffPool([
                    "sync", dir + "/a", server.location(dir + "/b"), "--rsh", server.rsh, "--remote-cmd", farSide,
                ])
                let doneWhenSyncReturned = FileManager.default.fileExists(atPath: marker)
                #expect(sync.status == 0 && sync.output.contains("50 copied to B"), "\(sync)")
                #expect(!doneWhenSyncReturned, "the sync waited for the far process to exit")
                #expect(try a.liveHashes() == b.liveHashes())
                // Not killed with this side's exit: the far side goes on to its end.
                #expect(try await comesTrue { FileManager.default.fileExists(atPath: marker) })
            }
        }

        /// In a process that goes on (the library's), the far process is still reaped once it exits.
        @Test func theLibraryReapsAFarProcessThatExitsAfterTheSync() async throws {
            try await withTemporaryDirectory { dir in
                let (a, b, marker, farSide) = try storesWithASlowFarSide(in: dir, count: 20, seconds: 2)
                let far = try RemoteReplica(command: [farSide, "serve", "--stdio", dir + "/b"], name: "pipe:b")
                let report = try await offPool { try Sync(a: LocalReplica(a), b: far, options: SyncOptions()).runNow() }
                #expect(report.copiedToB == 20 && !FileManager.default.fileExists(atPath: marker))
                #expect(try a.liveHashes() == b.liveHashes())
                #expect(try await comesTrue { FileManager.default.fileExists(atPath: marker) })
                // Neither running nor a zombie: reaped.
                #expect(try await comesTrue { children(of: getpid(), named: "slow-exit.sh").isEmpty })
            }
        }
    }
}
