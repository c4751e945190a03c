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
    try Wire.Samples.requests().map { Wire.frame($0.kind, $0.encode()) }
}

@main enum FuzzWireRequest {
    static func main() { runFuzzTarget(check, seeds: seeds) }
}
