import ArchiveStore
import Foundation
import TestSupport
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
                #expect(third.incremental && third.changes == 0 && third.vectorsMerged == 0, "\(third)")
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

        /// An object of exactly the limit crosses both ways, in one sync.
        @Test func anObjectOfExactlyTheLimitIsCarriedBothWays() async throws {
            try await withTemporaryDirectory { dir in
                let a = try ArchiveStore(directory: dir + "/a")
                let b = try ArchiveStore(directory: dir + "/b")
                func object(_ fill: UInt8) -> Data {
                    Data("{\"v\":\"".utf8) + Data(repeating: fill, count: Wire.maximumObject - 8) + Data("\"}".utf8)
                }
                #expect(object(0x61).count == Wire.maximumObject)
                try a.put(object(0x61), as: ObjectID(collection: "Blob", key: "a"))
                try b.put(object(0x62), as: ObjectID(collection: "Blob", key: "b"))
                let report = try await offPool { try Sync(a: LocalReplica(a), b: try pipeReplica(b.path), options: SyncOptions()).runNow() }
                #expect(report.copiedToA == 1 && report.copiedToB == 1, "\(report)")
                #expect(try a.liveHashes() == b.liveHashes() && a.liveHashes().count == 2)
            }
        }

        /// Manifests that say 10 bytes for a 65 MiB object, on each side: neither is sent (serve
        /// and the client trapped, building a frame over the limit), both are left for the next
        /// sync, and the rest of the sync completes.
        @Test func aManifestUnderstatingAnObjectsSizeSkipsItEitherWayAndTheRestCompletes() async throws {
            try await withTemporaryDirectory { dir in
                let big = Data("{\"v\":\"".utf8) + Data(repeating: UInt8(ascii: "x"), count: 65 << 20) + Data("\"}".utf8)
                var stores: [ArchiveStore] = []
                for side in ["a", "b"] {
                    let store = try ArchiveStore(directory: dir + "/" + side)
                    try store.put(big, as: ObjectID(collection: "Blob", key: side))
                    try store.put(Data("{\"v\":1}".utf8), as: ObjectID(collection: "Person", key: side))
                    let tamper = try await offPool {
                        try RunningCommand(
                            [store.path + "/.archive-sync/manifest.sqlite", "UPDATE objects SET size = 10 WHERE collection = 'Blob'"],
                            executable: "/usr/bin/sqlite3"
                        )
                        .finish()
                    }
                    #expect(tamper.status == 0, "\(tamper)")
                    stores.append(store)
                }
                let (a, b) = (stores[0], stores[1])
                let report = try await offPool { try Sync(a: LocalReplica(a), b: try pipeReplica(b.path), options: SyncOptions()).runNow() }
                #expect(report.copiedToA == 1 && report.copiedToB == 1 && Set(report.skipped.map(\.id)) == ["Blob/a", "Blob/b"], "\(report)")
                #expect(try Set(a.liveHashes().keys.map(\.description)) == ["Blob/a", "Person/a", "Person/b"])
                #expect(try Set(b.liveHashes().keys.map(\.description)) == ["Blob/b", "Person/a", "Person/b"])
            }
        }

        @Test func aVersionMismatchSaysWhichVersionsEachSideSpeaks() async throws {
            try withTemporaryDirectory { dir in
                let b = try ArchiveStore(directory: dir + "/b")
                #expect {
                    _ = try pipeReplica(b.path, versions: 7...9)
                } throws: { error in
                    "\(error)".contains("the far side speaks protocol version 1 to 3 and this side 7 to 9")
                }
            }
        }

        @Test func aWrongStorePathOrAMissingProgramIsAClearMessage() async throws {
            try withTemporaryDirectory { dir in
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
                    let result = try await runArchiveSyncOffPool(["serve", "--stdio", dir + "/s"], stdin: Data(bytes))
                    #expect(result.status == 2 && result.errorOutput.contains(message), "\(name): \(result)")
                    #expect(try snapshot(dir + "/s") == before, "\(name) changed the store")
                }
                // The whole session but its bad write is served, and ends with exit 0.
                let valid = session.enumerated().filter { $0.offset != 8 }.flatMap(\.element)
                let served = try await runArchiveSyncOffPool(["serve", "--stdio", dir + "/s"], stdin: Data(valid))
                #expect(served.status == 0, "\(served)")
            }
        }

        @Test func theReportedHandshakesWithAnEmptyVersionRangeExitTwoWithOneSentenceAndNoSignal() async throws {
            try await withTemporaryDirectory { dir in
                _ = try ArchiveStore(directory: dir + "/s")
                let before = try snapshot(dir + "/s")
                // The reported 41 bytes (versions 2 to 1), and the variant (1 to 0).
                let reported: [UInt8] =
                    [0xA5, 0x53, 0x01, 0x00, 0x00, 0x00, 0x00, 0x21, 0x0C] + Array("archive-sync".utf8) + [0x02, 0x01, 0x01, 0x10]
                    + Array("ea3338e1d37bb02f".utf8)
                var variant = reported
                variant[21...22] = [0x01, 0x00]
                #expect(reported.count == 41)
                for (bytes, range) in [(reported, "2 to 1"), (variant, "1 to 0")] {
                    let result = try await runArchiveSyncOffPool(["serve", "--stdio", dir + "/s"], stdin: Data(bytes))
                    let lines = result.errorOutput.split(separator: "\n")
                    #expect(result.status == 2 && lines.count == 1, "\(range): \(result)")
                    #expect(lines.first?.contains("the handshake names protocol versions \(range), an empty range") == true, "\(result)")
                    #expect(try snapshot(dir + "/s") == before)
                }
            }
        }

        @Test func aRefusedFrameAfterAWriteSaysTheWriteStaysInsteadOfClaimingNothingChanged() async throws {
            try await withTemporaryDirectory { dir in
                _ = try ArchiveStore(directory: dir + "/s")
                let peer = ReplicaID(rawValue: "0123456789abcdef")
                let session = try sampleSession(
                    peer: peer, present: ObjectID(collection: "Person", key: "p1"), hash: ContentHash(of: Data("{\"v\":1}".utf8)))
                let content = Data("{\"v\":\"written\"}".utf8)
                var writer = WireWriter()
                writer.count(1)
                writer.id(try ObjectID(collection: "Person", key: "written"))
                writer.string("json")
                writer.bool(true)
                writer.data(content)
                writer.hash(ContentHash(of: content))
                writer.vector(VersionVector([peer: 1]))
                writer.signed(0)
                writer.replica(peer)
                writer.hash(nil)
                let bytes = session[0] + session[1] + Wire.frame(.apply, writer.bytes) + Array("garbage!".utf8)
                let result = try await runArchiveSyncOffPool(["serve", "--stdio", dir + "/s"], stdin: Data(bytes))
                // One line for the session's start, one for its end.
                #expect(result.status == 2 && result.errorOutput.split(separator: "\n").count == 2, "\(result)")
                #expect(
                    result.errorOutput.contains("not a frame of the sync protocol")
                        && result.errorOutput.contains("nothing of that request was applied (1 object written earlier in this session stays)")
                        && !result.errorOutput.contains("not changed"), "\(result)")
                #expect(try ArchiveStore(directory: dir + "/s").liveHashes().keys.map(\.key) == ["written"])
            }
        }

        /// A far side that answers with `replies` in order (each the payload of an ok frame),
        /// whatever it is asked, until its input ends; after a second at most when `briefly`.
        private func farSide(replying replies: [(inout WireWriter) -> Void], in dir: String, briefly: Bool = false) throws -> [String] {
            var frames: [UInt8] = []
            for reply in replies {
                var writer = WireWriter()
                reply(&writer)
                frames += Wire.frame(.ok, writer.bytes)
            }
            let file = dir + "/reply-\(UUID().uuidString)"
            try Data(frames).write(to: URL(fileURLWithPath: file))
            return ["sh", "-c", "cat '\(file)'; \(briefly ? "timeout 1 " : "")cat > /dev/null"]
        }

        private func farSide(replying reply: @escaping (inout WireWriter) -> Void, in dir: String) throws -> [String] {
            try farSide(replying: [reply], in: dir)
        }

        /// Pages the walk of two manifests would loop on, or pair up wrongly: refused at once.
        @Test func aFarSidesPageOutOfOrderOrCutShortWithNothingInItIsRefusedNotLoopedOn() async throws {
            try withTemporaryDirectory { dir in
                let far = ReplicaID(rawValue: "farside")
                let handshake: (inout WireWriter) -> Void = {
                    $0.count(1)
                    $0.count(1)
                    $0.count(1)
                    $0.replica(far)
                    $0.string("/srv/store")
                }
                func entry(_ key: String, sequence: Int) throws -> ReplicaEntry {
                    ReplicaEntry(
                        id: try ObjectID(collection: "Person", key: key), file: key + ".json", vector: VersionVector([far: 1]), hash: nil, size: 0,
                        modified: 0, author: far, isDeleted: true, sequence: sequence)
                }
                func page(_ entries: [ReplicaEntry], cut: Bool) -> (inout WireWriter) -> Void {
                    { writer in
                        writer.bool(cut)
                        writer.count(entries.count)
                        for entry in entries { writer.entry(entry) }
                    }
                }
                let p1 = try ObjectID(collection: "Person", key: "p1")
                let wrongEntry = try entry("p2", sequence: 1)
                let cases: [((inout WireWriter) -> Void, (RemoteReplica) throws -> Void, String)] = [
                    (page([], cut: true), { _ = try $0.entries(after: nil, limit: 2_000) }, "a page cut short holds no entries"),
                    (
                        page([try entry("p2", sequence: 1), try entry("p1", sequence: 2)], cut: false),
                        { _ = try $0.entries(after: nil, limit: 2_000) },
                        "a page of the manifest is not in id order"
                    ),
                    (
                        page([try entry("p1", sequence: 5)], cut: false), { _ = try $0.entries(changedAfter: 5, through: 10, limit: 2_000) },
                        "a page of changes is not in order after sequence 5 and up to 10"
                    ),
                    (
                        page([try entry("p1", sequence: 11)], cut: false), { _ = try $0.entries(changedAfter: 5, through: 10, limit: 2_000) },
                        "a page of changes is not in order after sequence 5 and up to 10"
                    ),
                    (
                        {
                            $0.count(1)
                            $0.bool(true)
                            $0.entry(wrongEntry)
                        }, { _ = try $0.entries(for: [p1]) }, "the entry sent for Person/p1 names another object"
                    ),
                ]
                for (reply, call, message) in cases {
                    let replica = try RemoteReplica(
                        command: try farSide(replying: [handshake, reply], in: dir, briefly: true), name: "far:/srv/store")
                    #expect {
                        try call(replica)
                    } throws: { "\($0)" == "far:/srv/store: the far side replied with a malformed message: \(message)" }
                }
            }
        }

        @Test func aBadHandshakeReplyNamesWhatWasWrongNotAVersionMismatch() async throws {
            try withTemporaryDirectory { dir in
                // Each case: what is wrong, the reply, what the error must say.
                let cases: [((inout WireWriter) -> Void, String)] = [
                    (
                        {
                            $0.count(1)
                            $0.count(4)
                            $0.count(4)
                            $0.replica(ReplicaID(rawValue: "farside"))
                            $0.string("/srv/store")
                        }, "the far side chose protocol version 4, which this side did not offer (it speaks 1 to 3)"
                    ),
                    (
                        {
                            $0.count(2)
                            $0.count(1)
                            $0.count(0)
                        }, "malformed handshake reply: it names protocol versions 2 to 1, an empty range"
                    ),
                    (
                        {
                            $0.count(1)
                            $0.count(1)
                            $0.count(3)
                        }, "malformed handshake reply: it chooses protocol version 3, outside the versions 1 it names"
                    ),
                    ({ $0.count(1) }, "malformed handshake reply: a message ends early"),
                ]
                for (reply, message) in cases {
                    #expect {
                        _ = try RemoteReplica(command: try farSide(replying: reply, in: dir), name: "far:/srv/store")
                    } throws: { error in
                        "\(error)".contains(message) && !"\(error)".contains("and this side")
                    }
                }
                // A real mismatch still says which versions each side speaks.
                #expect {
                    _ = try RemoteReplica(
                        command: try farSide(
                            replying: {
                                $0.count(4)
                                $0.count(5)
                                $0.count(0)
                            }, in: dir), name: "far:/srv/store")
                } throws: {
                    "\($0)"
                        == "far:/srv/store: the far side speaks protocol version 4 to 5 and this side 1 to 3; install the same release of archive-sync on both hosts"
                }
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
                    let result = try await runArchiveSyncOffPool(["serve", "--stdio", dir + "/s"], stdin: Data(bytes))
                    #expect([0, 1, 2].contains(result.status), "case \(n): \(result)")
                    #expect(try snapshot(dir + "/s") == before, "case \(n) changed the store: \(bytes)")
                }
            }
        }
    }
}
