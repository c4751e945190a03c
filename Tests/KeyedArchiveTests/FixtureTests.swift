import Foundation
import KeyedArchive
import Testing

/// A JSON value as the independent reader (nska_deserialize) wrote it; booleans kept apart from numbers.
enum ExpectedJSON: Decodable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([ExpectedJSON])
    case object([String: ExpectedJSON])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let flag = try? container.decode(Bool.self) {
            self = .bool(flag)
        } else if let number = try? container.decode(Double.self) {
            self = .number(number)
        } else if let text = try? container.decode(String.self) {
            self = .string(text)
        } else if let elements = try? container.decode([ExpectedJSON].self) {
            self = .array(elements)
        } else {
            self = .object(try container.decode([String: ExpectedJSON].self))
        }
    }
}

/// Where `value` differs from what nska_deserialize decoded, as paths with both sides.
/// Its conventions: bytes as {"$data": base64}, dates as {"$date": ISO 8601 without zone}.
func differences(_ value: KeyedValue, _ expected: ExpectedJSON, at path: String = "$") -> [String] {
    switch (value, expected) {
    case (.null, .null): return []
    case (.bool(let a), .bool(let b)): return a == b ? [] : ["\(path): \(a) != \(b)"]
    case (.integer(let a), .number(let b)): return Double(a) == b ? [] : ["\(path): \(a) != \(b)"]
    case (.real(let a), .number(let b)): return a == b ? [] : ["\(path): \(a) != \(b)"]
    case (.string(let a), .string(let b)): return a == b ? [] : ["\(path): \(a.debugDescription) != \(b.debugDescription)"]
    case (.data(let a), .object(let b)) where b.keys.sorted() == ["$data"]:
        return .string(a.base64EncodedString()) == b["$data"] ? [] : ["\(path): data \(a.base64EncodedString()) != \(b)"]
    case (.date(let a), .object(let b)) where b.keys.sorted() == ["$date"]:
        let shown = a.formatted(.iso8601).replacingOccurrences(of: "Z", with: "")
        return .string(shown) == b["$date"] ? [] : ["\(path): date \(shown) != \(b)"]
    case (.array(let a), .array(let b)):
        guard a.count == b.count else { return ["\(path): \(a.count) elements != \(b.count)"] }
        return zip(a, b).enumerated().flatMap { differences($0.element.0, $0.element.1, at: "\(path)[\($0.offset)]") }
    case (.object(let object), .object(let b)):
        return fields(object.fields, b, path)
    case (.dictionary(let a), .object(let b)):
        return fields(a, b, path)
    default:
        return ["\(path): \(value) != \(expected)"]
    }
}

private func fields(_ a: [String: KeyedValue], _ b: [String: ExpectedJSON], _ path: String) -> [String] {
    guard Set(a.keys) == Set(b.keys) else { return ["\(path): keys \(a.keys.sorted()) != \(b.keys.sorted())"] }
    return a.keys.sorted().flatMap { differences(a[$0]!, b[$0]!, at: "\(path).\($0)") }
}

@Suite("The fixtures, against an independent reader")
struct FixtureTests {
    static let expected: [String: ExpectedJSON] = {
        let data = try! fixture("expected-by-nska_deserialize.json")
        return try! JSONDecoder().decode([String: ExpectedJSON].self, from: data)
    }()

    @Test("each good fixture decodes value for value as nska_deserialize decoded it", arguments: goodFixtures)
    func agreesWithIndependentReader(file: String) throws {
        var expected = try #require(Self.expected[file])
        // nska_deserialize leaves NSMutableData as its raw {"NS.data": ...} dictionary (its README
        // says so); the data inside is what NSMutableData holds.
        if case .object(var fields) = expected, case .object(let raw)? = fields["muData"], let inner = raw["NS.data"] {
            fields["muData"] = inner
            expected = .object(fields)
        }
        let value = try KeyedArchive.decode(try fixture(file))
        #expect(differences(value, expected) == [])
    }

    @Test("integers stay integers, reals stay reals, booleans stay booleans")
    func numberKinds() throws {
        let person = try KeyedArchive.decode(try fixture("WZX_PersonModel_person1.archiver"))
        #expect(person["w_int"] == .integer(4))
        #expect(person["w_uinteger"] == .integer(6))
        #expect(person["w_doule"] == .real(2.2))
        #expect(person["w_float"] == .real(Double(Float(1.1))))
        #expect(person["w_bool"] == .bool(true))
    }

    @Test("an object keeps its class chain, so a subclass's inherited fields are known to be inherited")
    func classChain() throws {
        guard case .object(let male) = try KeyedArchive.decode(try fixture("MalePerson.archiver")) else {
            Issue.record("the root is not an object")
            return
        }
        #expect(male.classes == ["MalePerson", "Person", "NSObject"])
        #expect(male.className == "MalePerson")
        #expect(male.fields["name"] == .string("Jason"))
        #expect(male.fields["born"] == .date(Date(timeIntervalSince1970: 725_846_400)))
    }

    @Test("NSMutableString, NSMutableData, NSSet and NSMutableDictionary become plain values")
    func mutableClasses() throws {
        let person = try KeyedArchive.decode(try fixture("WZX_PersonModel_person1.archiver"))
        #expect(person["muStr"] == .string("muStr"))
        #expect(person["muData"] == .data(Data("str".utf8)))
        #expect(person["muSet"] == .array([.string("1"), .string("2"), .string("3")]))
        #expect(person["muDic"] == .dictionary(["key": .string("muValue")]))
    }

    @Test("UIColor comes through as its components")
    func color() throws {
        let person = try KeyedArchive.decode(try fixture("PersonCache.archiver"))
        guard case .object(let color)? = person["car"]?["color"] else {
            Issue.record("no color")
            return
        }
        #expect(color.className == "UIColor")
        #expect(color.fields["UIRed"] == .real(0) && color.fields["UIAlpha"] == .real(1))
        #expect(color.fields["UIColorComponentCount"] == .integer(4))
    }

    @Test(
        "each hostile fixture gives its own clear error",
        arguments: [
            ("hostile/truncated.archiver", "not a readable property list"),
            ("hostile/not_a_plist.archiver", "not a readable property list"),
            ("hostile/no_top.archiver", "$top"), ("hostile/uid_out_of_range.archiver", "9999"),
        ])
    func hostile(file: String, mentioning: String) throws {
        let data = try fixture(file)
        let error = #expect(throws: KeyedArchiveError.self) { try KeyedArchive.decode(data) }
        let shown = error?.description ?? ""
        #expect(shown.contains(mentioning), "\(shown)")
        if file.hasSuffix("uid_out_of_range.archiver") { #expect(error == .uidOutOfRange(uid: 9999, objectCount: 3)) }
    }
}
