import Foundation

extension Document {
    /// Reads JSON (RFC 8259, UTF-8) into a tree.
    ///
    /// Refuses, with a ``DocumentError``, what `JSONDecoder` refuses (bad syntax, bytes that are
    /// not UTF-8, a number no `Double` holds such as `1e400`) and also an object with the same
    /// member name twice (`JSONDecoder` would read only one of them) and nesting deeper than
    /// `limits.depth`.
    public init(json data: Data, limits: DocumentLimits = .standard) throws(DocumentError) {
        var reader = JSONDocumentReader(bytes: [UInt8](data), limits: limits)
        self = try reader.readDocument()
    }
}

/// A strict recursive-descent JSON reader whose recursion `limits.depth` bounds.
struct JSONDocumentReader {
    let bytes: [UInt8]
    let limits: DocumentLimits
    var position = 0

    init(bytes: [UInt8], limits: DocumentLimits) {
        self.bytes = bytes
        self.limits = limits
    }

    mutating func readDocument() throws(DocumentError) -> Document {
        let document = try readValue(depth: 0)
        skipWhitespace()
        guard position == bytes.count else { throw DocumentError("JSON text continues after its value", at: position) }
        return document
    }

    private mutating func skipWhitespace() {
        while position < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[position]) { position += 1 }
    }

    private mutating func expect(_ literal: String, _ value: Document) throws(DocumentError) -> Document {
        let utf8 = Array(literal.utf8)
        guard bytes[position...].starts(with: utf8) else { throw DocumentError("JSON text has an unknown word", at: position) }
        position += utf8.count
        return value
    }

    private mutating func readValue(depth: Int) throws(DocumentError) -> Document {
        skipWhitespace()
        guard position < bytes.count else { throw DocumentError("JSON text ends where a value was expected", at: position) }
        switch bytes[position] {
        case UInt8(ascii: "{"): return try readObject(depth: depth + 1)
        case UInt8(ascii: "["): return try readArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try readString())
        case UInt8(ascii: "t"): return try expect("true", .bool(true))
        case UInt8(ascii: "f"): return try expect("false", .bool(false))
        case UInt8(ascii: "n"): return try expect("null", .null)
        default: return .number(try readNumber())
        }
    }

    private func checkDepth(_ depth: Int) throws(DocumentError) {
        guard depth <= limits.depth else { throw DocumentError("JSON text nests deeper than \(limits.depth) levels", at: position) }
    }

    private mutating func readObject(depth: Int) throws(DocumentError) -> Document {
        try checkDepth(depth)
        position += 1
        var members: [String: Document] = [:]
        skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "}") {
            position += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else {
                throw DocumentError("JSON object has a member without a quoted name", at: position)
            }
            let nameOffset = position
            let name = try readString()
            skipWhitespace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else {
                throw DocumentError("JSON object lacks a ':' after a name", at: position)
            }
            position += 1
            let value = try readValue(depth: depth)
            guard members.updateValue(value, forKey: name) == nil else {
                throw DocumentError("JSON object has the member \(DocumentPath.quoted(name)) twice", at: nameOffset)
            }
            skipWhitespace()
            guard position < bytes.count else { throw DocumentError("JSON text ends inside an object", at: position) }
            position += 1
            if bytes[position - 1] == UInt8(ascii: "}") { return .object(members) }
            guard bytes[position - 1] == UInt8(ascii: ",") else { throw DocumentError("JSON object lacks a ',' between members", at: position - 1) }
        }
    }

    private mutating func readArray(depth: Int) throws(DocumentError) -> Document {
        try checkDepth(depth)
        position += 1
        var elements: [Document] = []
        skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "]") {
            position += 1
            return .array(elements)
        }
        while true {
            elements.append(try readValue(depth: depth))
            skipWhitespace()
            guard position < bytes.count else { throw DocumentError("JSON text ends inside an array", at: position) }
            position += 1
            if bytes[position - 1] == UInt8(ascii: "]") { return .array(elements) }
            guard bytes[position - 1] == UInt8(ascii: ",") else { throw DocumentError("JSON array lacks a ',' between elements", at: position - 1) }
        }
    }

    private mutating func readString() throws(DocumentError) -> String {
        position += 1
        var scalars = String.UnicodeScalarView()
        var runStart = position
        func flushRun(_ end: Int) throws(DocumentError) {
            guard let run = String(validating: bytes[runStart..<end], as: UTF8.self) else {
                throw DocumentError("JSON string is not valid UTF-8", at: runStart)
            }
            scalars.append(contentsOf: run.unicodeScalars)
        }
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                try flushRun(position)
                position += 1
                return String(scalars)
            }
            guard byte >= 0x20 else { throw DocumentError("JSON string has an unescaped control character", at: position) }
            guard byte == UInt8(ascii: "\\") else {
                position += 1
                continue
            }
            try flushRun(position)
            scalars.append(try readEscape())
            runStart = position
        }
        throw DocumentError("JSON text ends inside a string", at: position)
    }

    /// One escape after its backslash; a surrogate pair is one escape of twelve bytes.
    private mutating func readEscape() throws(DocumentError) -> Unicode.Scalar {
        let start = position
        position += 1
        guard position < bytes.count else { throw DocumentError("JSON text ends inside an escape", at: start) }
        position += 1
        switch bytes[position - 1] {
        case UInt8(ascii: "\""): return "\""
        case UInt8(ascii: "\\"): return "\\"
        case UInt8(ascii: "/"): return "/"
        case UInt8(ascii: "b"): return "\u{08}"
        case UInt8(ascii: "f"): return "\u{0C}"
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "u"):
            let high = try readHex4(escapeAt: start)
            if let scalar = Unicode.Scalar(high) { return scalar }
            guard (0xD800..<0xDC00).contains(high), bytes[position...].starts(with: Array("\\u".utf8)) else {
                throw DocumentError("JSON string has a lone surrogate", at: start)
            }
            position += 2
            let low = try readHex4(escapeAt: start)
            guard (0xDC00..<0xE000).contains(low), let scalar = Unicode.Scalar(0x10000 + (high - 0xD800) << 10 + (low - 0xDC00)) else {
                throw DocumentError("JSON string has a lone surrogate", at: start)
            }
            return scalar
        default: throw DocumentError("JSON string has an unknown escape", at: start)
        }
    }

    private mutating func readHex4(escapeAt start: Int) throws(DocumentError) -> UInt32 {
        guard position + 4 <= bytes.count, let value = UInt32(String(decoding: bytes[position..<position + 4], as: UTF8.self), radix: 16),
            bytes[position..<position + 4].allSatisfy({ $0 != UInt8(ascii: "+") && $0 != UInt8(ascii: "-") })
        else { throw DocumentError("JSON string has a \\u escape without four hex digits", at: start) }
        position += 4
        return value
    }

    /// RFC 8259's grammar; the value as ``DocumentNumber`` says.
    private mutating func readNumber() throws(DocumentError) -> DocumentNumber {
        let start = position
        func digits() -> Range<Int> {
            let first = position
            while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) { position += 1 }
            return first..<position
        }
        let negative = position < bytes.count && bytes[position] == UInt8(ascii: "-")
        if negative { position += 1 }
        let integer = digits()
        guard !integer.isEmpty, integer.count == 1 || bytes[integer.lowerBound] != UInt8(ascii: "0") else {
            throw DocumentError("JSON text has a malformed number or an unknown word", at: start)
        }
        var fraction = position..<position
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
            position += 1
            fraction = digits()
            guard !fraction.isEmpty else { throw DocumentError("JSON number has no digit after its '.'", at: start) }
        }
        var exponent = 0
        if position < bytes.count, bytes[position] | 0x20 == UInt8(ascii: "e") {
            position += 1
            var exponentSign = 1
            if position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-") {
                exponentSign = bytes[position] == UInt8(ascii: "-") ? -1 : 1
                position += 1
            }
            let exponentDigits = digits()
            guard !exponentDigits.isEmpty else { throw DocumentError("JSON number has no digit in its exponent", at: start) }
            // Saturate: past a million, the value is 0, infinite, or not an integer anyway.
            exponent = exponentSign * bytes[exponentDigits].reduce(0) { min($0 * 10 + Int($1 - 48), 1_000_000) }
        }
        if let exact = Self.exactInteger(negative: negative, digits: Array(bytes[integer] + bytes[fraction]), exponent: exponent - fraction.count) {
            return exact
        }
        guard let real = Double(String(decoding: bytes[start..<position], as: UTF8.self)), real.isFinite else {
            throw DocumentError("JSON number is too large for a Double", at: start)
        }
        return DocumentNumber(real)
    }

    /// The integer `±digits × 10^exponent`, when it is one that fits `Int64` or `UInt64`.
    private static func exactInteger(negative: Bool, digits: [UInt8], exponent: Int) -> DocumentNumber? {
        var significant = digits.drop { $0 == UInt8(ascii: "0") }
        var exponent = exponent
        while exponent < 0, significant.last == UInt8(ascii: "0") {
            significant.removeLast()
            exponent += 1
        }
        if significant.isEmpty { return DocumentNumber(Int64(0)) }
        guard exponent >= 0, significant.count + exponent <= 20 else { return nil }
        var magnitude: UInt64 = 0
        for digit in Array(significant) + Array(repeating: UInt8(ascii: "0"), count: exponent) {
            let (times10, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(UInt64(digit - 48))
            guard !overflow1, !overflow2 else { return nil }
            magnitude = sum
        }
        guard negative else { return DocumentNumber(magnitude) }
        guard magnitude <= UInt64(Int64.max) + 1 else { return nil }
        return DocumentNumber(magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude))
    }
}
