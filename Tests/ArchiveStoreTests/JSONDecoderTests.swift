import ArchiveJSON
import Foundation
import Testing

@testable import ArchiveStore

/// SplitMix64: seeded, so that a failing case can be replayed from its seed.
/// (The same SplitMix64 as ArchiveSyncTests' and KeyedArchiveTests': test targets cannot share a file.)
private struct Seeded: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A model with every kind of value the store's own JSON decoder answers itself.
private struct Specimen: Codable, Equatable {
    enum Kind: String, Codable { case plain, special }
    enum Shape: Codable, Equatable {
        case dot
        case line(length: Double)
        case named(String, Int)
    }
    struct Part: Codable, Equatable {
        var label: String
        var weight: Float
        var note: String?
    }

    var text: String
    var count: Int
    var small: Int8
    var short: UInt16
    var wide: Int64
    var unsigned: UInt64
    var ratio: Double
    var single: Float
    var flag: Bool
    var when: Date
    var optional: Int?
    var missing: String?
    var words: [String]
    var grid: [[Int]]
    var parts: [Part]
    var index: [String: Int]
    var maybe: [Double?]
    var kind: Kind
    var shapes: [Shape]
    var id: UUID
    var blob: Data
    var link: URL

    static func random(using random: inout Seeded) -> Specimen {
        func text() -> String {
            let pool: [String] = [
                "a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\u{0}", "\u{1F}", "\u{7F}", "é", "e\u{301}", "日本", "🎉", "\u{2028}",
                "\u{FFFF}", "K", "\u{212A}", "{", "]", ",", ":",
            ]
            return (0..<Int.random(in: 0...12, using: &random)).map { _ in pool.randomElement(using: &random)! }.joined()
        }
        func double() -> Double {
            switch Int.random(in: 0..<6, using: &random) {
            case 0: return Double(Int.random(in: -1_000_000...1_000_000, using: &random))
            case 1: return Double.random(in: -1...1, using: &random)
            case 2: return Double(bitPattern: random.next() & 0x7FEF_FFFF_FFFF_FFFF)  // any finite magnitude
            case 3:
                return [0.0, -0.0, 0.1, 1e-300, .leastNonzeroMagnitude, .greatestFiniteMagnitude, 9_007_199_254_740_992].randomElement(
                    using: &random)!
            case 4: return Double(Int64.random(in: .min ... .max, using: &random))
            default: return Double.random(in: -1e20...1e20, using: &random)
            }
        }
        func part() -> Part {
            Part(
                label: text(), weight: Float(bitPattern: UInt32(truncatingIfNeeded: random.next()) & 0x7F7F_FFFF),
                note: Bool.random(using: &random) ? text() : nil)
        }
        let single = Float(double())
        return Specimen(
            text: text(), count: Int.random(in: .min ... .max, using: &random), small: Int8.random(in: .min ... .max, using: &random),
            short: UInt16.random(in: .min ... .max, using: &random), wide: Int64.random(in: -1000...1000, using: &random),
            unsigned: UInt64.random(in: .min ... .max, using: &random), ratio: double(), single: single.isFinite ? single : 1,
            flag: Bool.random(using: &random),
            when: Date(timeIntervalSinceReferenceDate: Double.random(in: -1e9...1e9, using: &random).rounded(.down) / 64),
            optional: Bool.random(using: &random) ? Int.random(in: -9...9, using: &random) : nil, missing: nil,
            words: (0..<Int.random(in: 0...5, using: &random)).map { _ in text() },
            grid: (0..<Int.random(in: 0...3, using: &random)).map { _ in
                (0..<Int.random(in: 0...3, using: &random)).map { _ in Int.random(in: -99...99, using: &random) }
            },
            parts: (0..<Int.random(in: 0...3, using: &random)).map { _ in part() },
            index: Dictionary(uniqueKeysWithValues: (0..<Int.random(in: 0...4, using: &random)).map { n in ("\(text())#\(n)", n) }),
            maybe: (0..<Int.random(in: 0...3, using: &random)).map { _ in Bool.random(using: &random) ? double() : nil },
            kind: Bool.random(using: &random) ? .plain : .special,
            shapes: (0..<Int.random(in: 0...3, using: &random)).map { _ in
                [.dot, .line(length: double()), .named(text(), Int.random(in: -5...5, using: &random))].randomElement(using: &random)!
            },
            id: UUID(), blob: Data((0..<Int.random(in: 0...9, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }),
            link: URL(
                string: ["https://example.com/a?b=c#d", "file:///tmp/x%20y", "relative/path", "mailto:a@b.c", "http://[::1]:8080/"].randomElement(
                    using: &random)!)!)
    }
}

/// A model that catches a decoding error and carries on, as some models do.
private struct Lenient: Codable, Equatable {
    var number: Int?
    var name: String

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        number = try? container.decode(Int.self, forKey: .number)
        name = try container.decode(String.self, forKey: .name)
    }
}

/// Whether the store's decoder agrees with JSONDecoder on `bytes` read as a `T`: it may give
/// up, but never succeeds where JSONDecoder throws, nor with another value; and
/// `ArchiveCodec.json.decode` gives JSONDecoder's value or throws where it throws.
private func agrees<T: Decodable & Equatable>(_ type: T.Type, _ bytes: some Collection<UInt8>) -> (agrees: Bool, fast: T?, decodable: Bool) {
    let data = Data(bytes)
    let foundation = Result { try JSONDecoder().decode(type, from: data) }
    let fast = decodeArchiveJSON(type, from: data)
    let codec = Result { try ArchiveCodec.json.decode(type, from: data) }
    switch (foundation, codec) {
    case (.success(let expected), .success(let value)):
        return (value == expected && (fast == nil || fast == expected), fast, true)
    case (.failure, .failure):
        return (fast == nil, fast, false)
    default:
        return (false, fast, false)
    }
}

private struct Holder<Value: Codable & Equatable>: Codable, Equatable {
    var value: Value
}

@Suite("The store's JSON decoder gives exactly JSONDecoder's values, and never succeeds where it fails")
struct JSONDecoderTests {
    @Test("2,000 seeded random models decode on the fast path, equal to JSONDecoder's")
    func randomModels() throws {
        var random = Seeded(state: 6)
        for seed in 0..<2_000 {
            let model = Specimen.random(using: &random)
            let bytes = try ArchiveCodec.json.encode(model)
            let result = agrees(Specimen.self, bytes)
            #expect(result.agrees, "seed \(seed): \(String(decoding: bytes, as: UTF8.self))")
            // Keys with escapes or non-ASCII bytes (some of `index`'s) are left to JSONDecoder.
            if model.index.keys.allSatisfy({ $0.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x80 && $0 != 0x22 && $0 != 0x5C } }) {
                #expect(result.fast == model, "seed \(seed): the fast path gave up or differs: \(String(decoding: bytes, as: UTF8.self))")
            }
        }
    }

    @Test("The store's Profile sample (Data, URL, UUID, enums, dictionaries) decodes on the fast path, equal")
    func profile() throws {
        let bytes = try ArchiveCodec.json.encode(Profile.sample)
        #expect(agrees(Profile.self, bytes).agrees)
        #expect(try ArchiveCodec.json.decode(Profile.self, from: bytes) == Profile.sample)
        // Data (base64) and URL (a string) by JSONDecoder's rules for them, on the fast path.
        #expect(decodeArchiveJSON(Profile.self, from: bytes) == Profile.sample)
    }

    @Test("Every truncation, and 20,000 seeded mutations, of encoded models: the same outcome as JSONDecoder")
    func mutations() throws {
        var random = Seeded(state: 66)
        var decodable = 0
        var fastAnswers = 0
        for seed in 0..<1_000 {
            var model = Specimen.random(using: &random)
            // Plain keys, so that the unchanged bytes are on the fast path.
            model.index = Dictionary(uniqueKeysWithValues: model.index.values.map { ("k\($0)", $0) })
            let bytes = [UInt8](try ArchiveCodec.json.encode(model))
            if seed < 20 {
                for length in 0..<bytes.count {
                    #expect(agrees(Specimen.self, bytes[..<length]).agrees, "seed \(seed), \(length) bytes")
                }
            }
            for _ in 0..<20 {
                var mutated = bytes
                for _ in 0..<Int.random(in: 1...3, using: &random) where !mutated.isEmpty {
                    let position = Int.random(in: 0..<mutated.count, using: &random)
                    switch Int.random(in: 0..<5, using: &random) {
                    case 0: mutated[position] ^= 1 << UInt8.random(in: 0..<8, using: &random)
                    case 1: mutated[position] = Array(#"{}[],:"\-+.0123456789eEtrufalsn \#u{80}"#.utf8).randomElement(using: &random)!
                    case 2: mutated.remove(at: position)
                    case 3: mutated.insert(UInt8.random(in: 0...255, using: &random), at: position)
                    default: mutated[position] = UInt8.random(in: 0...255, using: &random)
                    }
                }
                let result = agrees(Specimen.self, mutated)
                #expect(result.agrees, "seed \(seed): \(mutated)")
                if result.decodable { decodable += 1 }
                if result.fast != nil { fastAnswers += 1 }
            }
        }
        // Mutations that leave a decodable model mostly change a value (a digit, a letter): most
        // of those stay on the fast path.
        #expect(decodable > 200 && fastAnswers * 2 > decodable, "\(fastAnswers) fast of \(decodable) decodable")
    }

    @Test("Numbers: JSONDecoder's values at the edges, and its refusals")
    func numbers() {
        for text in [
            "0", "-0", "1", "-1", "9223372036854775807", "-9223372036854775808", "9223372036854775808", "18446744073709551615",
            "18446744073709551616", "1.0", "1e2", "1E+2", "1e-2", "0.1", "-0.0", "1e400", "-1e400", "1e-400", "0e-400", "4.9e-324",
            "2.4703282292062328e-324", "0.30000000000000004", "123456789012345678901234567890", "01", "1.", ".5", "+1", "-", "1e", "0x10",
            "NaN", "Infinity", " 1 ", "1 2", "",
        ] {
            #expect(agrees(Int.self, Array(text.utf8)).agrees, "Int \(text)")
            #expect(agrees(Int8.self, Array(text.utf8)).agrees, "Int8 \(text)")
            #expect(agrees(UInt64.self, Array(text.utf8)).agrees, "UInt64 \(text)")
            #expect(agrees(Double.self, Array(text.utf8)).agrees, "Double \(text)")
            #expect(agrees(Float.self, Array(text.utf8)).agrees, "Float \(text)")
        }
        // -0 is -0.0, as strtod gives it.
        #expect(decodeArchiveJSON(Double.self, from: Data("-0".utf8))?.sign == .minus)
        #expect(decodeArchiveJSON(Double.self, from: Data("0.1".utf8)) == 0.1)
        #expect(decodeArchiveJSON(Int.self, from: Data("-9223372036854775808".utf8)) == .min)
    }

    @Test("Strings: escapes, surrogates, UTF-8, control characters and byte order marks")
    func strings() {
        let cases: [[UInt8]] = [
            Array(#""plain""#.utf8), Array(#""a\"b\\c\/d\b\f\n\r\t""#.utf8), Array(#""\u0000\u001f\u00e9\u65e5\uD83C\uDF89""#.utf8),
            Array(#""\uD83C""#.utf8), Array(#""\uDF89""#.utf8), Array(#""\uD83Cx""#.utf8), Array(#""\x""#.utf8), Array(#""\u12""#.utf8),
            Array("\"é日🎉\"".utf8), [0x22, 0xC3, 0x22], [0x22, 0xC0, 0xAF, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22],
            [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22],
            [0x22, 0x0A, 0x22], [0x22, 0x7F, 0x22], [0xEF, 0xBB, 0xBF, 0x22, 0x61, 0x22], [0x22, 0x00, 0x61, 0x00, 0x22, 0x00],
            Array(#""unterminated"#.utf8), Array(#"["a","b",]"#.utf8),
        ]
        for bytes in cases {
            #expect(agrees(String.self, bytes).agrees, "\(bytes)")
            #expect(agrees([String].self, bytes).agrees, "\(bytes)")
        }
        #expect(decodeArchiveJSON(String.self, from: Data(#""a\n\uD83C\uDF89""#.utf8)) == "a\n🎉")
    }

    @Test("Data and URL: JSONDecoder's base64 and URL(string:), canonical base64 on the fast path, the rest left to it")
    func dataAndURLs() {
        for text in [
            "", "AA==", "AB==", "AAA=", "AAB=", "AAAA", "Zm9vYmFy", "Zm9vYg==", "Zm9vYmE=", "A===", "AA", "AA=A", "====", " AAA", "AA\\/A", "-_8=",
            "Zm9v\nYmFy",
        ] {
            #expect(agrees(Holder<Data>.self, Array(#"{"value":"\#(text)"}"#.utf8)).agrees, "\(text)")
        }
        for text in ["https://example.com/a b", "", "http://[::1", "%", "a:b", "https://example.com/%41?q=%2F", "\\u00e9t\\u00e9"] {
            #expect(agrees(Holder<URL>.self, Array(#"{"value":"\#(text)"}"#.utf8)).agrees, "\(text)")
        }
        #expect(decodeArchiveJSON(Holder<Data>.self, from: Data(#"{"value":"Zm9vYg=="}"#.utf8))?.value == Data("foob".utf8))
        #expect(decodeArchiveJSON(Holder<Data>.self, from: Data(#"{"value":"AB=="}"#.utf8)) == nil)
        #expect(
            decodeArchiveJSON(Holder<URL>.self, from: Data(#"{"value":"https://example.com/"}"#.utf8))?.value == URL(string: "https://example.com/"))
    }

    @Test("Objects: duplicate keys, escaped and non-ASCII keys, missing and null values, nesting")
    func objects() {
        let cases = [
            #"{"number":1,"name":"a"}"#, #"{"number":1,"name":"a","name":"b"}"#, #"{"name":"a","number":"x"}"#, #"{"name":"a"}"#,
            #"{"name":"a","number":null}"#, #"{"n\u0061me":"a","number":2}"#, #"{"name":"a","number":1,}"#, #"{"name":"a" "number":1}"#,
            #"{"name":"a","number":1}x"#, #"[{"name":"a"}]"#, #"{"name":1}"#, #"{"name":"a","extra":[1,{"x":[]}],"number":3}"#,
            #"{"name":"a","extra":[1,{"x":[}],"number":3}"#, " \n\t{ \"name\" : \"a\" } \r\n",
        ]
        for text in cases {
            #expect(agrees(Lenient.self, Array(text.utf8)).agrees, "\(text)")
            #expect(agrees([String: Int].self, Array(text.utf8)).agrees, "\(text)")
        }
        // The first of duplicate keys wins, as in JSONDecoder.
        #expect(decodeArchiveJSON([String: String].self, from: Data(#"{"k":"first","k":"second"}"#.utf8)) == nil)
        #expect(agrees([String: String].self, Array(#"{"k":"first","k":"second"}"#.utf8)).agrees)
        #expect(decodeArchiveJSON(Lenient.self, from: Data(#"{"name":"first","name":"second","number":1}"#.utf8))?.name == "first")
        #expect(decodeArchiveJSON([String: [Int]].self, from: Data(#"{"a":[1,2],"b":[]}"#.utf8)) == ["a": [1, 2], "b": []])
    }

    @Test("A document of more values than the first node buffer holds (1,024) decodes on the fast path")
    func largeDocument() throws {
        let numbers = (0..<5_000).map { $0 * 7 - 999 }
        let bytes = try ArchiveCodec.json.encode(["numbers": numbers])
        #expect(decodeArchiveJSON([String: [Int]].self, from: bytes) == ["numbers": numbers])
    }

    @Test("Deep nesting is refused without a crash; JSONDecoder's answer stands")
    func nesting() {
        for depth in [50, 99, 100, 101, 600, 100_000] {
            let bytes = Array(String(repeating: "[", count: depth).utf8) + Array(String(repeating: "]", count: depth).utf8)
            #expect(decodeArchiveJSON([Int].self, from: Data(bytes)) == nil)
        }
        #expect(decodeArchiveJSON([[[Int]]].self, from: Data("[[[1]],[]]".utf8)) == [[[1]], []])
    }

    /// Found by the fuzz target `fuzz-json` (its input is kept in Fuzz/Crashes/): JSONDecoder
    /// refuses `0e8` as a Double, and the store's decoder gave 0.0 for it.
    @Test("0e1 to 0E9 as a floating-point number: JSONDecoder's error, as JSONDecoder gives it; 0e0, 0e10, -0e1 still decode")
    func zeroWithOneDigitExponentIsJSONDecodersError() throws {
        for text in [#"{"a":0e8}"#, #"{"a":0E1}"#] {
            #expect(agrees([String: Double].self, Array(text.utf8)).agrees)
            #expect(decodeArchiveJSON([String: Double].self, from: Data(text.utf8)) == nil)
        }
        #expect(agrees([Double].self, Array("[0e9]".utf8)).agrees)
        #expect(decodeArchiveJSON([Float].self, from: Data("[0e9]".utf8)) == nil)
        #expect(decodeArchiveJSON([Double].self, from: Data("[0e0,0e10,-0e1,0e+1]".utf8)) == [0, 0, -0.0, 0])
        #expect(agrees(Holder<Double>.self, Array(#"{"value":0e5}"#.utf8)).agrees)
    }
}
