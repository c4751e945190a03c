import Foundation
import Testing

@testable import ArchiveMerge

/// The structural diff `conflicts --diff` will print.
@Suite struct DiffTests {
    private func document(_ json: String) throws -> Document { try Document(json: Data(json.utf8)) }

    @Test func differencesAreListedByPathWithBothValuesAndTheBase() throws {
        let base = try document(#"{"name":"Ann","address":{"city":"Oslo","zip":"0150"},"tags":["a"],"gone":1}"#)
        let current = try document(#"{"name":"Anna","address":{"city":"Bergen","zip":"0150"},"tags":["a","b"],"gone":1}"#)
        let copy = try document(#"{"address":{"city":"Trondheim","zip":"0150","post.box":7},"tags":["a","c"],"gone":1.0,"name":"Annie"}"#)
        let differences = Document.diff(current, copy, base: base)
        #expect(
            differences.map(\.description) == [
                #"address.city: "Bergen" → "Trondheim" (base: "Oslo")"#,
                #"address."post.box": absent → 7"#,
                #"name: "Anna" → "Annie" (base: "Ann")"#,
                #"tags: ["a", "b"] → ["a", "c"] (base: ["a"])"#,
            ])
        #expect(
            differences[1]
                == DocumentDifference(path: DocumentPath(["address", "post.box"]), first: nil, second: .number(DocumentNumber(Int64(7))), base: nil))
    }

    @Test func withoutABaseOrBetweenEqualDocuments() throws {
        let a = try document(#"{"x":{"y":1},"z":true}"#)
        let b = try document(#"{"x":[1],"z":true}"#)
        #expect(
            Document.diff(a, b) == [
                DocumentDifference(
                    path: DocumentPath(["x"]), first: .object(["y": .number(DocumentNumber(Int64(1)))]),
                    second: .array([.number(DocumentNumber(Int64(1)))]), base: nil)
            ])
        #expect(Document.diff(a, try document(#"{"z":true,"x":{"y":1.0}}"#)).isEmpty)
        #expect(Document.diff(.string("a"), .number(DocumentNumber(Int64(1)))).map(\.path) == [DocumentPath()])
    }
}
