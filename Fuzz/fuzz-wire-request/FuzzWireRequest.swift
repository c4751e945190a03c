import ArchiveStore
import ArchiveSync
import Foundation
import FuzzSupport

/// A frame as `serve` reads it (the handshake and every request): decoded in full or refused;
/// one that decodes encodes to a payload that decodes to the same payload again.
func check(_ bytes: [UInt8]) {
    guard let request = try? Wire.Request.decode(frame: bytes) else { return }
    let payload = request.encode()
    guard let again = try? Wire.Request.decode(request.kind, payload) else {
        preconditionFailure("a decoded request does not encode to one that decodes")
    }
    precondition(again.encode() == payload, "a request changes when encoded and decoded again")
}

/// One frame of every kind of request, as the client sends them.
func seeds() throws -> [[UInt8]] {
    let peer = ReplicaID(rawValue: "0123456789abcdef")
    let id = try ObjectID(collection: "Person", key: "p1")
    let data = Data("{\"v\":1}".utf8)
    let hash = ContentHash(of: data)
    let vector = VersionVector([peer: 3, ReplicaID(rawValue: "fedcba9876543210"): 200])
    let version = IncomingVersion(vector: vector, modified: -5, author: peer, expected: hash)
    let requests: [Wire.Request] = [
        .hello(Wire.Hello(versions: 1...1, peer: peer)), .hello(Wire.Hello(versions: 1...3, peer: nil)),
        .begin, .end, .makeCurrent, .changeSequence, .liveObjectCount,
        .checkpoint(peer: peer), .setCheckpoint(peer: peer, sequence: 300), .sequenceAfterOwnWrites(since: 129),
        .entriesAfter(nil, limit: 1_000), .entriesAfter(id, limit: 2), .entriesChanged(after: 5, through: 70_000, limit: 1_000),
        .entriesFor([id, try ObjectID(collection: "Car", key: "c")]),
        .apply([
            IncomingObject(id: id, fileExtension: "json", content: data, version: version),
            IncomingObject(id: try ObjectID(collection: "Person", key: "p2"), fileExtension: "plist", content: nil, version: version),
        ]),
        .mergeVectors([VectorMerge(id: id, hash: hash, vector: vector), VectorMerge(id: id, hash: nil, vector: VersionVector())]),
    ]
    var contents = WireWriter()
    contents.count(2)
    contents.id(id)
    contents.hash(hash)
    contents.id(id)
    contents.hash(nil)
    return requests.map { Wire.frame($0.kind, $0.encode()) } + [Wire.frame(.contents, contents.bytes)]
}

@main enum FuzzWireRequest {
    static func main() { runFuzzTarget(check, seeds: seeds) }
}
