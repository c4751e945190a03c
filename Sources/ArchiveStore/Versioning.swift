import Crypto
import Foundation

/// A SHA-256 of an object's bytes.
public struct ContentHash: Hashable, Sendable, CustomStringConvertible, Codable {
    /// The 32 bytes of the digest.
    public let bytes: Data

    init(bytes: Data) { self.bytes = bytes }

    /// A hash from its 32 bytes (as another replica sent them); nil when `digest` is not 32 bytes long.
    package init?(digest: Data) {
        guard digest.count == 32 else { return nil }
        bytes = digest
    }

    /// The hash of `data`.
    public init(of data: Data) {
        bytes = Data(SHA256.hash(data: data))
    }

    /// Lower-case hex, as `sha256sum` prints it.
    public var description: String {
        var hex: [UInt8] = []
        hex.reserveCapacity(bytes.count * 2)
        appendHex(to: &hex)
        return String(decoding: hex, as: UTF8.self)
    }

    /// Appends ``description``'s bytes to `out`, without making a `String` (an intent's JSON).
    func appendHex(to out: inout [UInt8]) {
        for byte in bytes {
            out.append(Self.hexDigits[Int(byte >> 4)])
            out.append(Self.hexDigits[Int(byte & 0xF)])
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    public init(from decoder: any Decoder) throws {
        let hex = try decoder.singleValueContainer().decode(String.self)
        var bytes = Data()
        var index = hex.startIndex
        while index < hex.endIndex, let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex),
            let byte = UInt8(hex[index..<next], radix: 16)
        {
            bytes.append(byte)
            index = next
        }
        guard bytes.count == 32, index == hex.endIndex else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a SHA-256 hex digest"))
        }
        self.bytes = bytes
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// A store's identity in version vectors: random, made when the store is created.
public struct ReplicaID: Hashable, Sendable, Comparable, CustomStringConvertible, Codable {
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    /// A new random replica id (16 hex digits).
    static func random() -> ReplicaID {
        var generator = SystemRandomNumberGenerator()
        return ReplicaID(rawValue: String(format: "%016llx", generator.next() as UInt64))
    }

    public var description: String { rawValue }
    public static func < (lhs: ReplicaID, rhs: ReplicaID) -> Bool { lhs.rawValue < rhs.rawValue }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// How many changes each replica has made to one object: `{replica: counter}`.
///
/// A vector that is at least as large in every entry *dominates* another: it has seen every
/// change the other has. Two vectors where neither dominates are *concurrent*: a conflict.
public struct VersionVector: Hashable, Sendable, Codable, CustomStringConvertible {
    public private(set) var counters: [ReplicaID: Int]

    public init(_ counters: [ReplicaID: Int] = [:]) { self.counters = counters }

    /// The counter for `replica` (0 when it has made no change).
    public subscript(replica: ReplicaID) -> Int { counters[replica] ?? 0 }

    /// Records one more change by `replica`.
    public mutating func increment(_ replica: ReplicaID) {
        counters[replica, default: 0] += 1
    }

    /// True when this vector has seen every change `other` has.
    public func dominates(_ other: VersionVector) -> Bool {
        other.counters.allSatisfy { self[$0.key] >= $0.value }
    }

    /// `replica=counter` pairs, sorted by replica and joined by `,`: the manifest's form.
    public var description: String {
        counters.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
    }

    /// Parses ``description``'s form; nil when malformed.
    package init?(parsing text: String) {
        var counters: [ReplicaID: Int] = [:]
        for pair in text.split(separator: ",") {
            let parts = pair.split(separator: "=")
            guard parts.count == 2, let count = Int(parts[1]), count >= 0 else { return nil }
            counters[ReplicaID(rawValue: String(parts[0]))] = count
        }
        self.counters = counters
    }

    public init(from decoder: any Decoder) throws {
        let raw = try decoder.singleValueContainer().decode([String: Int].self)
        counters = Dictionary(uniqueKeysWithValues: raw.map { (ReplicaID(rawValue: $0.key), $0.value) })
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(Dictionary(uniqueKeysWithValues: counters.map { ($0.key.rawValue, $0.value) }))
    }
}

/// One version of one object, as history keeps it.
public struct ObjectVersion: Sendable, Equatable, Codable {
    /// 1 for the first version, then one more for each change (a delete is a version too).
    public let version: Int
    /// The SHA-256 of the contents; nil for a delete.
    public let hash: ContentHash?
    /// Size of the contents in bytes (0 for a delete).
    public let size: Int
    /// When this version was recorded.
    public let date: Date
    /// The replica that made the change.
    public let replica: ReplicaID
    /// The object's version vector after this change.
    public let vector: VersionVector
    /// True when this version is a delete (a tombstone).
    public let isDeleted: Bool
    /// The file name this version had (its extension names the codec).
    public let file: String
    /// The schema version the model declared when saved, if it declared one.
    public let schemaVersion: Int?
}

/// What changed, as the manifest records it.
public struct StoreChange: Sendable, Equatable, Codable {
    /// What happened to the object.
    public enum Kind: String, Sendable, Codable { case created, modified, deleted }
    /// Who made the change.
    public enum Origin: String, Sendable, Codable {
        /// This process, through the store's API.
        case local
        /// Another program: found by a scan or a watcher, recorded by another process, or
        /// recovered by open from an interrupted write.
        case external
        /// A sync with another store, run in this process or another.
        case sync
    }

    public let id: ObjectID
    public let kind: Kind
    public let version: Int
    public let origin: Origin
    /// The store-wide change sequence number of this change.
    public let sequence: Int
}

extension ObjectID: Codable {
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        try self.init(parsing: text)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// What ``ArchiveStore/migrateAll(of:in:)`` did.
public struct MigrationReport: Sendable, Codable {
    public struct Failure: Sendable, Codable, Equatable {
        public let key: String
        public let reason: String
    }

    /// Keys rewritten in the current schema.
    public var migrated: [String] = []
    /// Keys that could not be migrated, left untouched.
    public var failed: [Failure] = []
}
