import Foundation

// A decoder for the JSON archives the store writes, which gives exactly the values
// Foundation's `JSONDecoder` (default strategies: dates deferred to `Date`, data as base64,
// non-conforming floats refused, keys as they are) gives, in about a third of its time for
// models such as the benchmarks' Person.
//
// It answers only what it can answer for certain and gives up on everything else: any
// syntax error anywhere, a non-ASCII or escaped key it would have to compare, a number that
// does not fit, base64 `Data` that is not canonical, `Decimal`, a super decoder, a coding
// path asked for, any error a model's `init(from:)` meets. Once it gives up on a document,
// the whole document is decoded again by JSONDecoder, whose value or error is the answer. So
// a model that catches an error (`try?`) cannot see a different outcome here than it would
// with JSONDecoder: every error is JSONDecoder's own.

/// Decodes JSON the way the store's shared `JSONDecoder` does, faster; nil when it gave up and
/// JSONDecoder must decode `data` instead.
func decodeArchiveJSON<T: Decodable>(_ type: T.Type, from data: Data) -> T? {
    data.withUnsafeBytes { bytes -> T? in
        guard bytes.count > 0, bytes.count < Int(Int32.max) else { return nil }
        var parser = JSONParser(bytes: bytes)
        defer { parser.nodes.deallocate() }
        guard (try? parser.parseDocument()) != nil else { return nil }
        let decoder = ArchiveJSONDecoder(bytes: bytes, nodes: UnsafeBufferPointer(start: parser.nodes, count: parser.count))
        // Whatever escapes the call (a kept decoder or container) finds an empty document.
        defer { decoder.finish() }
        guard let value = try? decoder.decode(type, at: 0), !decoder.gaveUp else { return nil }
        return value
    }
}

/// One value of the document: containers are followed by their members (an object's as key,
/// value, key, value…), and `after` is the index just past the value and its members.
struct JSONNode {
    enum Kind: UInt8 {
        case object, array, string, number, `true`, `false`, null
    }

    var kind: Kind
    /// Strings: ``escaped``, ``nonASCII``. Numbers: ``integer``. Objects: ``plainKeys``.
    var flags: UInt8
    /// Strings: the bytes between the quotes. Numbers: the number's bytes.
    var start: Int32
    var end: Int32
    /// Members (objects: key-value pairs).
    var count: Int32
    var after: Int32

    static let escaped: UInt8 = 1
    static let nonASCII: UInt8 = 2
    static let integer: UInt8 = 4
    static let plainKeys: UInt8 = 8
}

/// The reason for giving up; never seen outside this file.
struct JSONUnsupported: Error {}

/// A strict RFC 8259 parser into ``JSONNode``s: UTF-8 only, no byte order mark, checked
/// UTF-8 and escapes in every string, nesting to a depth well below JSONDecoder's limit.
struct JSONParser {
    let bytes: UnsafeRawBufferPointer
    /// Grown by doubling: a document of n bytes has at most n values, but usually far fewer.
    private(set) var nodes: UnsafeMutablePointer<JSONNode>
    private var capacity: Int
    var count = 0
    var position = 0

    static let maximumDepth = 100

    init(bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
        capacity = min(bytes.count, 1024)
        nodes = .allocate(capacity: capacity)
    }

    mutating func parseDocument() throws {
        try parseValue(depth: 0)
        skipWhitespace()
        guard position == bytes.count else { throw JSONUnsupported() }
    }

    @inline(__always) func peek() throws -> UInt8 {
        guard position < bytes.count else { throw JSONUnsupported() }
        return bytes[position]
    }

    @inline(__always) mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    mutating func append(_ kind: JSONNode.Kind, flags: UInt8 = 0, start: Int = 0, end: Int = 0) -> Int {
        if count == capacity {
            let grown = UnsafeMutablePointer<JSONNode>.allocate(capacity: capacity * 2)
            grown.moveInitialize(from: nodes, count: count)
            nodes.deallocate()
            nodes = grown
            capacity *= 2
        }
        (nodes + count).initialize(to: JSONNode(kind: kind, flags: flags, start: Int32(start), end: Int32(end), count: 0, after: Int32(count + 1)))
        count += 1
        return count - 1
    }

    mutating func parseValue(depth: Int) throws {
        skipWhitespace()
        switch try peek() {
        case UInt8(ascii: "{"): try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): try parseString()
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try parseNumber()
        case UInt8(ascii: "t"): try parseLiteral("true", .true)
        case UInt8(ascii: "f"): try parseLiteral("false", .false)
        case UInt8(ascii: "n"): try parseLiteral("null", .null)
        default: throw JSONUnsupported()
        }
    }

    mutating func parseObject(depth: Int) throws {
        guard depth <= Self.maximumDepth else { throw JSONUnsupported() }
        let index = append(.object, flags: JSONNode.plainKeys)
        position += 1
        skipWhitespace()
        var members: Int32 = 0
        if try peek() == UInt8(ascii: "}") {
            position += 1
        } else {
            while true {
                skipWhitespace()
                guard try peek() == UInt8(ascii: "\"") else { throw JSONUnsupported() }
                let key = try parseString()
                if nodes[key].flags != 0 { nodes[index].flags = 0 }
                skipWhitespace()
                guard try peek() == UInt8(ascii: ":") else { throw JSONUnsupported() }
                position += 1
                try parseValue(depth: depth)
                members += 1
                skipWhitespace()
                let next = try peek()
                position += 1
                if next == UInt8(ascii: "}") { break }
                guard next == UInt8(ascii: ",") else { throw JSONUnsupported() }
            }
        }
        nodes[index].count = members
        nodes[index].after = Int32(count)
    }

    mutating func parseArray(depth: Int) throws {
        guard depth <= Self.maximumDepth else { throw JSONUnsupported() }
        let index = append(.array)
        position += 1
        skipWhitespace()
        var elements: Int32 = 0
        if try peek() == UInt8(ascii: "]") {
            position += 1
        } else {
            while true {
                try parseValue(depth: depth)
                elements += 1
                skipWhitespace()
                let next = try peek()
                position += 1
                if next == UInt8(ascii: "]") { break }
                guard next == UInt8(ascii: ",") else { throw JSONUnsupported() }
            }
        }
        nodes[index].count = elements
        nodes[index].after = Int32(count)
    }

    mutating func parseLiteral(_ word: StaticString, _ kind: JSONNode.Kind) throws {
        let length = word.utf8CodeUnitCount
        guard bytes.count - position >= length else { throw JSONUnsupported() }
        for offset in 0..<length where bytes[position + offset] != word.utf8Start[offset] { throw JSONUnsupported() }
        _ = append(kind)
        position += length
    }

    @inline(__always) mutating func digits() -> Int {
        let first = position
        while position < bytes.count, bytes[position] &- UInt8(ascii: "0") < 10 { position += 1 }
        return position - first
    }

    mutating func parseNumber() throws {
        let start = position
        var integer = true
        if bytes[position] == UInt8(ascii: "-") { position += 1 }
        if try peek() == UInt8(ascii: "0") {
            position += 1
        } else {
            guard digits() > 0 else { throw JSONUnsupported() }
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
            integer = false
            position += 1
            guard digits() > 0 else { throw JSONUnsupported() }
        }
        if position < bytes.count, bytes[position] | 0x20 == UInt8(ascii: "e") {
            integer = false
            position += 1
            if position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-") { position += 1 }
            guard digits() > 0 else { throw JSONUnsupported() }
        }
        _ = append(.number, flags: integer ? JSONNode.integer : 0, start: start, end: position)
    }

    /// Checks the string at `position` (its opening quote), leaves `position` past its closing
    /// quote, and returns its node.
    @discardableResult
    mutating func parseString() throws -> Int {
        position += 1
        let start = position
        var flags: UInt8 = 0
        while true {
            let byte = try peek()
            if byte == UInt8(ascii: "\"") { break }
            if byte == UInt8(ascii: "\\") {
                flags |= JSONNode.escaped
                position += 1
                switch try peek() {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"), UInt8(ascii: "n"),
                    UInt8(ascii: "r"), UInt8(ascii: "t"):
                    position += 1
                case UInt8(ascii: "u"):
                    let unit = try hexEscape()
                    if unit & 0xFC00 == 0xD800 {
                        // A high surrogate must be followed by an escaped low one.
                        guard try peek() == UInt8(ascii: "\\") else { throw JSONUnsupported() }
                        position += 1
                        guard try peek() == UInt8(ascii: "u"), try hexEscape() & 0xFC00 == 0xDC00 else { throw JSONUnsupported() }
                    } else if unit & 0xFC00 == 0xDC00 {
                        throw JSONUnsupported()
                    }
                default:
                    throw JSONUnsupported()
                }
            } else if byte < 0x20 {
                throw JSONUnsupported()
            } else if byte < 0x80 {
                position += 1
            } else {
                flags |= JSONNode.nonASCII
                try checkUTF8Sequence()
            }
        }
        let node = append(.string, flags: flags, start: start, end: position)
        position += 1
        return node
    }

    /// Reads `uXXXX` at `position` (the `u`) and returns the code unit.
    mutating func hexEscape() throws -> UInt16 {
        guard bytes.count - position >= 5 else { throw JSONUnsupported() }
        var unit: UInt16 = 0
        for offset in 1...4 {
            guard let digit = hexValue(bytes[position + offset]) else { throw JSONUnsupported() }
            unit = unit << 4 | UInt16(digit)
        }
        position += 5
        return unit
    }

    /// Checks one multi-byte UTF-8 sequence at `position` (well-formed: no overlong forms, no
    /// surrogates, nothing above U+10FFFF) and steps over it.
    mutating func checkUTF8Sequence() throws {
        let lead = bytes[position]
        let length: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: (length, low) = (3, 0xA0)
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: (length, high) = (3, 0x9F)
        case 0xF0: (length, low) = (4, 0x90)
        case 0xF1...0xF3: length = 4
        case 0xF4: (length, high) = (4, 0x8F)
        default: throw JSONUnsupported()
        }
        guard bytes.count - position >= length else { throw JSONUnsupported() }
        guard (low...high).contains(bytes[position + 1]) else { throw JSONUnsupported() }
        for offset in 2..<length where bytes[position + offset] & 0xC0 != 0x80 { throw JSONUnsupported() }
        position += length
    }
}

/// The value of a base64 digit (`A-Z a-z 0-9 + /`).
@inline(__always) private func sextet(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "A")...UInt8(ascii: "Z"): return byte - UInt8(ascii: "A")
    case UInt8(ascii: "a")...UInt8(ascii: "z"): return byte - UInt8(ascii: "a") + 26
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0") + 52
    case UInt8(ascii: "+"): return 62
    case UInt8(ascii: "/"): return 63
    default: return nil
    }
}

@inline(__always) private func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
    default: return nil
    }
}

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
            for position in start..<end {
                let byte = bytes[position]
                if byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") { break }
                if byte >= UInt8(ascii: "1"), byte <= UInt8(ascii: "9") { throw unsupported() }
            }
        }
        return value
    }
}

// MARK: - Containers

extension ArchiveJSONDecoder {
    struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let decoder: ArchiveJSONDecoder
        let index: Int

        var codingPath: [any CodingKey] { decoder.codingPath }

        /// The keys, in the document's order; gives up (an empty list) unless every key is plain
        /// ASCII and none repeats.
        var allKeys: [Key] {
            guard let object = try? decoder.node(index), object.flags & JSONNode.plainKeys != 0 else {
                _ = decoder.unsupported()
                return []
            }
            var names: [String] = []
            names.reserveCapacity(Int(object.count))
            var member = index + 1
            for _ in 0..<object.count {
                guard let name = try? decoder.decodeString(at: member), let value = try? decoder.node(member + 1) else { return [] }
                names.append(name)
                member = Int(value.after)
            }
            if Set(names).count != names.count {
                _ = decoder.unsupported()
                return []
            }
            return names.compactMap { Key(stringValue: $0) }
        }

        /// The value's node for `key`: the first one with that name, as JSONDecoder takes. Gives
        /// up when a comparison of bytes could disagree with a comparison of `String`s
        /// (escaped or non-ASCII names).
        func value(for key: Key) throws -> Int? {
            let object = try decoder.node(index)
            guard object.flags & JSONNode.plainKeys != 0 else { throw decoder.unsupported() }
            var name = key.stringValue
            return try name.withUTF8 { name -> Int? in
                for byte in name where byte >= 0x80 { throw decoder.unsupported() }
                var member = index + 1
                for _ in 0..<object.count {
                    let keyNode = try decoder.node(member)
                    let value = try decoder.node(member + 1)
                    if Int(keyNode.end - keyNode.start) == name.count,
                        name.count == 0 || memcmp(decoder.bytes.baseAddress! + Int(keyNode.start), name.baseAddress!, name.count) == 0
                    {
                        return member + 1
                    }
                    member = Int(value.after)
                }
                return nil
            }
        }

        func require(_ key: Key) throws -> Int {
            guard let index = try value(for: key) else { throw decoder.unsupported() }
            return index
        }

        func contains(_ key: Key) -> Bool {
            (try? value(for: key)) != nil
        }

        func decodeNil(forKey key: Key) throws -> Bool { try decoder.decodeNil(at: require(key)) }
        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try decoder.decodeBool(at: require(key)) }
        func decode(_ type: String.Type, forKey key: Key) throws -> String { try decoder.decodeString(at: require(key)) }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try decoder.decodeFloatingPoint(type, at: require(key)) }
        func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try decoder.decodeFloatingPoint(type, at: require(key)) }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try decoder.decodeInteger(type, at: require(key)) }
        func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try decoder.decodeInteger(type, at: require(key)) }
        func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try decoder.decodeInteger(type, at: require(key)) }
        func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try decoder.decodeInteger(type, at: require(key)) }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try decoder.decodeInteger(type, at: require(key)) }
        func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try decoder.decodeInteger(type, at: require(key)) }
        func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try decoder.decodeInteger(type, at: require(key)) }
        func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try decoder.decodeInteger(type, at: require(key)) }
        func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try decoder.decodeInteger(type, at: require(key)) }
        func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try decoder.decodeInteger(type, at: require(key)) }
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try decoder.decode(type, at: require(key)) }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
            try decoder.keyedContainer(at: require(key))
        }

        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            try decoder.unkeyedContainer(at: require(key))
        }

        func superDecoder() throws -> any Decoder { throw decoder.unsupported() }
        func superDecoder(forKey key: Key) throws -> any Decoder { throw decoder.unsupported() }
    }

    /// Three words (the size an existential holds without a box of its own).
    struct Unkeyed: UnkeyedDecodingContainer {
        let decoder: ArchiveJSONDecoder
        let index: Int32
        let total: Int32
        private var next: Int32
        private var decoded: Int32 = 0

        init(decoder: ArchiveJSONDecoder, index: Int32, count: Int32) {
            self.decoder = decoder
            self.index = index
            self.total = count
            next = index + 1
        }

        var codingPath: [any CodingKey] { decoder.codingPath }
        var count: Int? { Int(total) }
        var isAtEnd: Bool { decoded >= total }
        var currentIndex: Int { Int(decoded) }

        /// Decodes the next element with `body` and moves past it (only when it succeeded).
        private mutating func next<T>(_ body: (ArchiveJSONDecoder, Int) throws -> T) throws -> T {
            guard decoded < total else { throw decoder.unsupported() }
            let element = Int(next)
            let value = try body(decoder, element)
            next = try decoder.node(element).after
            decoded += 1
            return value
        }

        mutating func decodeNil() throws -> Bool {
            guard decoded < total else { throw decoder.unsupported() }
            guard try decoder.decodeNil(at: Int(next)) else { return false }
            _ = try next { _, _ in () }
            return true
        }

        mutating func decode(_ type: Bool.Type) throws -> Bool { try next { try $0.decodeBool(at: $1) } }
        mutating func decode(_ type: String.Type) throws -> String { try next { try $0.decodeString(at: $1) } }
        mutating func decode(_ type: Double.Type) throws -> Double { try next { try $0.decodeFloatingPoint(type, at: $1) } }
        mutating func decode(_ type: Float.Type) throws -> Float { try next { try $0.decodeFloatingPoint(type, at: $1) } }
        mutating func decode(_ type: Int.Type) throws -> Int { try next { try $0.decodeInteger(type, at: $1) } }
        mutating func decode(_ type: Int8.Type) throws -> Int8 { try next { try $0.decodeInteger(type, at: $1) } }
        mutating func decode(_ type: Int16.Type) throws -> Int16 { try next { try $0.decodeInteger(type, at: $1) } }
        mutating func decode(_ type: Int32.Type) throws -> Int32 { try next { try $0.decodeInteger(type, at: $1) } }
        mutating func decode(_ type: Int64.Type) throws -> Int64 { try next { try $0.decodeInteger(type, at: $1) } }
        mutating func decode(_ type: UInt.Type) throws -> UInt { try next { try $0.decodeInteger(type, at: $1) } }
        mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next { try $0.decodeInteger(type, at: $1) } }
        mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next { try $0.decodeInteger(type, at: $1) } }
        mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next { try $0.decodeInteger(type, at: $1) } }
        mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next { try $0.decodeInteger(type, at: $1) } }
        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next { try $0.decode(type, at: $1) } }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
            try next { try $0.keyedContainer(at: $1) }
        }

        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            try next { try $0.unkeyedContainer(at: $1) }
        }

        mutating func superDecoder() throws -> any Decoder { throw decoder.unsupported() }
    }

    struct SingleValue: SingleValueDecodingContainer {
        let decoder: ArchiveJSONDecoder
        let index: Int

        var codingPath: [any CodingKey] { decoder.codingPath }

        func decodeNil() -> Bool { (try? decoder.decodeNil(at: index)) ?? false }
        func decode(_ type: Bool.Type) throws -> Bool { try decoder.decodeBool(at: index) }
        func decode(_ type: String.Type) throws -> String { try decoder.decodeString(at: index) }
        func decode(_ type: Double.Type) throws -> Double { try decoder.decodeFloatingPoint(type, at: index) }
        func decode(_ type: Float.Type) throws -> Float { try decoder.decodeFloatingPoint(type, at: index) }
        func decode(_ type: Int.Type) throws -> Int { try decoder.decodeInteger(type, at: index) }
        func decode(_ type: Int8.Type) throws -> Int8 { try decoder.decodeInteger(type, at: index) }
        func decode(_ type: Int16.Type) throws -> Int16 { try decoder.decodeInteger(type, at: index) }
        func decode(_ type: Int32.Type) throws -> Int32 { try decoder.decodeInteger(type, at: index) }
        func decode(_ type: Int64.Type) throws -> Int64 { try decoder.decodeInteger(type, at: index) }
        func decode(_ type: UInt.Type) throws -> UInt { try decoder.decodeInteger(type, at: index) }
        func decode(_ type: UInt8.Type) throws -> UInt8 { try decoder.decodeInteger(type, at: index) }
        func decode(_ type: UInt16.Type) throws -> UInt16 { try decoder.decodeInteger(type, at: index) }
        func decode(_ type: UInt32.Type) throws -> UInt32 { try decoder.decodeInteger(type, at: index) }
        func decode(_ type: UInt64.Type) throws -> UInt64 { try decoder.decodeInteger(type, at: index) }
        func decode<T: Decodable>(_ type: T.Type) throws -> T { try decoder.decode(type, at: index) }
    }
}
