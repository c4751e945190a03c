import Foundation

/// An object's contents as a tree, whatever model it holds: what a three-way merge compares.
///
/// Read one from a store's bytes with ``init(json:limits:)`` or ``init(propertyList:limits:)``;
/// write it back with ``jsonData()`` or ``propertyListData()``.
///
/// Equality is *exact* where exactness matters for agreeing on bytes: strings and member names
/// compare by their Unicode scalars (two spellings of `é` differ), and numbers by their
/// canonical ``DocumentNumber`` (1 and 1.0 are equal, as the store's decoders read both into
/// the same `Int` or `Double`). Member order never matters.
public enum Document: Sendable, Equatable, CustomStringConvertible {
    /// A JSON object or property-list dictionary. Names are unique under Swift's `String`
    /// equality, as the store's decoders look members up by it.
    case object([String: Document])
    /// An array: a value as a whole for merging.
    case array([Document])
    /// A string, compared by its Unicode scalars.
    case string(String)
    /// A number in its canonical form.
    case number(DocumentNumber)
    /// `true` or `false` (never equal to a number).
    case bool(Bool)
    /// JSON's `null` (property lists have none).
    case null
    /// A property-list date (JSON has none).
    case date(Date)
    /// Property-list data (JSON has none).
    case data(Data)

    /// Exact equality: see the type's description.
    public static func == (lhs: Document, rhs: Document) -> Bool {
        switch (lhs, rhs) {
        case (.object(let a), .object(let b)):
            return a.count == b.count && a.allSatisfy { name, value in b.member(spelled: name) == value }
        case (.array(let a), .array(let b)): return a.elementsEqual(b)
        case (.string(let a), .string(let b)): return a.unicodeScalars.elementsEqual(b.unicodeScalars)
        case (.number(let a), .number(let b)): return a == b
        case (.bool(let a), .bool(let b)): return a == b
        case (.null, .null): return true
        case (.date(let a), .date(let b)): return a.timeIntervalSinceReferenceDate.bitPattern == b.timeIntervalSinceReferenceDate.bitPattern
        case (.data(let a), .data(let b)): return a == b
        default: return false
        }
    }

    /// What kind of value this is, for messages and diffs: `object`, `array`, `string`, ...
    public var kind: String {
        switch self {
        case .object: "object"
        case .array: "array"
        case .string: "string"
        case .number: "number"
        case .bool: "bool"
        case .null: "null"
        case .date: "date"
        case .data: "data"
        }
    }

    /// A short JSON-like rendering for people (diffs, reports); not a codec.
    public var description: String {
        switch self {
        case .object(let members):
            let inner = members.sorted { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }
                .map { "\(DocumentPath.quoted($0.key)): \($0.value)" }
            return "{" + inner.joined(separator: ", ") + "}"
        case .array(let elements): return "[" + elements.map(\.description).joined(separator: ", ") + "]"
        case .string(let text): return DocumentPath.quoted(text)
        case .number(let number): return number.description
        case .bool(let flag): return flag ? "true" : "false"
        case .null: return "null"
        case .date(let date): return date.formatted(.iso8601)
        case .data(let data): return "<\(data.count) bytes>"
        }
    }
}

extension Dictionary where Key == String, Value == Document {
    /// The member whose name is spelled exactly `name` (same Unicode scalars), or nil: a lookup
    /// by Swift's equality would also find a canonically equivalent spelling.
    func member(spelled name: String) -> Document? {
        guard let index = index(forKey: name), self[index].key.unicodeScalars.elementsEqual(name.unicodeScalars) else { return nil }
        return self[index].value
    }
}

/// A number as the store's decoders read it: an exact integer when its value is one that fits
/// `Int64` or `UInt64` (`1`, `1.0`, `1e2`, `9007199254740993.0`), otherwise its nearest
/// `Double` (`0.1`, `1e30`).
///
/// That is what `JSONDecoder` gives an `Int`, `UInt64` or `Double` property, so two numbers are
/// equal exactly when such a property reads them as equal. Each value has one form, so equal
/// numbers are also written back the same way.
public struct DocumentNumber: Sendable, Equatable, CustomStringConvertible {
    enum Value: Sendable, Equatable {
        case integer(Int64)
        /// Only above `Int64.max`.
        case unsigned(UInt64)
        /// Only for values that are not integers in those ranges.
        case real(Double)
    }

    let value: Value

    /// The number `value`.
    public init(_ value: Int64) { self.value = .integer(value) }

    /// The number `value`; an integer when it is one.
    public init(_ value: UInt64) {
        self.value = value <= UInt64(Int64.max) ? .integer(Int64(value)) : .unsigned(value)
    }

    /// The number `value`; an integer when `value` is integral and fits `Int64` or `UInt64`.
    public init(_ value: Double) {
        if value.rounded(.towardZero) == value, value >= -0x1p63, value < 0x1p64 {
            self = value < 0x1p63 ? DocumentNumber(Int64(value)) : DocumentNumber(UInt64(value))
        } else {
            self.value = .real(value)
        }
    }

    /// Equal values; NaN equals NaN.
    public static func == (lhs: DocumentNumber, rhs: DocumentNumber) -> Bool {
        switch (lhs.value, rhs.value) {
        case (.integer(let a), .integer(let b)): return a == b
        case (.unsigned(let a), .unsigned(let b)): return a == b
        // NaN (property lists can hold one) equals itself, so a document equals itself.
        case (.real(let a), .real(let b)): return a == b || (a.isNaN && b.isNaN)
        default: return false
        }
    }

    public var description: String {
        switch value {
        case .integer(let number): "\(number)"
        case .unsigned(let number): "\(number)"
        case .real(let number): "\(number)"
        }
    }
}

/// Where a value sits in a ``Document``: the names of the members from the root, written
/// `address.city`.
///
/// A name that is not plain (empty, or with a character other than a letter, digit, `_` or
/// `-`, such as `.`) is written quoted as a JSON string: `address."post.code"`. The root is
/// written `.`. There are no array indices: arrays are values, so a difference inside one is
/// reported at the array's path.
public struct DocumentPath: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The member names from the root.
    public var names: [String]

    /// The path through `names`.
    public init(_ names: [String] = []) { self.names = names }

    /// This path with one more member name.
    public func appending(_ name: String) -> DocumentPath { DocumentPath(names + [name]) }

    /// `address.city`, `address."post.code"`, `.` for the root.
    public var description: String {
        names.isEmpty ? "." : names.map(Self.written).joined(separator: ".")
    }

    /// Hashing and equality by Unicode scalars, like ``Document``'s.
    public static func == (lhs: DocumentPath, rhs: DocumentPath) -> Bool {
        lhs.names.elementsEqual(rhs.names) { $0.unicodeScalars.elementsEqual($1.unicodeScalars) }
    }

    /// Hashes the names' UTF-8 bytes, as ``==`` compares them.
    public func hash(into hasher: inout Hasher) {
        for name in names { hasher.combine(Array(name.utf8)) }
    }

    /// Ordered name by name, by UTF-8 bytes: the same order on every machine.
    public static func < (lhs: DocumentPath, rhs: DocumentPath) -> Bool {
        lhs.names.lexicographicallyPrecedes(rhs.names) { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    private static func written(_ name: String) -> String {
        let plain =
            !name.isEmpty
            && name.unicodeScalars.allSatisfy {
                ($0.properties.isAlphabetic || $0.properties.numericType != nil || $0 == "_" || $0 == "-") && !$0.properties.isWhitespace
            }
        return plain ? name : quoted(name)
    }

    /// `text` as a JSON string literal.
    static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\t": result += "\\t"
            case "\r": result += "\\r"
            case _ where scalar.value < 0x20: result += String(format: "\\u%04x", scalar.value)
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}

/// Why bytes could not be read as a ``Document`` or a document could not be written.
public struct DocumentError: Error, Sendable, Equatable, CustomStringConvertible {
    /// One sentence naming what was wrong.
    public let message: String
    /// The byte offset where reading stopped, when known.
    public let offset: Int?

    init(_ message: String, at offset: Int? = nil) {
        self.message = message
        self.offset = offset
    }

    public var description: String { offset.map { "\(message) (at byte \($0))" } ?? message }
}

/// Bounds on what a reader accepts, so hostile bytes cost bounded time and stack.
public struct DocumentLimits: Sendable {
    /// The deepest nesting of objects and arrays accepted.
    public var depth: Int
    /// The most values one property list may expand to (its objects can share bytes).
    public var values: Int

    /// 256 levels (the store's models are far shallower; `JSONDecoder` stops at 512), and a
    /// million values.
    public static let standard = DocumentLimits(depth: 256, values: 1_000_000)

    /// Limits of `depth` levels and `values` values.
    public init(depth: Int, values: Int) {
        self.depth = depth
        self.values = values
    }
}
