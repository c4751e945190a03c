import Foundation
import TestSupport
import Testing

@testable import ArchiveStore

private struct Stop: Error {}

/// A large batch stages its files on a second thread while its body still encodes the rest
/// (``BatchStager``): what that must keep of a batch's promises.
@Suite(.enabled(if: ProcessInfo.processInfo.activeProcessorCount > 1, "the stager runs only with a second core"))
struct BatchStagingTests {
    /// The files in `.archive-sync/staging`.
    private static func staged(_ path: String) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: path + "/" + FileName.metadataDirectory + "/staging")) ?? []
    }

    /// Waits up to 20 s (a loaded machine) until `count` files are staged; whether they were.
    private static func waitForStaged(_ path: String, atLeast count: Int) -> Bool {
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if staged(path).count >= count { return true }
            usleep(2_000)
        }
        return false
    }

    // The bodies run off the cooperative pool (they wait on a thread and on files) and return
    // what they saw; the expectations are checked on the test's own task.

    @Test func aLargeBatchStagesItsFilesWhileItsBodyStillRuns() async throws {
        let seen = try await offPool {
            try withStore { store, path throws in
                var stagedDuringBody = false
                try store.batch { tx in
                    for index in 0..<400 { try tx.save(Person(name: "p\(index)", age: index), forKey: "k\(index)") }
                    stagedDuringBody = Self.waitForStaged(path, atLeast: 400)
                    for index in 400..<600 { try tx.save(Person(name: "p\(index)", age: index), forKey: "k\(index)") }
                }
                // `verify` checks the hashes the stager computed against the files.
                return [
                    stagedDuringBody, Self.staged(path).isEmpty, try store.keys(of: Person.self).count == 600,
                    try store.load(Person.self, forKey: "k599") == Person(name: "p599", age: 599), try store.verify().isClean,
                    try store.objects(in: "Person").allSatisfy { $0.version == 1 },
                ]
            }
        }
        #expect(seen == [true, true, true, true, true, true])
    }

    @Test func aLargeBatchWhoseBodyThrowsAfterStagingBeganLeavesNothing() async throws {
        let seen = try await offPool {
            try withStore { store, path throws in
                var stagedBeforeThrowing = false
                var threw = false
                do {
                    try store.batch { tx in
                        for index in 0..<400 { try tx.save(Person(name: "p", age: index), forKey: "k\(index)") }
                        stagedBeforeThrowing = Self.waitForStaged(path, atLeast: 400)
                        throw Stop()
                    }
                } catch is Stop {
                    threw = true
                }
                return [
                    stagedBeforeThrowing, threw, Self.staged(path).isEmpty, filesInStore(path).isEmpty,
                    try store.keys(of: Person.self).isEmpty, try store.status().sequence == 0,
                ]
            }
        }
        #expect(seen == [true, true, true, true, true, true])
    }

    /// A file the stager cannot create (here: its temp name taken) fails the whole batch, and
    /// the stager's other files go with it.
    @Test func aLargeBatchWhoseStagingFailsStoresNothingAndLeavesNoStagedFile() async throws {
        let seen = try await offPool {
            try withStore { store, path throws in
                let staging = path + "/" + FileName.metadataDirectory + "/staging"
                var taken: Set<String> = []
                var failed = false
                do {
                    try store.batch { tx in
                        for index in 0..<300 { try tx.save(Person(name: "p", age: index), forKey: "k\(index)") }
                        // The temp names the next writes of this process take (tempName counts up;
                        // other tests' writes may take some of them first).
                        let next = store.tempName()
                        let dot = next.lastIndex(of: ".")!
                        let counter = Int(next[next.index(after: dot)...])!
                        taken = Set((counter + 1...counter + 2_000).map { "\(next[..<dot]).\($0)" })
                        for name in taken { _ = FileManager.default.createFile(atPath: staging + "/" + name, contents: Data()) }
                        for index in 300..<1_000 { try tx.save(Person(name: "p", age: index), forKey: "k\(index)") }
                    }
                } catch is ArchiveError {
                    failed = true
                }
                return [
                    failed, Set(Self.staged(path)).isSubset(of: taken), filesInStore(path).isEmpty, try store.keys(of: Person.self).isEmpty,
                ]
            }
        }
        #expect(seen == [true, true, true, true])
    }
}
