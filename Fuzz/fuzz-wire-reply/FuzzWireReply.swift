import ArchiveStore
import ArchiveSync
import Foundation
import FuzzSupport

let kinds: [Wire.Kind] = [
    .hello, .begin, .end, .makeCurrent, .changeSequence, .liveObjectCount, .checkpoint, .setCheckpoint, .sequenceAfterOwnWrites,
    .entriesAfter, .entriesChanged, .entriesFor, .contents, .apply, .mergeVectors, .failure,
]

/// A reply as the client reads it: the first byte names the request it answers, the rest is
/// the payload of the `ok` reply (or of a `failure`); the handshake reply is also checked
/// against the versions the client offered.
func check(_ bytes: [UInt8]) {
    guard let first = bytes.first else { return }
    let kind = kinds[Int(first) % kinds.count]
    let payload = Array(bytes.dropFirst())
    try? Wire.Reply.decode(replyTo: kind, payload)
    if kind == .hello, let reply = try? Wire.HelloReply.decode(payload) {
        _ = try? reply.agreedVersion(offered: Wire.versions, name: "far:store")
        _ = try? reply.agreedVersion(offered: 0...UInt32.max, name: "far:store")
        _ = Wire.describe(reply.versions)
    }
}

/// One reply of every shape, as `serve` writes them, each after the byte that names its request.
func seeds() throws -> [[UInt8]] {
    let peer = ReplicaID(rawValue: "0123456789abcdef")
    let data = Data("{\"v\":1}".utf8)
    let live = ReplicaEntry(
        id: try ObjectID(collection: "Person", key: "p1"), file: "p1.json", vector: VersionVector([peer: 2]), hash: ContentHash(of: data),
        size: data.count, modified: 77, author: peer, isDeleted: false, sequence: 9)
    let tombstone = ReplicaEntry(
        id: try ObjectID(collection: "Car", key: "c"), file: "c.json", vector: VersionVector([peer: 4]), hash: nil, size: 0, modified: -3,
        author: peer, isDeleted: true, sequence: 10)
    func reply(_ kind: Wire.Kind, _ build: (inout WireWriter) -> Void) -> [UInt8] {
        var writer = WireWriter()
        build(&writer)
        return [UInt8(kinds.firstIndex(of: kind)!)] + writer.bytes
    }
    return [
        [0] + Wire.HelloReply(versions: 1...1, chosen: 1, store: (peer, "/srv/store")).encode(),
        [0] + Wire.HelloReply(versions: 1...2, chosen: nil, store: nil).encode(),
        reply(.begin) { _ in }, reply(.makeCurrent) { $0.bool(true) }, reply(.changeSequence) { $0.count(70_000) },
        reply(.checkpoint) {
            $0.bool(true)
            $0.count(300)
        },
        reply(.entriesAfter) {
            $0.bool(false)
            $0.count(2)
            $0.entry(live)
            $0.entry(tombstone)
        },
        reply(.entriesFor) {
            $0.count(2)
            $0.bool(true)
            $0.entry(live)
            $0.bool(false)
        },
        reply(.contents) {
            $0.count(2)
            $0.bool(true)
            $0.data(data)
            $0.bool(false)
        },
        reply(.apply) {
            $0.count(2)
            $0.bool(true)
            $0.bool(false)
        },
        reply(.failure) { $0.string("another sync holds the store's lock") },
    ]
}

@main enum FuzzWireReply {
    static func main() { runFuzzTarget(check, seeds: seeds) }
}
