import Foundation

/// Why an archive could not be read. Every failure of ``KeyedArchive`` is one of these (or,
/// from ``KeyedArchiveDecoder``, a `DecodingError`); reading never traps.
public enum KeyedArchiveError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The bytes are not a binary or XML property list, or are truncated or corrupt.
    case notAPropertyList(String)
    /// A property list, but not a keyed archive (no `$objects` or `$top`).
    case notAKeyedArchive(String)
    /// A reference (UID) points past the end of `$objects`.
    case uidOutOfRange(uid: Int, objectCount: Int)
    /// An object has the wrong shape: a `$class` that is not a class dictionary,
    /// `NS.keys` and `NS.objects` of different lengths, a string that is not a string, and so on.
    case malformed(String)
    /// The object graph nests deeper than ``KeyedArchive/Options/maximumDepth``.
    case tooDeep(limit: Int)
    /// The value tree would hold more than ``KeyedArchive/Options/maximumValues`` values
    /// (an archive whose shared references multiply when written out as a tree).
    case tooLarge(limit: Int)

    /// One sentence for a user: what is wrong with the archive.
    public var description: String {
        switch self {
        case .notAPropertyList(let reason): return "not a readable property list: \(reason)"
        case .notAKeyedArchive(let reason): return "not an NSKeyedArchiver archive: \(reason)"
        case .uidOutOfRange(let uid, let count):
            return "a reference to object \(uid) points past the end of $objects (\(count) objects)"
        case .malformed(let reason): return "malformed archive: \(reason)"
        case .tooDeep(let limit): return "the object graph is nested deeper than \(limit) levels, the limit"
        case .tooLarge(let limit): return "the object graph expands to more than \(limit) values, the limit"
        }
    }
}
