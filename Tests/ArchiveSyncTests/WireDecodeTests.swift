import ArchiveStore
import Foundation
import Testing

@testable import ArchiveSync

private let peer = Wire.Samples.peer

/// Decodes `body`, which must succeed or throw a ``WireError``: any other error fails the
/// test, and a trap ends the test run.
private func decodesOrRefuses(_ what: @autoclosure () -> String, _ body: () throws -> Void) -> Bool {
    do {
        try body()
        return true
    } catch is WireError {
        return false
    } catch {
        Issue.record("\(what()) threw \(error), not a WireError")
        return false
    }
}

/// Varints that a length or count field might be replaced with: the largest of each width,
/// and 64-bit values that overflow `Int` or the byte count.
private let hugeVarints: [[UInt8]] = [
    [0x7F], [0xFF, 0x7F], [0xFF, 0xFF, 0xFF, 0x7F], [0xFF, 0xFF, 0xFF, 0xFF, 0x0F],
    [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F], [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01],
    [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02], [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01],
]

/// Every truncation of `bytes`, every single-byte change of it, and every byte replaced by
/// each of ``hugeVarints``: each decodes or is refused with a ``WireError``.
private func mutations(of bytes: [UInt8], _ decode: ([UInt8]) throws -> Void, _ what: String) -> (decoded: Int, refused: Int) {
    var decoded = 0
    var refused = 0
    func run(_ input: [UInt8], _ label: @autoclosure () -> String) {
        if decodesOrRefuses("\(what) \(label())", { try decode(input) }) { decoded += 1 } else { refused += 1 }
    }
    for length in 0..<bytes.count {
        let prefix = Array(bytes.prefix(length))
        if decodesOrRefuses("\(what) cut to \(length) bytes", { try decode(prefix) }) {
            Issue.record("\(what) cut to \(length) of \(bytes.count) bytes decoded")
        }
    }
    for position in bytes.indices {
        var mutated = bytes
        for value in 0...255 where value != bytes[position] {
            mutated[position] = UInt8(value)
            run(mutated, "with byte \(position) set to \(value)")
        }
        for varint in hugeVarints {
            run(Array(bytes[..<position]) + varint + bytes[(position + 1)...], "with byte \(position) replaced by \(varint)")
        }
    }
    return (decoded, refused)
}

@Suite("The sync protocol's decoders, on truncated and mutated bytes")
struct WireDecodeTests {
    @Test func everyRequestDecodesToWhatWasEncoded() throws {
        for request in try Wire.Samples.requests() {
            let frame = Wire.frame(request.kind, request.encode())
            let decoded = try Wire.Request.decode(frame: frame)
            #expect(decoded.kind == request.kind && decoded.encode() == request.encode(), "\(request.kind)")
        }
    }

    @Test func everyTruncationAndByteChangeOfEveryRequestFrameIsDecodedOrRefusedNeverATrap() throws {
        var refused = 0
        for request in try Wire.Samples.requests() {
            let frame = Wire.frame(request.kind, request.encode())
            refused += mutations(of: frame, { _ = try Wire.Request.decode(frame: $0) }, "the \(request.kind) frame").refused
            // The payload alone, so that its length and count fields are changed with the frame's length still right.
            refused += mutations(of: request.encode(), { _ = try Wire.Request.decode(request.kind, $0) }, "the \(request.kind) payload").refused
        }
        #expect(refused > 0)
    }

    @Test func everyTruncationAndByteChangeOfEveryReplyIsDecodedOrRefusedNeverATrap() throws {
        for (kind, payload) in try Wire.Samples.replies() {
            #expect(decodesOrRefuses("the reply to \(kind)", { try Wire.Reply.decode(replyTo: kind, payload) }), "\(kind)")
            _ = mutations(of: payload, { try Wire.Reply.decode(replyTo: kind, $0) }, "the reply to \(kind)")
            _ = mutations(of: Wire.frame(.ok, payload), { _ = try Wire.decodeFrame($0) }, "the frame of the reply to \(kind)")
        }
    }

    /// Every payload of 0 or 1 byte, and of 2 bytes whose first is a flag, a small count or a
    /// varint's edge (all 65,536 two-byte payloads for every kind took 9 s here).
    @Test func everyShortPayloadIsDecodedOrRefusedForEveryKind() {
        let kinds = (0...255).compactMap { Wire.Kind(rawValue: UInt8($0)) }
        var payloads: [[UInt8]] = [[]]
        for a in 0...255 {
            payloads.append([UInt8(a)])
            guard [0, 1, 2, 3, 0x0C, 0x7F, 0x80, 0x81, 0xFF].contains(a) else { continue }
            for b in 0...255 { payloads.append([UInt8(a), UInt8(b)]) }
        }
        for kind in kinds {
            for payload in payloads {
                _ = decodesOrRefuses("a \(kind) request \(payload)", { _ = try Wire.Request.decode(kind, payload) })
                _ = decodesOrRefuses("a reply to \(kind) \(payload)", { try Wire.Reply.decode(replyTo: kind, payload) })
            }
        }
    }

    @Test func aHandshakeWithAnEmptyVersionRangeIsRefusedWithOneSentenceNamingIt() throws {
        // The payload of the reported 41-byte frame: versions 2 to 1, and the variant 1 to 0.
        for (low, high) in [(2, 1), (1, 0)] {
            let payload = [0x0C] + Array("archive-sync".utf8) + [UInt8(low), UInt8(high), 0x01, 0x10] + Array("ea3338e1d37bb02f".utf8)
            #expect {
                _ = try Wire.Request.decode(frame: Wire.frame(.hello, payload))
            } throws: { error in
                "\(error)" == "the handshake names protocol versions \(low) to \(high), an empty range (the lowest comes first)"
            }
        }
    }

    @Test func aBadHandshakeReplyNamesWhatWasWrongNotAVersionMismatch() throws {
        func reply(_ build: (inout WireWriter) -> Void) -> [UInt8] {
            var writer = WireWriter()
            build(&writer)
            return writer.bytes
        }
        let emptyRange = reply {
            $0.count(2)
            $0.count(1)
            $0.count(0)
        }
        #expect(throws: WireError.self) { _ = try Wire.HelloReply.decode(emptyRange) }
        let outside = reply {
            $0.count(1)
            $0.count(1)
            $0.count(2)
            $0.replica(peer)
            $0.string("/srv/store")
        }
        #expect {
            _ = try Wire.HelloReply.decode(outside)
        } throws: { "\($0)" == "it chooses protocol version 2, outside the versions 1 it names" }
        let notOffered = Wire.HelloReply(versions: 1...3, chosen: 3, store: (peer, "/srv/store"))
        #expect {
            _ = try notOffered.agreedVersion(offered: 1...2, name: "far:/srv/store")
        } throws: { "\($0)".contains("the far side chose protocol version 3, which this side did not offer (it speaks 1 to 2)") }
        let noneShared = Wire.HelloReply(versions: 3...4, chosen: nil, store: nil)
        #expect {
            _ = try noneShared.agreedVersion(offered: 1...2, name: "far:/srv/store")
        } throws: { "\($0)".contains("the far side speaks protocol version 3 to 4 and this side 1 to 2") }
    }
}
