import ArchiveJSON
import Foundation

/// How a model becomes bytes on disk. The file extension names the codec, so any reader
/// knows how to decode any object whatever its store's settings.
///
/// Both codecs are deterministic: the same model always gives the same bytes (JSON with
/// sorted keys; binary property lists with sorted dictionary keys), so the same model saved
/// twice has the same content hash and is not counted as a change.
public enum ArchiveCodec: String, Sendable, CaseIterable, Codable {
    /// JSON with sorted keys (`.json`). The default.
    case json
    /// Binary property list (`.plist`).
    case propertyList = "plist"

    /// The extension of files in this codec, without the dot.
    public var fileExtension: String { rawValue }

    /// The codec whose files end in `.ext`, or nil.
    public init?(fileExtension ext: some StringProtocol) {
        self.init(rawValue: String(ext))
    }

    private static let jsonEncoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    private static let plistEncoder: PropertyListEncoder = {
        let encoder = PropertyListEncoder()
        encoder.outputFormat = .binary
        return encoder
    }()

    /// Encodes `value` into this codec's bytes.
    public func encode<T: Encodable>(_ value: T) throws -> Data {
        switch self {
        case .json: return try Self.jsonEncoder.encode(value)
        case .propertyList: return try Self.plistEncoder.encode(value)
        }
    }

    private static let jsonDecoder = JSONDecoder()
    private static let plistDecoder = PropertyListDecoder()

    /// Decodes a `T` from this codec's bytes.
    ///
    /// JSON without `userInfo` is read by the store's own decoder, which gives exactly the
    /// values of a `JSONDecoder` with default strategies in about a third of its time, and
    /// leaves to `JSONDecoder` whatever it is not sure of (so every error is `JSONDecoder`'s).
    public func decode<T: Decodable>(_ type: T.Type, from data: Data, userInfo: [CodingUserInfoKey: any Sendable] = [:]) throws -> T {
        if userInfo.isEmpty {
            switch self {
            case .json:
                // The store's own decoder where it can answer, JSONDecoder's answer where it cannot.
                if let value = decodeArchiveJSON(type, from: data) { return value }
                return try Self.jsonDecoder.decode(type, from: data)
            case .propertyList:
                try PropertyListGuard.refuseWhatFoundationTrapsOn(data)
                return try Self.plistDecoder.decode(type, from: data)
            }
        }
        switch self {
        case .json:
            let decoder = JSONDecoder()
            decoder.userInfo = userInfo
            return try decoder.decode(type, from: data)
        case .propertyList:
            try PropertyListGuard.refuseWhatFoundationTrapsOn(data)
            let decoder = PropertyListDecoder()
            decoder.userInfo = userInfo
            return try decoder.decode(type, from: data)
        }
    }

    /// Checks that `data` is well-formed in this codec, whatever model it holds.
    func validate(_ data: Data) throws {
        switch self {
        case .json: _ = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        case .propertyList:
            try PropertyListGuard.refuseWhatFoundationTrapsOn(data)
            _ = try PropertyListSerialization.propertyList(from: data, options: [], format: nil)
        }
    }
}

/// A model whose stored shape changes over time, and that knows how to read its older shapes.
///
/// The store records the ``schemaVersion`` each object was saved with. Loading an object
/// saved with an older version calls ``migrate(from:decoder:)``; loading one saved with a
/// newer version throws ``ArchiveError/newerSchema(_:stored:supported:)``. A failed
/// migration throws ``ArchiveError/migrationFailed(_:from:reason:)`` and leaves the file as it
/// is. ``ArchiveStore/migrateAll(of:in:)`` rewrites every old object in the current shape.
///
/// ```swift
/// struct Person: VersionedModel {
///     static let schemaVersion = 2
///     var name: String
///     var email: String?          // new in version 2
///
///     private struct V1: Decodable { var fullName: String }
///
///     static func migrate(from version: Int, decoder: any Decoder) throws -> Person {
///         let old = try V1(from: decoder)          // version 1 called it fullName
///         return Person(name: old.fullName, email: nil)
///     }
/// }
/// ```
public protocol VersionedModel: Codable {
    /// The schema version this type writes. Start at 1 and raise it with each change of shape.
    static var schemaVersion: Int { get }
    /// Decodes an object saved with an older schema `version` into the current shape.
    static func migrate(from version: Int, decoder: any Decoder) throws -> Self
}

extension CodingUserInfoKey {
    /// The schema version being migrated from, while ``VersionedModel/migrate(from:decoder:)`` runs.
    public static let archiveSchemaVersion = CodingUserInfoKey(rawValue: "archive-sync.schemaVersion")!
}

/// Decodes a ``VersionedModel`` through its migration.
struct Migrating<T: VersionedModel>: Decodable {
    let value: T

    init(from decoder: any Decoder) throws {
        let version = decoder.userInfo[.archiveSchemaVersion] as? Int ?? T.schemaVersion
        value = try T.migrate(from: version, decoder: decoder)
    }
}
