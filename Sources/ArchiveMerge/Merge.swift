/// What a three-way merge of two edits gives.
public enum MergeResult: Sendable, Equatable {
    /// No field conflict: the merged document, and the paths where it differs from the base
    /// (what either side changed, sorted).
    case merged(Document, paths: [DocumentPath])
    /// The same field changed both ways: the conflicting paths, sorted. No document: the
    /// caller keeps a winner and a conflict copy.
    case conflicts([DocumentPath])
}

extension Document {
    /// Merges two edits of `base`, member by member, the way git merges lines.
    ///
    /// For each member of an object (present or absent in each of the three):
    /// - the same on both sides (both unchanged, or the same change): taken once;
    /// - unchanged on one side: the other side's (a change, or a removal);
    /// - an object in all three, changed on both sides: merged member by member;
    /// - anything else is a field conflict at its path: a scalar or an array changed both ways,
    ///   removed on one side and changed on the other, added on both sides differently, a
    ///   change of type, or a name respelled (same name to Swift, other Unicode scalars).
    ///
    /// Arrays are values: merged only when one side left them unchanged. The result is
    /// symmetric: swapping `ours` and `theirs` gives the same document and the same paths, so
    /// two replicas that merge the same pair independently write the same bytes.
    ///
    /// ```swift
    /// let base = try Document(json: Data(#"{"name":"Ann","city":"Oslo"}"#.utf8))
    /// let ours = try Document(json: Data(#"{"name":"Anna","city":"Oslo"}"#.utf8))
    /// let theirs = try Document(json: Data(#"{"name":"Ann","city":"Bergen"}"#.utf8))
    /// Document.merge(base: base, ours: ours, theirs: theirs)
    /// // .merged({"city":"Bergen","name":"Anna"}, paths: [city, name])
    /// ```
    public static func merge(base: Document, ours: Document, theirs: Document) -> MergeResult {
        var conflicts: [DocumentPath] = []
        let merged = mergeValues(base, ours, theirs, at: DocumentPath(), conflicts: &conflicts)
        guard conflicts.isEmpty, let merged else { return .conflicts(conflicts.sorted()) }
        return .merged(merged, paths: diff(base, merged).map(\.path))
    }

    /// Three versions of one member; nil where it is absent. Nil is also the answer when the
    /// member is absent from the result (or when `conflicts` grew: the answer is then unused).
    private static func mergeValues(_ base: Document?, _ ours: Document?, _ theirs: Document?, at path: DocumentPath, conflicts: inout [DocumentPath])
        -> Document?
    {
        if let taken = takenWhole(base, ours, theirs, same: ==) { return taken }
        guard case .object(let baseMembers)? = base, case .object(let ourMembers)? = ours, case .object(let theirMembers)? = theirs else {
            conflicts.append(path)
            return nil
        }
        var merged: [String: Document] = [:]
        for name in Set(ourMembers.keys).union(theirMembers.keys).union(baseMembers.keys) {
            let entries = [baseMembers, ourMembers, theirMembers].map { members in
                members.index(forKey: name).map { members[$0] }
            }
            let spellings = entries.compactMap { $0?.key }
            let spelling = spellings.min { $0.utf8.lexicographicallyPrecedes($1.utf8) } ?? name
            if spellings.allSatisfy({ $0.unicodeScalars.elementsEqual(spelling.unicodeScalars) }) {
                let value = mergeValues(entries[0]?.value, entries[1]?.value, entries[2]?.value, at: path.appending(spelling), conflicts: &conflicts)
                if let value { merged[spelling] = value }
            } else if let taken = takenWhole(entries[0], entries[1], entries[2], same: sameEntry) {
                if let taken { merged[taken.key] = taken.value }
            } else {
                conflicts.append(path.appending(spelling))
            }
        }
        return .object(merged)
    }

    /// The rule for values taken whole: `.some(value)` (nil value: absent) when one side's
    /// value wins, nil when the two sides changed it differently.
    private static func takenWhole<Value>(_ base: Value?, _ ours: Value?, _ theirs: Value?, same: (Value, Value) -> Bool) -> Value?? {
        func equal(_ a: Value?, _ b: Value?) -> Bool {
            switch (a, b) {
            case (nil, nil): true
            case (let a?, let b?): same(a, b)
            default: false
            }
        }
        if equal(ours, theirs) { return .some(ours) }
        if equal(base, ours) { return .some(theirs) }
        if equal(base, theirs) { return .some(ours) }
        return nil
    }

    private static func sameEntry(_ a: (key: String, value: Document), _ b: (key: String, value: Document)) -> Bool {
        a.key.unicodeScalars.elementsEqual(b.key.unicodeScalars) && a.value == b.value
    }
}
