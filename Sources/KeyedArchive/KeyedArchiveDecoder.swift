import Foundation

/// Decodes an `NSKeyedArchiver` archive straight into a Codable Swift type.
///
/// ```swift
/// struct PersonModel: Decodable {
///     var str: String
///     var w_int: Int
///     var arr: [String]
///     var born: Date?
/// }
/// let person = try KeyedArchiveDecoder().decode(PersonModel.self, from: data)
/// ```
///
/// Fields map to properties by name (use `CodingKeys` to rename). Numbers convert as Swift
/// expects: an archived integer into any integer type it fits or into `Double`, a real into an
/// integer when it is whole, 0 and 1 into `Bool`; an enum decodes from its raw value.
/// `NSDate` decodes as `Date`, `NSData` as `Data`, `NSURL` and `NSUUID` as `URL` and `UUID`
/// (or their strings). A subclass's inherited fields are in the same object, so a class's
/// `super.init(from: decoder)` reads them from the same decoder. A mismatch throws a
/// `DecodingError` with the coding path; an archive that cannot be read throws ``KeyedArchiveError``.
public struct KeyedArchiveDecoder: Sendable {
    /// The limits used when reading the archive.
    public var options: KeyedArchive.Options
    /// Passed to the types being decoded as `decoder.userInfo`.
    public var userInfo: [CodingUserInfoKey: any Sendable]

    /// Makes a decoder.
    public init(options: KeyedArchive.Options = .init(), userInfo: [CodingUserInfoKey: any Sendable] = [:]) {
        self.options = options
        self.userInfo = userInfo
    }

    /// Reads the archive in `data` and decodes its root object as `T`.
    public func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
        try decode(type, from: KeyedArchive.decode(data, options: options))
    }

    /// Decodes an already-read value tree as `T`.
    public func decode<T: Decodable>(_ type: T.Type, from value: KeyedValue) throws -> T {
        try ValueDecoder(value, codingPath: [], userInfo: userInfo).decode(T.self)
    }
}

private struct IndexKey: CodingKey {
    let intValue: Int?
    var stringValue: String { "Index \(intValue ?? 0)" }
    init(_ index: Int) { intValue = index }
    init?(intValue: Int) { self.intValue = intValue }
    init?(stringValue: String) { nil }
}

/// Decodes one value of the tree; it is its own single-value container.
private struct ValueDecoder: Decoder, SingleValueDecodingContainer {
    let value: KeyedValue
    let codingPath: [any CodingKey]
    let userInfoStorage: [CodingUserInfoKey: any Sendable]
    var userInfo: [CodingUserInfoKey: Any] { userInfoStorage }

    init(_ value: KeyedValue, codingPath: [any CodingKey], userInfo: [CodingUserInfoKey: any Sendable]) {
        self.value = value
        self.codingPath = codingPath
        self.userInfoStorage = userInfo
    }

    func child(_ value: KeyedValue, _ key: any CodingKey) -> ValueDecoder {
        ValueDecoder(value, codingPath: codingPath + [key], userInfo: userInfoStorage)
    }

    var kind: String {
        switch value {
        case .null: return "null"
        case .bool: return "a boolean"
        case .integer: return "an integer"
        case .real: return "a real number"
        case .string: return "a string"
        case .data: return "data"
        case .date: return "a date"
        case .array: return "an array"
        case .dictionary, .pairs: return "a dictionary"
        case .object(let object): return "a \(object.className) object"
        case .reference: return "a reference"
        }
    }

    func mismatch<T>(_ type: T.Type) -> DecodingError {
        if case .null = value {
            return .valueNotFound(type, .init(codingPath: codingPath, debugDescription: "expected \(type) but the archive holds null"))
        }
        if case .reference(let uid) = value {
            return .dataCorrupted(
                .init(
                    codingPath: codingPath,
                    debugDescription: "the archive has a cycle here (a reference back to object \(uid)), which \(type) cannot hold"))
        }
        return .typeMismatch(type, .init(codingPath: codingPath, debugDescription: "expected \(type) but the archive holds \(kind)"))
    }

    // MARK: Decoder

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        switch value {
        case .object(let object): return KeyedDecodingContainer(Keyed<Key>(decoder: self, fields: object.fields))
        case .dictionary(let fields): return KeyedDecodingContainer(Keyed<Key>(decoder: self, fields: fields))
        case .pairs(let pairs):
            var fields: [String: KeyedValue] = [:]
            for pair in pairs { fields[pair.key.keyText] = pair.value }
            return KeyedDecodingContainer(Keyed<Key>(decoder: self, fields: fields))
        default: throw mismatch([String: KeyedValue].self)
        }
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let elements) = value else { throw mismatch([KeyedValue].self) }
        return Unkeyed(decoder: self, elements: elements)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    // MARK: SingleValueDecodingContainer

    func decodeNil() -> Bool {
        if case .null = value { return true }
        return false
    }

    func decode(_ type: Bool.Type) throws -> Bool {
        switch value {
        case .bool(let flag): return flag
        case .integer(0): return false
        case .integer(1): return true
        default: throw mismatch(type)
        }
    }

    func decode(_ type: String.Type) throws -> String {
        guard case .string(let text) = value else { throw mismatch(type) }
        return text
    }

    func decode(_ type: Double.Type) throws -> Double { try floatingPoint(type) }
    func decode(_ type: Float.Type) throws -> Float { try floatingPoint(type) }
    func decode(_ type: Int.Type) throws -> Int { try integer(type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try integer(type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try integer(type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try integer(type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try integer(type) }
    func decode(_ type: UInt.Type) throws -> UInt { try integer(type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try integer(type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try integer(type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try integer(type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try integer(type) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        if type == Date.self {
            guard case .date(let date) = value else { throw mismatch(type) }
            return date as! T
        }
        if type == Data.self {
            guard case .data(let data) = value else { throw mismatch(type) }
            return data as! T
        }
        if type == URL.self {
            guard case .string(let text) = value else { throw mismatch(type) }
            guard let url = URL(string: text) else {
                throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "'\(text)' is not a URL"))
            }
            return url as! T
        }
        if type == UUID.self {
            guard case .string(let text) = value else { throw mismatch(type) }
            guard let uuid = UUID(uuidString: text) else {
                throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "'\(text)' is not a UUID"))
            }
            return uuid as! T
        }
        if case .reference = value { throw mismatch(type) }
        return try T(from: self)
    }

    private func integer<I: FixedWidthInteger>(_ type: I.Type) throws -> I {
        switch value {
        case .integer(let number):
            if let result = I(exactly: number) { return result }
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "\(number) does not fit in \(type)"))
        case .real(let number):
            if let result = I(exactly: number) { return result }
            throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "\(number) is not a whole \(type)"))
        case .bool(let flag):
            return flag ? 1 : 0
        default:
            throw mismatch(type)
        }
    }

    private func floatingPoint<F: BinaryFloatingPoint>(_ type: F.Type) throws -> F {
        switch value {
        case .real(let number): return F(number)
        case .integer(let number): return F(number)
        default: throw mismatch(type)
        }
    }
}

private struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let decoder: ValueDecoder
    let fields: [String: KeyedValue]

    var codingPath: [any CodingKey] { decoder.codingPath }
    var allKeys: [Key] { fields.keys.sorted().compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { fields[key.stringValue] != nil }

    func child(_ key: Key) throws -> ValueDecoder {
        guard let value = fields[key.stringValue] else {
            throw DecodingError.keyNotFound(
                key, .init(codingPath: codingPath, debugDescription: "the archived object has no field '\(key.stringValue)'"))
        }
        return decoder.child(value, key)
    }

    func decodeNil(forKey key: Key) throws -> Bool { try child(key).decodeNil() }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try child(key).decode(type) }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try child(key).decode(type) }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try child(key).decode(type) }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try child(key).decode(type) }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try child(key).decode(type) }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try child(key).decode(type) }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try child(key).decode(type) }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try child(key).decode(type) }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try child(key).decode(type) }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try child(key).decode(type) }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try child(key).decode(type) }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try child(key).decode(type) }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try child(key).decode(type) }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try child(key).decode(type) }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try child(key).decode(type) }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try child(key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { try child(key).unkeyedContainer() }

    /// The same object: NSKeyedArchiver subclasses encode their superclass's fields into it.
    func superDecoder() throws -> any Decoder { decoder }

    func superDecoder(forKey key: Key) throws -> any Decoder { try child(key) }
}

private struct Unkeyed: UnkeyedDecodingContainer {
    let decoder: ValueDecoder
    let elements: [KeyedValue]
    var currentIndex = 0

    var codingPath: [any CodingKey] { decoder.codingPath }
    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    mutating func next<T>(_ type: T.Type) throws -> ValueDecoder {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                type, .init(codingPath: codingPath + [IndexKey(currentIndex)], debugDescription: "the array has only \(elements.count) elements"))
        }
        defer { currentIndex += 1 }
        return decoder.child(elements[currentIndex], IndexKey(currentIndex))
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, case .null = elements[currentIndex] else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next(type).decode(type) }
    mutating func decode(_ type: String.Type) throws -> String { try next(type).decode(type) }
    mutating func decode(_ type: Double.Type) throws -> Double { try next(type).decode(type) }
    mutating func decode(_ type: Float.Type) throws -> Float { try next(type).decode(type) }
    mutating func decode(_ type: Int.Type) throws -> Int { try next(type).decode(type) }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next(type).decode(type) }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next(type).decode(type) }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next(type).decode(type) }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next(type).decode(type) }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next(type).decode(type) }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next(type).decode(type) }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next(type).decode(type) }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next(type).decode(type) }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next(type).decode(type) }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next(type).decode(type) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next([String: KeyedValue].self).container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try next([KeyedValue].self).unkeyedContainer() }

    mutating func superDecoder() throws -> any Decoder { try next(KeyedValue.self) }
}
