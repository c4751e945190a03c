import ArchiveStore
import ArchiveSync
import Foundation
import FuzzSupport

let kinds: [Wire.Kind] = [
    .hello, .begin, .end, .makeCurrent, .changeSequence, .liveObjectCount, .checkpoint, .setCheckpoint, .sequenceAfterOwnWrites,
    .entriesAfter, .entriesChanged, .entriesFor, .contents, .apply, .mergeVectors, .mergeBases, .failure, .watch, .ping, .changed,
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
    try Wire.Samples.replies().map { kind, payload in [UInt8(kinds.firstIndex(of: kind)!)] + payload }
}

@main enum FuzzWireReply {
    static func main() { runFuzzTarget(check, seeds: seeds) }
}
