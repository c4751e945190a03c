import Foundation

/// A decoded archive as a JSON-like value tree.
///
/// Foundation's classes become plain values (`NSString` a ``string(_:)``, `NSArray` and `NSSet`
/// an ``array(_:)``, `NSDate` a ``date(_:)``, `NSUUID` and `NSURL` their string form);
/// any other class becomes an ``object(_:)`` holding its class chain and keyed fields.
public enum KeyedValue: Sendable, Hashable {
    /// `$null`, or `NSNull`.
    case null
    /// A boolean `NSNumber`.
    case bool(Bool)
    /// An integer `NSNumber`.
    case integer(Int64)
    /// A floating-point `NSNumber` (`float`, `double`, `CGFloat`).
    case real(Double)
    /// `NSString`, `NSMutableString`, and the string form of `NSUUID` and `NSURL`.
    case string(String)
    /// `NSData`, `NSMutableData`.
    case data(Data)
    /// `NSDate`.
    case date(Date)
    /// `NSArray`, `NSMutableArray`, `NSSet`, `NSMutableSet`, `NSOrderedSet` (in archive order).
    case array([KeyedValue])
    /// `NSDictionary` and `NSMutableDictionary` whose keys are all strings.
    case dictionary([String: KeyedValue])
    /// `NSDictionary` and `NSMutableDictionary` with a key that is not a string, in archive order.
    case pairs([KeyedPair])
    /// An instance of any other class: its class chain and fields.
    case object(KeyedObject)
    /// A reference back to an enclosing object or collection with this archive UID: the
    /// archive holds a cycle here, which a tree cannot.
    case reference(uid: Int)
}

/// A key and its value in a dictionary with non-string keys.
public struct KeyedPair: Sendable, Hashable {
    /// The key: a number, a date, an object... anything but a string.
    public var key: KeyedValue
    /// The value stored under it.
    public var value: KeyedValue

    /// Makes a pair.
    public init(key: KeyedValue, value: KeyedValue) {
        self.key = key
        self.value = value
    }
}

/// An archived instance of a class that is not one of Foundation's value classes.
public struct KeyedObject: Sendable, Hashable {
    /// The class chain from `$classes`, most derived first: `["MalePerson", "Person", "NSObject"]`.
    public var classes: [String]
    /// The encoded fields by key, inherited ones included (a subclass encodes into the same object).
    public var fields: [String: KeyedValue]
    /// The object's index in `$objects`, which ``KeyedValue/reference(uid:)`` markers name.
    public var uid: Int?

    /// Makes an object.
    public init(classes: [String], fields: [String: KeyedValue], uid: Int? = nil) {
        self.classes = classes
        self.fields = fields
        self.uid = uid
    }

    /// The object's own class, `$classname`.
    public var className: String { classes.first ?? "" }
}

extension KeyedValue {
    /// The value for `key` when this is an object or a string-keyed dictionary.
    public subscript(key: String) -> KeyedValue? {
        switch self {
        case .object(let object): return object.fields[key]
        case .dictionary(let dictionary): return dictionary[key]
        default: return nil
        }
    }

    /// The class name of an object, or the Foundation class a plain value came from
    /// (`NSString`, `NSNumber`, `NSArray`...), as a store collection can be named after it.
    public var className: String {
        switch self {
        case .null: return "NSNull"
        case .bool, .integer, .real: return "NSNumber"
        case .string: return "NSString"
        case .data: return "NSData"
        case .date: return "NSDate"
        case .array: return "NSArray"
        case .dictionary, .pairs: return "NSDictionary"
        case .object(let object): return object.className
        case .reference: return "NSObject"
        }
    }

    /// A dictionary key's text: a string as it is, a number or boolean as written in JSON.
    var keyText: String {
        switch self {
        case .string(let text): return text
        case .integer(let value): return String(value)
        case .real(let value): return String(value)
        case .bool(let value): return String(value)
        case .null: return "null"
        default: return String(describing: self)
        }
    }
}

extension CodingUserInfoKey {
    /// Set to `true` in an encoder's `userInfo` to have each ``KeyedObject`` written with its
    /// class chain under `"$classes"` (as `archive-sync dump --json` does).
    public static let keyedArchiveClassChains = CodingUserInfoKey(rawValue: "KeyedArchive.classChains")!
}

/// Encodes the tree as JSON-like data: objects as their fields, dictionaries with non-string
/// keys with the keys' text, a cycle as `{"$ref": uid}`. Dates and data go through the
/// encoder's own strategies, so a JSONEncoder's output loads back into the Codable model.
extension KeyedValue: Encodable {
    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ string: String) { stringValue = string }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Encodes the tree; see the extension's comment for the shape.
    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .null:
            var container = encoder.singleValueContainer()
            try container.encodeNil()
        case .bool(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .integer(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .real(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .string(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .data(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .date(let value):
            var container = encoder.singleValueContainer()
            try container.encode(value)
        case .array(let values):
            var container = encoder.unkeyedContainer()
            for value in values { try container.encode(value) }
        case .dictionary(let values):
            var container = encoder.container(keyedBy: Key.self)
            for (key, value) in values { try container.encode(value, forKey: Key(key)) }
        case .pairs(let pairs):
            var container = encoder.container(keyedBy: Key.self)
            for pair in pairs { try container.encode(pair.value, forKey: Key(pair.key.keyText)) }
        case .object(let object):
            var container = encoder.container(keyedBy: Key.self)
            if encoder.userInfo[.keyedArchiveClassChains] as? Bool == true {
                try container.encode(object.classes, forKey: Key("$classes"))
            }
            for (key, value) in object.fields { try container.encode(value, forKey: Key(key)) }
        case .reference(let uid):
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(uid, forKey: Key("$ref"))
        }
    }
}
