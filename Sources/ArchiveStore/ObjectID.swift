/// Names one object in a store: a collection (one directory) and a key within it.
///
/// Keys may be any Unicode string except the few that could name a place outside the store
/// or nothing at all: empty keys, keys containing NUL, `.` and `..` (or any `..` path
/// component), and keys starting with `/`. Collections follow the same rules and also
/// cannot contain `/`. Construction checks them and throws ``ArchiveError/invalidKey(_:reason:)``
/// or ``ArchiveError/invalidCollection(_:reason:)``.
///
/// ```swift
/// let id = try ObjectID(collection: "Person", key: "person1")
/// let same = try ObjectID(parsing: "Person/person1")
/// ```
public struct ObjectID: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The collection (directory) the object lives in; by default its type's name.
    public let collection: String
    /// The object's key within its collection.
    public let key: String

    /// The longest key or collection name accepted, in UTF-8 bytes.
    public static let maximumLength = 4096

    /// Checks and makes an object id.
    public init(collection: String, key: String) throws {
        if let reason = Self.problem(with: collection, isCollection: true) {
            throw ArchiveError.invalidCollection(collection, reason: reason)
        }
        if let reason = Self.problem(with: key, isCollection: false) {
            throw ArchiveError.invalidKey(key, reason: reason)
        }
        self.collection = collection
        self.key = key
    }

    /// Parses `Collection/key`, the form the command line uses. The key is everything after
    /// the first `/`, so it may itself contain `/`.
    public init(parsing text: String) throws {
        guard let slash = text.firstIndex(of: "/") else {
            throw ArchiveError.invalidID(text, reason: "an id is COLLECTION/KEY, such as Person/person1")
        }
        try self.init(collection: String(text[..<slash]), key: String(text[text.index(after: slash)...]))
    }

    /// Made only from values already checked (rows of the manifest).
    package init(unchecked collection: String, key: String) {
        self.collection = collection
        self.key = key
    }

    public var description: String { "\(collection)/\(key)" }

    /// Byte for byte, as the manifest and the file system compare: `"\u{E9}"` and `"e\u{301}"`
    /// are two keys (``ExactName`` explains).
    public static func == (lhs: ObjectID, rhs: ObjectID) -> Bool {
        ExactName(lhs.collection) == ExactName(rhs.collection) && ExactName(lhs.key) == ExactName(rhs.key)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(ExactName(collection))
        hasher.combine(ExactName(key))
    }

    public static func < (lhs: ObjectID, rhs: ObjectID) -> Bool {
        if ExactName(lhs.collection) != ExactName(rhs.collection) { return lhs.collection.utf8.lexicographicallyPrecedes(rhs.collection.utf8) }
        return lhs.key.utf8.lexicographicallyPrecedes(rhs.key.utf8)
    }

    /// Why `name` cannot be a key (or collection), or nil when it can. One pass over the bytes.
    static func problem(with name: String, isCollection: Bool) -> String? {
        let bytes = name.utf8
        let slash = UInt8(ascii: "/")
        let dot = UInt8(ascii: ".")
        if bytes.isEmpty { return "it is empty" }
        if bytes.count > maximumLength { return "it is longer than \(maximumLength) bytes" }
        if bytes.first == slash { return "it is an absolute path" }
        // Walk the `/`-separated components, looking for NUL, `.` and `..`.
        var componentLength = 0
        var dots = 0
        for byte in bytes {
            if byte == 0 { return "it contains a NUL byte" }
            if byte == slash {
                if isCollection { return "a collection name cannot contain '/'" }
                if componentLength > 0, componentLength == dots, dots <= 2 { return "'.' and '..' would leave the collection" }
                componentLength = 0
                dots = 0
            } else {
                componentLength += 1
                if byte == dot { dots += 1 }
            }
        }
        if componentLength > 0, componentLength == dots, dots <= 2 { return "'.' and '..' would leave the collection" }
        return nil
    }
}
