import ArchiveStore
import Foundation
import TestSupport
import Testing

@testable import ArchiveMerge

/// A model with the kinds of values stores hold; the tests encode models with the store's own
/// `ArchiveCodec`, which the module cannot import.
private struct Profile: Encodable {
    struct Address: Encodable {
        var city: String
        var postCode: String?
        var location: [Double]
    }

    var name: String
    var age: Int
    var ratio: Double
    var whole: Double
    var big: UInt64
    var active: Bool
    var note: String?
    var tags: [String]
    var address: Address
    var scores: [String: Int]
    var nothing: Int?

    enum CodingKeys: String, CodingKey {
        case name, age, ratio, whole, big, active, note, tags, address, scores, nothing
        case dotted = "a.b/c"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        try container.encode(age, forKey: .age)
        try container.encode(ratio, forKey: .ratio)
        try container.encode(whole, forKey: .whole)
        try container.encode(big, forKey: .big)
        try container.encode(active, forKey: .active)
        try container.encodeIfPresent(note, forKey: .note)
        try container.encode(tags, forKey: .tags)
        try container.encode(address, forKey: .address)
        try container.encode(scores, forKey: .scores)
        try container.encode("slash/and \"quote\" \u{1} \u{2028} caf\u{E9}", forKey: .dotted)
    }

    init() {
        name = "Ann </script>"
        age = -42
        ratio = 0.1
        whole = 2.0
        big = UInt64.max
        active = true
        note = nil
        tags = ["a", "b/c", ""]
        address = Address(city: "Z\u{FC}rich", postCode: "8001", location: [47.37, 8.54, 1e-7, 1e300])
        scores = ["x": 1, "y.z": 2, "": 3]
        nothing = nil
    }
}

/// Members declared in sorted order: PropertyListEncoder writes a model's in declaration order.
private struct Dated: Codable, Equatable {
    var blob: Data
    var count: Int
    var nested: [String: [Double]]
    var ratio: Double
    var when: Date
}

@Suite struct DocumentCodecTests {
    @Test func jsonIsWrittenByteForByteAsTheStoresCodecWritesTheModel() throws {
        let bytes = try ArchiveCodec.json.encode(Profile())
        let document = try Document(json: bytes)
        #expect(try document.jsonData() == bytes)
        // The same when read from unsorted, spaced, escaped text.
        let messy = #" { "b" : [1, 2.50, 1E2] , "a": "\/\u00e9" } "#
        #expect(try Document(json: Data(messy.utf8)).jsonData() == Data(#"{"a":"/é","b":[1,2.5,100]}"#.utf8))
    }

    @Test func binaryPropertyListsAreWrittenByteForByteAsTheStoresCodecWritesTheModel() throws {
        let model = Dated(
            blob: Data([0, 1, 255]), count: -7, nested: ["a.b": [0.5, -1e-3], "": []], ratio: 0.25,
            when: Date(timeIntervalSinceReferenceDate: 812_345.5))
        let bytes = try ArchiveCodec.propertyList.encode(model)
        let document = try Document(propertyList: bytes)
        #expect(try document.propertyListData() == bytes)
        #expect(try ArchiveCodec.propertyList.decode(Dated.self, from: document.propertyListData()) == model)
    }

    /// A dictionary's iteration order depends on its capacity and history; the bytes must not.
    @Test func propertyListBytesDoNotDependOnMemberOrder() throws {
        let names = (0..<40).map { "member\($0)" }
        var small: [String: Document] = [:]
        for name in names { small[name] = .string(name) }
        var large: [String: Document] = [:]
        large.reserveCapacity(4096)
        for name in names.reversed() { large[name] = .string(name) }
        #expect(try Document.object(small).propertyListData() == Document.object(large).propertyListData())
    }

    /// The planner maps a store's codec to a format by its raw value: they must not drift.
    @Test func formatsAreNamedAsTheStoresCodecs() throws {
        #expect(DocumentFormat.allCases.map(\.rawValue) == ArchiveCodec.allCases.map(\.rawValue))
        let model = Dated(blob: Data([1]), count: 1, nested: [:], ratio: 0.5, when: Date(timeIntervalSinceReferenceDate: 2))
        for codec in ArchiveCodec.allCases {
            let format = try #require(DocumentFormat(rawValue: codec.rawValue))
            if codec == .json {
                let bytes = try codec.encode(Profile())
                #expect(try Document(bytes, format: format).data(in: format) == bytes)
            } else {
                let bytes = try codec.encode(model)
                #expect(try Document(bytes, format: format).data(in: format) == bytes)
            }
        }
    }

    @Test func xmlPropertyListsReadAsTheirBinaryForm() throws {
        let model = Dated(blob: Data("hi".utf8), count: 3, nested: ["k": [2.5]], ratio: 1.5, when: Date(timeIntervalSinceReferenceDate: 1))
        let xml = PropertyListEncoder()
        xml.outputFormat = .xml
        #expect(try Document(propertyList: xml.encode(model)) == Document(propertyList: ArchiveCodec.propertyList.encode(model)))
    }

    /// A `Double` property holding 2.0 is written as an integer, and reads back as 2.0.
    @Test func integralRealsReadBackIntoDoubles() throws {
        struct Pair: Codable, Equatable {
            var whole: Double
            var big: UInt64
        }
        let model = Pair(whole: 2.0, big: UInt64.max)
        let document = try Document(propertyList: ArchiveCodec.propertyList.encode(model))
        #expect(try ArchiveCodec.propertyList.decode(Pair.self, from: document.propertyListData()) == model)
        #expect(try ArchiveCodec.json.decode(Pair.self, from: Document(json: ArchiveCodec.json.encode(model)).jsonData()) == model)
    }

    /// Equal exactly when `JSONDecoder` reads both into the same `Int64`, `UInt64` or `Double`.
    @Test func numbersCompareAsTheDecoderReadsThem() throws {
        func number(_ text: String) throws -> Document { try Document(json: Data(text.utf8)) }
        for (a, b) in [
            ("1", "1.0"), ("1", "1e0"), ("100", "1E+2"), ("1", "10e-1"), ("0", "-0"), ("0.1", "0.10000000000000000555"),
            ("-9223372036854775808", "-9223372036854775808.0"), ("18446744073709551615", "1.8446744073709551615e19"),
        ] {
            #expect(try number(a) == number(b), "\(a) == \(b)")
        }
        for (a, b) in [
            ("1", "1.5"), ("9007199254740993", "9007199254740992"), ("18446744073709551615", "18446744073709551614"), ("1", "true"), ("0", "null"),
            ("1", "\"1\""),
        ] {
            #expect(try number(a) != number(b), "\(a) != \(b)")
        }
        #expect(try Document(json: Data(#"{"a":1,"b":[true,null]}"#.utf8)) == Document(json: Data(#"{"b":[true,null],"a":1.0}"#.utf8)))
        #expect(try Document(json: Data(#"["\u00e9"]"#.utf8)) != Document(json: Data(#"["e\u0301"]"#.utf8)))
    }

    @Test(arguments: [
        "", " ", "{", "[1,]", "[1 2]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "{\"a\":1,\"a\":2}", "{\"\u{E9}\":1,\"e\u{301}\":2}", "01", "-", "1.",
        "1e", ".5", "+1", "1e400", "-1e400", "NaN", "nul", "truex", "1 2",
        "\"a", "\"\u{1}\"", "\"\\x\"", "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"\\u12\"", "\"\\u+123\"",
        String(repeating: "[", count: 300) + String(repeating: "]", count: 300),
    ])
    func badJSONIsRefused(_ text: String) {
        #expect(throws: DocumentError.self) { try Document(json: Data(text.utf8)) }
    }

    /// Seeded mutations of a valid document: each is refused or read (and then written back and
    /// read again unchanged), never a trap.
    @Test func mutatedJSONIsRefusedOrRead() throws {
        let valid = [UInt8](try ArchiveCodec.json.encode(Profile()))
        var random = SeededGenerator(seed: 2021)
        for _ in 0..<20_000 {
            var mutated = valid
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                let at = Int.random(in: 0..<mutated.count, using: &random)
                mutated[at] = Array(#"{}[]",:"\0123456789.eE+-tfnu"#.utf8).randomElement(using: &random)!
            }
            guard let document = try? Document(json: Data(mutated)) else { continue }
            #expect(try Document(json: document.jsonData()) == document)
        }
    }

    /// At the depth limit, on a test's thread: read, written in both codecs, merged and diffed.
    @Test func documentsAtTheDepthLimitWork() throws {
        let depth = DocumentLimits.standard.depth
        let text = String(repeating: #"{"a":["#, count: depth / 2) + "1" + String(repeating: "]}", count: depth / 2)
        let document = try Document(json: Data(text.utf8))
        #expect(try Document(json: document.jsonData()) == document)
        #expect(try Document(propertyList: document.propertyListData()) == document)
        #expect(Document.merge(base: document, ours: document, theirs: document) == .merged(document, paths: []))
        #expect(Document.diff(document, document).isEmpty)
        #expect(throws: DocumentError.self) { try Document(json: Data(("[" + text + "]").utf8)) }
    }

    @Test func jsonThatIsNotUTF8IsRefused() {
        #expect(throws: DocumentError.self) { try Document(json: Data([0x22, 0xC3, 0x28, 0x22])) }
        #expect(throws: DocumentError.self) { try Document(json: Data([0x22, 0xED, 0xA0, 0x80, 0x22])) }
    }

    @Test func valuesWithNoFormInTheOtherCodecAreRefused() {
        #expect(throws: DocumentError.self) { try Document.array([.date(Date())]).jsonData() }
        #expect(throws: DocumentError.self) { try Document.object(["d": .data(Data())]).jsonData() }
        #expect(throws: DocumentError.self) { try Document.object(["n": .null]).propertyListData() }
    }
}
