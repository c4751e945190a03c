import Foundation
import TestSupport

@testable import ArchiveMerge

/// Random trees and seeded edits of them, for the merge's property tests.
struct RandomDocuments {
    var generator: SeededGenerator

    init(seed: UInt64) { generator = SeededGenerator(seed: seed) }

    // Names a path has to quote, and two spellings of é, among plain ones.
    static let names = ["name", "address", "city", "tags", "a.b", "x", "y", "\u{E9}", "e\u{301}", ""]

    mutating func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &generator) < percent }

    mutating func scalar() -> Document {
        switch Int.random(in: 0..<6, using: &generator) {
        case 0: .string(["x", "y", "Oslo", "a/b", "\u{E9}", "e\u{301}"].randomElement(using: &generator)!)
        case 1: .number(DocumentNumber(Int64.random(in: -3...3, using: &generator)))
        case 2: .number(DocumentNumber([0.5, -1.25, 1e30, 2.0].randomElement(using: &generator)!))
        case 3: .bool(chance(50))
        case 4: .null
        default:
            .array((0..<Int.random(in: 0...2, using: &generator)).map { _ in .number(DocumentNumber(Int64.random(in: 0...2, using: &generator))) })
        }
    }

    /// A value that is not an object.
    mutating func leaf() -> Document { scalar() }

    mutating func value(depth: Int) -> Document {
        depth > 0 && chance(40) ? object(depth: depth) : scalar()
    }

    mutating func object(depth: Int) -> Document {
        var members: [String: Document] = [:]
        for _ in 0..<Int.random(in: 1...4, using: &generator) {
            members[Self.names.randomElement(using: &generator)!] = value(depth: depth - 1)
        }
        return .object(members)
    }

    /// Paths an edit can target: every member present, and one absent name in each object.
    func editablePaths(in document: Document, at path: DocumentPath = DocumentPath()) -> [DocumentPath] {
        guard case .object(let members) = document else { return [] }
        var paths = members.flatMap { [path.appending($0.key)] + editablePaths(in: $0.value, at: path.appending($0.key)) }
        if let absent = Self.names.first(where: { members[$0] == nil }) { paths.append(path.appending(absent)) }
        return paths
    }

    /// Up to `count` edit targets, none a prefix of another (so edits to them commute), none
    /// related to those in `avoiding`.
    mutating func disjointPaths(in document: Document, count: Int, avoiding: [DocumentPath] = []) -> [DocumentPath] {
        var chosen: [DocumentPath] = []
        for path in editablePaths(in: document).shuffled(using: &generator) where chosen.count < count {
            if !(chosen + avoiding).contains(where: { $0.isRelated(to: path) }) { chosen.append(path) }
        }
        return chosen
    }

    /// A new value for `path` unlike the current one: nil (removal) sometimes when present.
    mutating func edit(of current: Document?, allowObjects: Bool = true) -> Document? {
        while true {
            let candidate: Document? = current != nil && chance(20) ? nil : (allowObjects ? value(depth: 2) : leaf())
            if candidate != current { return candidate }
        }
    }
}

extension DocumentPath {
    /// True when one path is a prefix of the other (or they are the same member).
    func isRelated(to other: DocumentPath) -> Bool {
        let shorter = min(names.count, other.names.count)
        // Swift's equality: two spellings of one name are one member.
        return names.prefix(shorter).elementsEqual(other.names.prefix(shorter))
    }
}

extension Document {
    /// The value at `path` (exact spellings), or nil.
    func value(at path: DocumentPath) -> Document? {
        var current: Document? = self
        for name in path.names {
            guard case .object(let members)? = current else { return nil }
            current = members.member(spelled: name)
        }
        return current
    }

    /// This document with `value` at `path` (nil removes it); every parent must be an object.
    /// A member keeps its spelling.
    func setting(_ path: DocumentPath, to value: Document?) -> Document {
        guard let first = path.names.first else { return value ?? .null }
        guard case .object(var members) = self else { preconditionFailure("edit below a non-object at \(path)") }
        let name = members.index(forKey: first).map { members[$0].key } ?? first
        let rest = DocumentPath(Array(path.names.dropFirst()))
        let child = rest.names.isEmpty ? value : members[name]?.setting(rest, to: value)
        members.removeValue(forKey: name)
        if let child { members[name] = child }
        return .object(members)
    }
}
