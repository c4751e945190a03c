import Foundation

/// The `Decoder` over a parsed document. One instance serves the whole document: a nested
/// value is decoded by pointing ``current`` at it for the length of its `init(from:)`.
final class ArchiveJSONDecoder: Decoder {
    private(set) var bytes: UnsafeRawBufferPointer
    private(set) var nodes: UnsafeBufferPointer<JSONNode>
    /// The value the `init(from:)` running now decodes.
    var current = 0
    /// Set when any answer was refused: the caller then asks JSONDecoder instead.
    private(set) var gaveUp = false

    init(bytes: UnsafeRawBufferPointer, nodes: UnsafeBufferPointer<JSONNode>) {
        self.bytes = bytes
        self.nodes = nodes
    }

    /// Forgets the document, whose memory is about to go.
    func finish() {
        bytes = UnsafeRawBufferPointer(start: nil, count: 0)
        nodes = UnsafeBufferPointer(start: nil, count: 0)
    }

    /// Gives up on the document: records it, and returns the error to throw.
    func unsupported() -> JSONUnsupported {
        gaveUp = true
        return JSONUnsupported()
    }

    /// The coding path is not tracked (it costs on every value): asking for it gives up.
    var codingPath: [any CodingKey] {
        gaveUp = true
        return []
    }

    /// The store's decoder has none.
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    @inline(__always) func node(_ index: Int) throws -> JSONNode {
        guard index >= 0, index < nodes.count else { throw unsupported() }
        return nodes[index]
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        try keyedContainer(at: current)
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try unkeyedContainer(at: current)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleValue(decoder: self, index: current)
    }

    func keyedContainer<Key: CodingKey>(at index: Int) throws -> KeyedDecodingContainer<Key> {
        guard try node(index).kind == .object else { throw unsupported() }
        return KeyedDecodingContainer(Keyed<Key>(decoder: self, index: index))
    }

    func unkeyedContainer(at index: Int) throws -> any UnkeyedDecodingContainer {
        let array = try node(index)
        guard array.kind == .array else { throw unsupported() }
        return Unkeyed(decoder: self, index: Int32(index), count: array.count)
    }

    // MARK: Values

    func decode<T: Decodable>(_ type: T.Type, at index: Int) throws -> T {
        // JSONDecoder's own rules for these (its default strategies), rather than their `init(from:)`.
        if type == Data.self { return try decodeBase64(at: index) as! T }
        if type == URL.self {
            guard let url = URL(string: try decodeString(at: index)) else { throw unsupported() }
            return url as! T
        }
        if type == Decimal.self { throw unsupported() }
        let saved = current
        current = index
        defer { current = saved }
        return try T(from: self)
    }

    func decodeNil(at index: Int) throws -> Bool {
        try node(index).kind == .null
    }

    func decodeBool(at index: Int) throws -> Bool {
        switch try node(index).kind {
        case .true: return true
        case .false: return false
        default: throw unsupported()
        }
    }

    func decodeString(at index: Int) throws -> String {
        let string = try node(index)
        guard string.kind == .string else { throw unsupported() }
        let text = UnsafeRawBufferPointer(rebasing: bytes[Int(string.start)..<Int(string.end)])
        // The parser checked the UTF-8 and the escapes.
        if string.flags & JSONNode.escaped == 0 { return String(decoding: text, as: UTF8.self) }
        return unescape(text)
    }

    private func unescape(_ text: UnsafeRawBufferPointer) -> String {
        var utf8: [UInt8] = []
        utf8.reserveCapacity(text.count)
        var position = 0
        func unit(at offset: Int) -> UInt32 {
            var value: UInt32 = 0
            for index in offset..<offset + 4 { value = value << 4 | UInt32(hexValue(text[index]) ?? 0) }
            return value
        }
        while position < text.count {
            let byte = text[position]
            guard byte == UInt8(ascii: "\\") else {
                utf8.append(byte)
                position += 1
                continue
            }
            let escape = text[position + 1]
            position += 2
            switch escape {
            case UInt8(ascii: "b"): utf8.append(0x08)
            case UInt8(ascii: "f"): utf8.append(0x0C)
            case UInt8(ascii: "n"): utf8.append(0x0A)
            case UInt8(ascii: "r"): utf8.append(0x0D)
            case UInt8(ascii: "t"): utf8.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = unit(at: position)
                position += 4
                if scalar & 0xFC00 == 0xD800 {
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (unit(at: position + 2) - 0xDC00)
                    position += 6
                }
                utf8.append(contentsOf: UTF8.encode(Unicode.Scalar(scalar) ?? "\u{FFFD}")!)
            default: utf8.append(escape)  // " \ /
            }
        }
        return String(decoding: utf8, as: UTF8.self)
    }

    /// Canonical base64 only (padded, no bits set past the data), which any decoder, and
    /// JSONDecoder's, reads the same way; anything else is left to JSONDecoder.
    func decodeBase64(at index: Int) throws -> Data {
        let string = try node(index)
        guard string.kind == .string, string.flags == 0, (string.end - string.start) % 4 == 0 else { throw unsupported() }
        let text = UnsafeRawBufferPointer(rebasing: bytes[Int(string.start)..<Int(string.end)])
        var data = Data(capacity: text.count / 4 * 3)
        var position = 0
        while position < text.count {
            let last = position + 4 == text.count
            guard let a = sextet(text[position]), let b = sextet(text[position + 1]) else { throw unsupported() }
            let c = sextet(text[position + 2])
            let d = sextet(text[position + 3])
            data.append(a << 2 | b >> 4)
            if let c, let d {
                data.append(b << 4 | c >> 2)
                data.append(c << 6 | d)
            } else if let c, last, text[position + 3] == UInt8(ascii: "="), c & 0x03 == 0 {
                data.append(b << 4 | c >> 2)
            } else if last, text[position + 2] == UInt8(ascii: "="), text[position + 3] == UInt8(ascii: "="), b & 0x0F == 0 {
                // one byte
            } else {
                throw unsupported()
            }
            position += 4
        }
        return data
    }

    func decodeInteger<T: FixedWidthInteger>(_ type: T.Type, at index: Int) throws -> T {
        let number = try node(index)
        guard number.kind == .number, number.flags & JSONNode.integer != 0 else { throw unsupported() }
        var position = Int(number.start)
        let end = Int(number.end)
        let negative = bytes[position] == UInt8(ascii: "-")
        if negative { position += 1 }
        guard end - position <= 20 else { throw unsupported() }
        var magnitude: UInt64 = 0
        while position < end {
            let (tens, overflow) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, carry) = tens.addingReportingOverflow(UInt64(bytes[position] - UInt8(ascii: "0")))
            guard !overflow, !carry else { throw unsupported() }
            magnitude = sum
            position += 1
        }
        if !negative {
            guard let value = T(exactly: magnitude) else { throw unsupported() }
            return value
        }
        guard magnitude != 0, magnitude - 1 <= UInt64(Int64.max), let value = T(exactly: -Int64(magnitude - 1) - 1) else { throw unsupported() }
        return value
    }

    func decodeFloatingPoint<T: BinaryFloatingPoint & LosslessStringConvertible>(_ type: T.Type, at index: Int) throws -> T {
        let number = try node(index)
        guard number.kind == .number else { throw unsupported() }
        let start = Int(number.start)
        let end = Int(number.end)
        // Integers of up to 15 digits are exact in a Double, as strtod would give them (but
        // not -0, which is -0.0).
        if T.self == Double.self, number.flags & JSONNode.integer != 0, end - start <= 15, bytes[start] != UInt8(ascii: "-") {
            var value: Int64 = 0
            for position in start..<end { value = value * 10 + Int64(bytes[position] - UInt8(ascii: "0")) }
            return T(value)
        }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self)
        // JSONDecoder refuses what overflows to infinity, and what underflows to zero.
        guard let value = T(text), value.isFinite else { throw unsupported() }
        if value == 0 {
            // JSONDecoder refuses `0e1` to `0E9` (those three bytes exactly) as a floating-point
            // number, though not `0e0`, `0e+1`, `0e10` or `-0e1` (found by Fuzz/fuzz-json).
            if end - start == 3, bytes[start] == UInt8(ascii: "0"), bytes[start + 1] | 0x20 == UInt8(ascii: "e"),
                (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(bytes[start + 2])
            {
                throw unsupported()
            }
            for position in start..<end {
                let byte = bytes[position]
                if byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") { break }
                if byte >= UInt8(ascii: "1"), byte <= UInt8(ascii: "9") { throw unsupported() }
            }
        }
        return value
    }
}
