import Foundation

/// One object of a property list, with its children as indices into the table that holds it.
///
/// Property lists are read into a flat table rather than a tree: a binary plist is itself a
/// table of objects that refer to each other by number, so shared objects and even cycles
/// (which hostile files can contain) stay as they are, and nothing that walks the table needs
/// to recurse.
enum PropertyListNode: Sendable {
    case null
    case bool(Bool)
    case integer(Int64)
    case real(Double)
    /// Seconds since 2001-01-01 00:00:00 UTC.
    case date(Double)
    case data(Data)
    case string(String)
    /// A keyed archive's reference: an index into `$objects`.
    case uid(Int)
    case array([Int])
    case set([Int])
    /// Keys and values, in the file's order, as table indices.
    case dictionary(keys: [Int], values: [Int])
}

/// A parsed property list: every object, and which one is the top.
struct PropertyListTable: Sendable {
    var nodes: [PropertyListNode]
    var top: Int

    /// Reads a binary (`bplist00`) or XML property list.
    static func parse(_ data: Data) throws(KeyedArchiveError) -> PropertyListTable {
        if data.starts(with: Array("bplist".utf8)) {
            return try BinaryPropertyListReader.read(data)
        }
        if looksLikeXML(data) {
            return try XMLPropertyListReader.read(data)
        }
        throw .notAPropertyList("it starts with neither 'bplist00' nor an XML property list")
    }

    private static func looksLikeXML(_ data: Data) -> Bool {
        let head = data.prefix(256)
        guard let text = String(bytes: head, encoding: .utf8) ?? String(bytes: head, encoding: .isoLatin1) else { return false }
        let trimmed = text.drop { $0.isWhitespace || $0 == "\u{FEFF}" }
        return trimmed.hasPrefix("<?xml") || trimmed.hasPrefix("<plist") || trimmed.hasPrefix("<!DOCTYPE plist")
    }

    /// The string at `index`, or nil when it is something else.
    func string(at index: Int) -> String? {
        guard nodes.indices.contains(index), case .string(let text) = nodes[index] else { return nil }
        return text
    }

    /// The dictionary at `index` with string keys, mapped to value indices; nil when it is
    /// not a dictionary or a key is not a string.
    func stringKeyedDictionary(at index: Int) -> [String: Int]? {
        guard nodes.indices.contains(index), case .dictionary(let keys, let values) = nodes[index] else { return nil }
        var result: [String: Int] = [:]
        result.reserveCapacity(keys.count)
        for (key, value) in zip(keys, values) {
            guard let name = string(at: key) else { return nil }
            result[name] = value
        }
        return result
    }
}
