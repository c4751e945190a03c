import ArchiveStore
import Foundation

/// A conflict copy waiting for a person: the version of an object that lost a conflict,
/// saved beside it by a sync.
public struct ConflictCopy: Sendable, Codable, Equatable {
    /// The copy, such as `Person/person1.conflict-3f2a9c1b-20261123T163012Z`.
    public let id: ObjectID
    /// The object it is a losing version of: `Person/person1`.
    public let original: ObjectID
    public let size: Int
    /// When the sync saved it here.
    public let saved: Date
}

extension ArchiveStore {
    /// The conflict copies in the store, in id order. Resolve one by keeping the version you
    /// want at the original id (`put`, or `restore`) and removing the copy; the removal
    /// travels to the other store like any delete.
    public func conflictCopies() throws -> [ConflictCopy] {
        var copies: [ConflictCopy] = []
        for collection in try collections() {
            for object in try objects(in: collection.name) where SyncPlanner.isConflictCopy(object.id.key) {
                let key = object.id.key
                let original = String(key[..<key.range(of: SyncPlanner.conflictMarker, options: .backwards)!.lowerBound])
                guard let originalID = try? ObjectID(collection: object.id.collection, key: original) else { continue }
                copies.append(ConflictCopy(id: object.id, original: originalID, size: object.size, saved: object.modified))
            }
        }
        return copies
    }
}
