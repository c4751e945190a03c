/// One place where two documents differ: what `conflicts --diff` prints per field.
public struct DocumentDifference: Sendable, Equatable, CustomStringConvertible {
    /// Where: the deepest member at which the two differ (objects are compared member by
    /// member, arrays and other values as a whole).
    public let path: DocumentPath
    /// The first document's value there; nil when the member is absent from it.
    public let first: Document?
    /// The second document's value there; nil when the member is absent from it.
    public let second: Document?
    /// The base's value there; nil when the member is absent from the base, or when no base
    /// was given.
    public let base: Document?

    /// A difference at `path`; nil values are absent members.
    public init(path: DocumentPath, first: Document?, second: Document?, base: Document?) {
        self.path = path
        self.first = first
        self.second = second
        self.base = base
    }

    /// `path: first → second`, with `(base: value)` when the base has one; `absent` for a
    /// missing member.
    public var description: String {
        func shown(_ value: Document?) -> String { value?.description ?? "absent" }
        let baseNote = base.map { " (base: \($0))" } ?? ""
        return "\(path): \(shown(first)) → \(shown(second))\(baseNote)"
    }
}

extension Document {
    /// Where `first` and `second` differ, sorted by path, with the base's value at each path
    /// when `base` is given.
    ///
    /// Objects are compared member by member (key order never matters); anything else,
    /// arrays included, as a whole, as ``merge(base:ours:theirs:)`` treats them. A member
    /// whose name is spelled with other Unicode scalars on each side is two differences: one
    /// spelling absent from each document.
    public static func diff(_ first: Document, _ second: Document, base: Document? = nil) -> [DocumentDifference] {
        var differences: [DocumentDifference] = []
        collectDifferences(first, second, base: base, at: DocumentPath(), into: &differences)
        return differences.sorted { $0.path < $1.path }
    }

    private static func collectDifferences(
        _ first: Document?, _ second: Document?, base: Document?, at path: DocumentPath, into differences: inout [DocumentDifference]
    ) {
        guard case .object(let firstMembers)? = first, case .object(let secondMembers)? = second else {
            if first != second { differences.append(DocumentDifference(path: path, first: first, second: second, base: base)) }
            return
        }
        let baseMembers: [String: Document]
        if case .object(let members)? = base { baseMembers = members } else { baseMembers = [:] }
        let spellings = Set(firstMembers.keys.map { Array($0.unicodeScalars) }).union(secondMembers.keys.map { Array($0.unicodeScalars) })
        for scalars in spellings {
            var name = ""
            name.unicodeScalars.append(contentsOf: scalars)
            collectDifferences(
                firstMembers.member(spelled: name), secondMembers.member(spelled: name), base: baseMembers.member(spelled: name),
                at: path.appending(name), into: &differences)
        }
    }
}
