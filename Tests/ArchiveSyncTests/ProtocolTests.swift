import ArchiveStore
import Foundation
import Testing

@testable import ArchiveSync

/// A store's objects as the manifest and the disk hold them: what "unchanged" compares.
private func snapshot(_ path: String) throws -> ([ObjectID: ContentHash], [String: Data]) {
    (try ArchiveStore(directory: path).liveHashes(), filesOnDisk(path))
}

/// A valid session of requests to `serve --stdio`, frame by frame; its one write sends bytes
/// that do not match their hash, so no mutation of it can change the store's objects.
private func sampleSession(peer: ReplicaID, present: ObjectID, hash: ContentHash) throws -> [[UInt8]] {
    var frames: [[UInt8]] = []
    func add(_ kind: Wire.Kind, _ build: (inout WireWriter) -> Void = { _ in }) {
        var writer = WireWriter()
        build(&writer)
        frames.append(Wire.frame(kind, writer.bytes))
    }
    add(.hello) {
        $0.string("archive-sync")
        $0.count(1)
        $0.count(1)
        $0.bool(true)
        $0.replica(peer)
    }
    add(.begin)
    add(.changeSequence)
    add(.entriesAfter) {
        $0.bool(false)
        $0.count(100)
    }
    add(.entriesChanged) {
        $0.count(0)
        $0.count(100)
        $0.count(100)
    }
    add(.entriesFor) {
        $0.count(1)
        $0.id(present)
    }
    add(.contents) {
        $0.count(1)
        $0.id(present)
        $0.hash(hash)
    }
    add(.checkpoint) { $0.replica(peer) }
    add(.apply) {
        $0.count(1)
        $0.id(try! ObjectID(collection: "Person", key: "intruder"))
        $0.string("json")
        $0.bool(true)
        $0.data(Data("{\"v\":\"intruder\"}".utf8))
        $0.hash(ContentHash(of: Data("something else".utf8)))
        $0.vector(VersionVector([peer: 1]))
        $0.signed(0)
        $0.replica(peer)
        $0.hash(nil)
    }
    add(.end)
    return frames
}

/// The tests of sync between hosts, one at a time: they block their thread on child processes
/// for long stretches, and the test runner's thread pool is as wide as the machine (2 here).
@Suite("Sync between hosts", .serialized)
enum RemoteSyncTests {}

extension RemoteSyncTests {
    @Suite("The sync protocol over a pipe, without ssh")
    struct ProtocolTests {
        @Test func syncThroughServeCopiesBothWaysPageByPageAndThenIsIncremental() async throws {
            try await withTemporaryDirectory { dir in
                let a = try ArchiveStore(directory: dir + "/a")
                let b = try ArchiveStore(directory: dir + "/b")
                // More than a page (2,000 rows) each way.
                try await offPool {
                    try fill(a, count: 2_500, size: 20, tag: "a")
                    try fill(b, count: 2_100, size: 20, tag: "b", collection: "Car")
                }
                let first = try await offPool { try Sync(a: LocalReplica(a), b: try pipeReplica(b.path), options: SyncOptions()).runNow() }
                #expect(first.copiedToB == 2_500 && first.copiedToA == 2_100 && !first.incremental, "\(first)")
                #expect(try a.liveHashes() == b.liveHashes())
                #expect(filesOnDisk(dir + "/a") == filesOnDisk(dir + "/b"))

                // The far side as A this time; a change on each side, then nothing.
                try a.put(Data("{\"a\":\"edited\"}".utf8), as: ObjectID(collection: "Item", key: "item7"))
                try b.remove(ObjectID(collection: "Car", key: "item3"))
                let second = try await offPool { try Sync(a: try pipeReplica(b.path), b: LocalReplica(a), options: SyncOptions()).runNow() }
                #expect(second.incremental && second.copiedToA == 1 && second.deletedOnB == 1, "\(second)")
                #expect(try a.liveHashes() == b.liveHashes())
                let third = try await offPool { try Sync(a: LocalReplica(a), b: try pipeReplica(b.path), options: SyncOptions()).runNow() }
                #expect(third.incremental && third.changes == 0 && third.merged == 0, "\(third)")
            }
        }

        @Test func aConflictOverAPipeKeepsBothVersionsOnBothSides() async throws {
            try await withTemporaryDirectory { dir in
                let a = try ArchiveStore(directory: dir + "/a")
                let b = try ArchiveStore(directory: dir + "/b")
                let id = try ObjectID(collection: "Person", key: "p1")
                try a.put(Data("{\"v\":0}".utf8), as: id)
                _ = try await offPool { try Sync(a: LocalReplica(a), b: try pipeReplica(b.path), options: SyncOptions()).runNow() }
                try a.put(Data("{\"v\":\"a\"}".utf8), as: id)
                try b.put(Data("{\"v\":\"b\"}".utf8), as: id)
                let report = try await offPool { try Sync(a: LocalReplica(a), b: try pipeReplica(b.path), options: SyncOptions()).runNow() }
                #expect(report.conflicts.count == 1, "\(report)")
                #expect(try a.liveHashes() == b.liveHashes() && a.liveHashes().count == 2)
            }
        }

        @Test func aVersionMismatchSaysWhichVersionsEachSideSpeaks() async throws {
            try await withTemporaryDirectory { dir in
                let b = try ArchiveStore(directory: dir + "/b")
                #expect {
                    _ = try pipeReplica(b.path, versions: 7...9)
                } throws: { error in
                    "\(error)".contains("the far side speaks protocol version 1 and this side 7 to 9")
                }
            }
        }

        @Test func aWrongStorePathOrAMissingProgramIsAClearMessage() async throws {
            try await withTemporaryDirectory { dir in
                #expect {
                    _ = try pipeReplica(dir + "/missing")
                } throws: { error in
                    "\(error)".contains("\(dir)/missing") && "\(error)".contains("not a usable store")
                }
                #expect {
                    _ = try RemoteReplica(command: [dir + "/no-such-program", "serve", "--stdio", dir], name: "far:\(dir)")
                } throws: { error in
                    "\(error)".contains("cannot start \(dir)/no-such-program") && "\(error)".contains("No such file or directory")
                }
                // Something that is not the protocol on the far side's stdout (a chatty login script).
                #expect {
                    _ = try RemoteReplica(command: ["sh", "-c", "echo Welcome to the far host; cat > /dev/null"], name: "far:\(dir)")
                } throws: { error in
                    "\(error)".contains("not a frame of the sync protocol (they begin \"Welcome ")
                }
            }
        }

        @Test func garbageTruncatedAndOversizedFramesExitTwoAndChangeNothing() async throws {
            try await withTemporaryDirectory { dir in
                let store = try ArchiveStore(directory: dir + "/s")
                let id = try ObjectID(collection: "Person", key: "p1")
                try store.put(Data("{\"v\":1}".utf8), as: id)
                let before = try snapshot(dir + "/s")
                let session = try sampleSession(
                    peer: ReplicaID(rawValue: "0123456789abcdef"), present: id, hash: ContentHash(of: Data("{\"v\":1}".utf8)))
                let hello = session[0] + session[1]
                var oversized = Wire.frame(.apply, [])
                oversized[4...7] = [0x7F, 0xFF, 0xFF, 0xFF]
                let cases: [(String, [UInt8], String)] = [
                    ("garbage", Array("GET / HTTP/1.1\r\n\r\n".utf8), "not a frame of the sync protocol"),
                    ("oversized", hello + oversized, "over the protocol's limit"),
                    ("truncated", hello + Array(session[8].prefix(session[8].count - 3)), "truncated"),
                    ("bad hash", hello + session[8], "do not match their hash"),
                    ("request before the handshake", session[2], "first request of a session must be the handshake"),
                ]
                for (name, bytes, message) in cases {
                    let result = try await runArchiveSync(["serve", "--stdio", dir + "/s"], stdin: Data(bytes))
                    #expect(result.status == 2 && result.errorOutput.contains(message), "\(name): \(result)")
                    #expect(try snapshot(dir + "/s") == before, "\(name) changed the store")
                }
                // The whole session but its bad write is served, and ends with exit 0.
                let valid = session.enumerated().filter { $0.offset != 8 }.flatMap(\.element)
                let served = try await runArchiveSync(["serve", "--stdio", dir + "/s"], stdin: Data(valid))
                #expect(served.status == 0, "\(served)")
            }
        }

        /// Random frames and random mutations of a valid session: the server never crashes and
        /// never changes the store's objects.
        @Test func fuzzedFramesNeverCrashTheServerNorChangeTheStore() async throws {
            let cases = Int(ProcessInfo.processInfo.environment["PROTOCOL_FUZZ_CASES"] ?? "") ?? 120
            try await withTemporaryDirectory { dir in
                let store = try ArchiveStore(directory: dir + "/s")
                let id = try ObjectID(collection: "Person", key: "p1")
                try store.put(Data("{\"v\":1}".utf8), as: id)
                let before = try snapshot(dir + "/s")
                let session = try sampleSession(
                    peer: ReplicaID(rawValue: "0123456789abcdef"), present: id, hash: ContentHash(of: Data("{\"v\":1}".utf8)))
                var rng = SeededGenerator(seed: 5)
                for n in 0..<cases {
                    var bytes: [UInt8]
                    switch n % 4 {
                    case 0:  // random bytes
                        bytes = (0..<Int.random(in: 0...64, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                    case 1:  // a valid header of a random kind, a random payload
                        let payload = (0..<Int.random(in: 0...48, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                        let kind = Wire.Kind(rawValue: UInt8.random(in: 1...15, using: &rng))!
                        bytes = session[0] + session[1] + Wire.frame(kind, payload)
                    default:  // the session with a few bytes changed, or cut short
                        bytes = session.flatMap { $0 }
                        for _ in 0..<Int.random(in: 1...4, using: &rng) {
                            bytes[Int.random(in: 0..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                        }
                        if Bool.random(using: &rng) { bytes = Array(bytes.prefix(Int.random(in: 0..<bytes.count, using: &rng))) }
                    }
                    let result = try await runArchiveSync(["serve", "--stdio", dir + "/s"], stdin: Data(bytes))
                    #expect([0, 1, 2].contains(result.status), "case \(n): \(result)")
                    #expect(try snapshot(dir + "/s") == before, "case \(n) changed the store: \(bytes)")
                }
            }
        }
    }
}
