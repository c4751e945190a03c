/// A version vector as the base search needs it: ArchiveStore's `VersionVector` conforms in
/// the planner (`dominates` it has; `meet` is the entrywise minimum), so this module does not
/// import the store.
public protocol CausalVector: Sendable {
    /// True when this vector has seen every change `other` has.
    func dominates(_ other: Self) -> Bool
    /// The newest vector both this and `other` dominate: for version vectors, the entrywise
    /// minimum.
    func meet(_ other: Self) -> Self
}

/// One row of an object's history as the base search reads it.
public struct HistoryEntry<Vector: CausalVector, ID: Sendable>: Sendable {
    /// The object's version vector after this version.
    public let vector: Vector
    /// What the caller needs to read this version's bytes (a version number, a hash).
    public let id: ID

    /// A row with `vector` whose bytes the caller finds by `id`.
    public init(vector: Vector, id: ID) {
        self.vector = vector
        self.id = id
    }
}

/// The common ancestor of two concurrent versions, found in either side's history.
public enum BaseSearch<Vector: CausalVector, ID: Sendable>: Sendable {
    /// The base, with its id in each history that holds it (at least one is non-nil); the
    /// caller reads whichever it can, preferring its own side.
    case found(Vector, ours: ID?, theirs: ID?)
    /// No version both sides had seen is in either history: history was pruned past it, or
    /// the two sides share no version (created on both sides, or stores that never met).
    case noBase

    /// The base of a concurrent pair: the newest version, in either history, whose vector both
    /// current vectors dominate (the last state both sides had seen).
    ///
    /// "Newest" must mean the *meet* of the two current vectors, the last state both had seen:
    /// an older common version is not a base (a field changed after it and changed back on one
    /// side would merge wrongly), so when that version was pruned from both histories, or no
    /// such version ever existed (each side merged the other's edits separately), the answer
    /// is ``noBase`` and the planner keeps a conflict copy, as without merging.
    ///
    /// The planner calls it per concurrent pair, with each store's history rows of the object
    /// (vector and version number) and the two current vectors, then reads the base's bytes
    /// from the side whose id is non-nil, decodes the three versions with ``Document`` and calls
    /// ``Document/merge(base:ours:theirs:)``.
    public static func search(ours: [HistoryEntry<Vector, ID>], theirs: [HistoryEntry<Vector, ID>], oursCurrent: Vector, theirsCurrent: Vector)
        -> BaseSearch
    {
        let meet = oursCurrent.meet(theirsCurrent)
        func isMeet(_ entry: HistoryEntry<Vector, ID>) -> Bool { entry.vector.dominates(meet) && meet.dominates(entry.vector) }
        let ourBase = ours.last(where: isMeet)
        let theirBase = theirs.last(where: isMeet)
        guard let vector = (ourBase ?? theirBase)?.vector else { return .noBase }
        return .found(vector, ours: ourBase?.id, theirs: theirBase?.id)
    }
}
