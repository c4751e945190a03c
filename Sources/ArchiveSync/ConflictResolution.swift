import ArchiveMerge
import ArchiveStore
import Foundation

/// One place where a conflict copy differs from the current version at its id: what
/// `archive-sync conflicts --diff` prints. Values are shown as JSON-like text.
public struct ConflictDifference: Sendable, Codable, Equatable {
    /// `name`, `address.city`; `.` for the whole document.
    public var path: String
    /// The current version's value; nil when the member is absent from it.
    public var current: String?
    /// The copy's value; nil when the member is absent from it.
    public var copy: String?
    /// The base's value (the version both edits started from), when the store's history still
    /// holds the base and the member is in it.
    public var base: String?
}

/// How a conflict is settled.
public enum ConflictResolution: Sendable, Equatable {
    /// The version at the id stays.
    case current
    /// The copy's version becomes the next version at the id.
    case copy
    /// These bytes (a JSON document a person merged; written in the object's codec) become the
    /// next version at the id.
    case merged(Data)
}

extension ArchiveStore {
    /// The conflict copy `id` names: the copy itself, or the object it is a copy of when that
    /// object has exactly one. Throws ``ArchiveError/invalidInput(_:)`` otherwise, naming the copies.
    public func conflictCopy(for id: ObjectID) throws -> ConflictCopy {
        let copies = try conflictCopies()
        if let copy = copies.first(where: { $0.id == id }) { return copy }
        let ofIt = copies.filter { $0.original == id }
        guard ofIt.count == 1 else {
            throw ArchiveError.invalidInput(
                ofIt.isEmpty
                    ? "\(id) is not a conflict copy, nor an object with one (see `archive-sync conflicts`)"
                    : "\(id) has \(ofIt.count) conflict copies (\(ofIt.map(\.id.description).joined(separator: ", "))); name the one to resolve")
        }
        return ofIt[0]
    }

    /// Where `copy` differs from the current version at its id, member by member, with the
    /// base's value where the base is known: the newest version in this store's history whose
    /// vector is the meet of the copy's and that of a version here concurrent with it (on the
    /// side whose edit stayed at the id, its own edit). Throws when a version is not a JSON or
    /// property-list document.
    public func conflictDifferences(_ copy: ConflictCopy) throws -> [ConflictDifference] {
        let rows = try replicaEntries(for: [copy.id, copy.original])
        guard let copyRow = rows[0], !copyRow.isDeleted, let format = DocumentFormat(rawValue: fileExtension(copyRow.file)) else {
            throw ArchiveError.invalidInput("\(copy.id) is not a JSON or property-list document")
        }
        let copied = try document(try data(for: copy.id), format, copy.id)
        guard let currentRow = rows[1], !currentRow.isDeleted else {
            return [ConflictDifference(path: DocumentPath().description, current: nil, copy: copied.description, base: nil)]
        }
        let current = try document(try data(for: copy.original), DocumentFormat(rawValue: fileExtension(currentRow.file)) ?? format, copy.original)
        let base = try conflictBase(of: copy.original, copyVector: copyRow.vector).flatMap { try? Document($0, format: format) }
        return Document.diff(current, copied, base: base).map {
            ConflictDifference(path: $0.path.description, current: $0.first?.description, copy: $0.second?.description, base: $0.base?.description)
        }
    }

    /// Settles the conflict of `copy`: writes the version kept as the next version at its id
    /// (nothing for ``ConflictResolution/current``), then removes the copy. Both are changes
    /// the next sync carries to the other store. Returns the id's version afterwards.
    @discardableResult
    public func resolveConflict(_ copy: ConflictCopy, keeping resolution: ConflictResolution) throws -> Int? {
        let rows = try replicaEntries(for: [copy.id, copy.original])
        let codec = (rows[1] ?? rows[0]).flatMap { ArchiveCodec(fileExtension: fileExtension($0.file)) } ?? .json
        var version: Int?
        switch resolution {
        case .current:
            break
        case .copy:
            let copyCodec = rows[0].flatMap { ArchiveCodec(fileExtension: fileExtension($0.file)) } ?? codec
            version = try put(try data(for: copy.id), as: copy.original, codec: copyCodec)
        case .merged(let data):
            var bytes = data
            if codec == .propertyList {
                do {
                    bytes = try Document(json: data).propertyListData()
                } catch {
                    throw ArchiveError.invalidInput(
                        "the merged version of \(copy.original) is not a JSON document the property list can hold: \(error)")
                }
            }
            version = try put(bytes, as: copy.original, codec: codec)
        }
        try remove(copy.id)
        return version
    }

    private func document(_ data: Data, _ format: DocumentFormat, _ id: ObjectID) throws -> Document {
        do {
            return try Document(data, format: format)
        } catch {
            throw ArchiveError.invalidInput("\(id) cannot be compared field by field: \(error)")
        }
    }

    /// The bytes of the version both edits of a conflict started from, when history holds it.
    private func conflictBase(of id: ObjectID, copyVector: VersionVector) throws -> Data? {
        let versions = try history(id)
        guard let other = versions.last(where: { !$0.vector.dominates(copyVector) && !copyVector.dominates($0.vector) }) else { return nil }
        let meet = copyVector.meet(other.vector)
        guard let base = versions.last(where: { !$0.isDeleted && $0.vector == meet }) else { return nil }
        return try? data(for: id, version: base.version)
    }
}
