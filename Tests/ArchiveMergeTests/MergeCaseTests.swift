import ArchiveStore
import Foundation
import Testing

@testable import ArchiveMerge

/// The issue's named cases, each on small JSON documents.
@Suite struct MergeCaseTests {
    private func document(_ json: String) throws -> Document { try Document(json: Data(json.utf8)) }

    private func merge(_ base: String, _ ours: String, _ theirs: String) throws -> MergeResult {
        Document.merge(base: try document(base), ours: try document(ours), theirs: try document(theirs))
    }

    private func paths(_ written: String...) -> [DocumentPath] {
        written.map { DocumentPath($0.split(separator: ".", omittingEmptySubsequences: false).map(String.init)) }
    }

    @Test func disjointFieldsMerge() throws {
        let result = try merge(#"{"name":"Ann","city":"Oslo"}"#, #"{"name":"Anna","city":"Oslo"}"#, #"{"name":"Ann","city":"Bergen"}"#)
        #expect(result == .merged(try document(#"{"name":"Anna","city":"Bergen"}"#), paths: paths("city", "name")))
    }

    @Test func theSameFieldChangedBothWaysIsAConflict() throws {
        let result = try merge(#"{"name":"Ann","n":1}"#, #"{"name":"Anna","n":1}"#, #"{"name":"Annie","n":2}"#)
        #expect(result == .conflicts(paths("name")))
    }

    @Test func theSameChangeOnBothSidesIsTakenOnce() throws {
        let result = try merge(#"{"name":"Ann","n":1}"#, #"{"name":"Anna","n":1}"#, #"{"name":"Anna","n":1.0}"#)
        #expect(result == .merged(try document(#"{"name":"Anna","n":1}"#), paths: paths("name")))
    }

    @Test func nestedObjectsMergeMemberByMember() throws {
        let base = #"{"address":{"city":"Oslo","zip":"0150","geo":{"lat":1}}}"#
        let ours = #"{"address":{"city":"Bergen","zip":"0150","geo":{"lat":1}}}"#
        let theirs = #"{"address":{"city":"Oslo","zip":"5003","geo":{"lat":2}}}"#
        #expect(
            try merge(base, ours, theirs)
                == .merged(
                    try document(#"{"address":{"city":"Bergen","zip":"5003","geo":{"lat":2}}}"#),
                    paths: paths("address.city", "address.geo.lat", "address.zip")))
        let clash = #"{"address":{"city":"Trondheim","zip":"0150","geo":{"lat":1}}}"#
        #expect(try merge(base, ours, clash) == .conflicts(paths("address.city")))
    }

    @Test func anArrayEditedOnBothSidesIsAConflictEvenWhereElementsDiffer() throws {
        let base = #"{"tags":["a","b"],"n":1}"#
        #expect(try merge(base, #"{"tags":["a","b","c"],"n":1}"#, #"{"tags":["z","b"],"n":1}"#) == .conflicts(paths("tags")))
        #expect(
            try merge(base, #"{"tags":["a","b","c"],"n":1}"#, #"{"tags":["a","b"],"n":2}"#)
                == .merged(try document(#"{"tags":["a","b","c"],"n":2}"#), paths: paths("n", "tags")))
    }

    @Test func removedOnOneSideAndEditedOnTheOtherIsAConflict() throws {
        #expect(try merge(#"{"name":"Ann","n":1}"#, #"{"n":1}"#, #"{"name":"Anna","n":1}"#) == .conflicts(paths("name")))
        #expect(
            try merge(#"{"name":"Ann","n":1}"#, #"{"n":1}"#, #"{"name":"Ann","n":2}"#)
                == .merged(try document(#"{"n":2}"#), paths: paths("n", "name")))
        #expect(try merge(#"{"name":"Ann","n":1}"#, #"{"n":1}"#, #"{"n":1}"#) == .merged(try document(#"{"n":1}"#), paths: paths("name")))
    }

    @Test func aChangeOfTypeIsAConflict() throws {
        #expect(try merge(#"{"n":1,"x":0}"#, #"{"n":"1","x":0}"#, #"{"n":2,"x":0}"#) == .conflicts(paths("n")))
        // An object on one side, a scalar on the other: no recursion into either.
        #expect(try merge(#"{"a":{"b":1}}"#, #"{"a":{"b":2}}"#, #"{"a":[1]}"#) == .conflicts(paths("a")))
        #expect(try merge(#"{"a":1}"#, #"[1]"#, #"{"a":2}"#) == .conflicts([DocumentPath()]))
    }

    @Test func aMemberAddedOnBothSidesDifferentlyIsAConflict() throws {
        #expect(try merge(#"{}"#, #"{"a":{"x":1}}"#, #"{"a":{"y":1}}"#) == .conflicts(paths("a")))
    }

    @Test func aNameRespelledIsAChangeOfThatMember() throws {
        let base = Document.object(["\u{E9}": .number(DocumentNumber(Int64(1))), "n": .number(DocumentNumber(Int64(1)))])
        let respelled = Document.object(["e\u{301}": .number(DocumentNumber(Int64(1))), "n": .number(DocumentNumber(Int64(1)))])
        let edited = Document.object(["\u{E9}": .number(DocumentNumber(Int64(1))), "n": .number(DocumentNumber(Int64(2)))])
        let changed = Document.object(["\u{E9}": .number(DocumentNumber(Int64(5))), "n": .number(DocumentNumber(Int64(1)))])
        #expect(
            Document.merge(base: base, ours: respelled, theirs: edited)
                == .merged(
                    .object(["e\u{301}": .number(DocumentNumber(Int64(1))), "n": .number(DocumentNumber(Int64(2)))]),
                    paths: [DocumentPath(["e\u{301}"]), DocumentPath(["n"]), DocumentPath(["\u{E9}"])]))
        #expect(Document.merge(base: base, ours: respelled, theirs: changed) == .conflicts([DocumentPath(["e\u{301}"])]))
    }

    private struct Person: Codable, Equatable {
        struct Address: Codable, Equatable {
            var city: String
            var zip: String
        }
        var name: String
        var address: Address
        var tags: [String]
        var score: Double
    }

    /// Models saved by the store's codec, edited apart on two sides: the merged bytes load as
    /// the model with both edits, in either codec; in JSON they are also the codec's own bytes
    /// for it (a property list's members come out sorted, a model's in declaration order).
    @Test(arguments: ArchiveCodec.allCases)
    func disjointEditsOfAModelLoadAsTheModelWithBoth(codec: ArchiveCodec) throws {
        let base = Person(name: "Ann", address: .init(city: "Oslo", zip: "0150"), tags: ["a"], score: 1.5)
        var ours = base
        ours.address.city = "Bergen"
        ours.score = 2.25
        var theirs = base
        theirs.address.zip = "5003"
        theirs.tags.append("b")
        var both = ours
        both.address.zip = "5003"
        both.tags.append("b")
        let format = try #require(DocumentFormat(rawValue: codec.rawValue))
        func read(_ person: Person) throws -> Document { try Document(codec.encode(person), format: format) }
        let result = Document.merge(base: try read(base), ours: try read(ours), theirs: try read(theirs))
        guard case .merged(let merged, let changed) = result else { return #expect(Bool(false), "\(result)") }
        #expect(try codec.decode(Person.self, from: merged.data(in: format)) == both)
        #expect(changed == paths("address.city", "address.zip", "score", "tags"))
        if codec == .json { #expect(try merged.data(in: format) == codec.encode(both)) }
    }

    @Test func pathsAreWrittenWithDotsAndQuotedNames() {
        #expect(DocumentPath(["address", "city"]).description == "address.city")
        #expect(DocumentPath(["address", "post.code"]).description == #"address."post.code""#)
        #expect(DocumentPath(["", "a\"b", "x y"]).description == "\"\".\"a\\\"b\".\"x y\"")
        #expect(DocumentPath().description == ".")
        #expect(DocumentPath(["caf\u{E9}", "n_1-2"]).description == "caf\u{E9}.n_1-2")
    }
}
