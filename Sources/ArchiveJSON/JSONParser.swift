import Foundation

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
@inline(__always) func sextet(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "A")...UInt8(ascii: "Z"): return byte - UInt8(ascii: "A")
    case UInt8(ascii: "a")...UInt8(ascii: "z"): return byte - UInt8(ascii: "a") + 26
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0") + 52
    case UInt8(ascii: "+"): return 62
    case UInt8(ascii: "/"): return 63
    default: return nil
    }
}

@inline(__always) func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
    default: return nil
    }
}
