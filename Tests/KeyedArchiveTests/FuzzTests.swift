import Foundation
import KeyedArchive
import TestSupport
import Testing

/// One random change to an archive's bytes: the kinds of damage a disk, a transfer or an
/// attacker causes, aimed often at the trailer and offset table, where a reader is most fragile.
func mutate(_ bytes: [UInt8], using random: inout SeededGenerator) -> [UInt8] {
    var out = bytes
    guard !out.isEmpty else { return [UInt8.random(in: 0...255, using: &random)] }
    let interesting: [UInt8] = [0x00, 0x01, 0x0F, 0x10, 0x13, 0x1F, 0x4F, 0x5F, 0x6F, 0x7F, 0x80, 0x8F, 0xAF, 0xD1, 0xDF, 0xFF]
    for _ in 0..<Int.random(in: 1...4, using: &random) {
        let tail = max(0, out.count - 40)
        let position = Bool.random(using: &random) ? Int.random(in: tail..<out.count, using: &random) : Int.random(in: 0..<out.count, using: &random)
        switch Int.random(in: 0..<7, using: &random) {
        case 0: out[position] ^= 1 << UInt8.random(in: 0..<8, using: &random)
        case 1: out[position] = interesting.randomElement(using: &random)!
        case 2: out[position] = UInt8.random(in: 0...255, using: &random)
        case 3: out.removeLast(Int.random(in: 1...min(out.count, 64), using: &random))
        case 4: out.insert(UInt8.random(in: 0...255, using: &random), at: position)
        case 5: out.remove(at: position)
        default:
            let length = min(out.count - position, Int.random(in: 1...8, using: &random))
            let source = Int.random(in: 0...(out.count - length), using: &random)
            out.replaceSubrange(position..<position + length, with: out[source..<source + length])
        }
        if out.isEmpty { break }
    }
    return out
}

@Suite("Fuzzing: mutated archives never crash or hang")
struct FuzzTests {
    /// `KEYED_FUZZ_SCALE=50 swift test --filter FuzzTests` runs 50 times the cases, with other seeds.
    static let scale = max(1, Int(ProcessInfo.processInfo.environment["KEYED_FUZZ_SCALE"] ?? "") ?? 1)

    static var seeds: [[UInt8]] {
        var seeds = goodFixtures.compactMap { try? [UInt8](fixture($0)) }
        seeds.append([UInt8](keyedArchive(GraphTests.chain(40), root: 2)))
        seeds.append(
            [UInt8](
                keyedArchiveXML(
                    [.string("$null"), classDescription("Node", "NSObject"), instance(1, [("next", .uid(2)), ("n", .real(1.5))])], root: 2)))
        return seeds
    }

    @Test("6,000 seeded mutations of the fixtures: each decodes or throws KeyedArchiveError, all within seconds")
    func mutations() throws {
        let seeds = Self.seeds
        try #require(seeds.count == goodFixtures.count + 2)
        var random = SeededGenerator(seed: 0x5EED_0007 &+ UInt64(Self.scale - 1))
        var decoded = 0
        var refused = 0
        let clock = ContinuousClock()
        let started = clock.now
        for round in 0..<6_000 * Self.scale {
            let input = mutate(seeds[round % seeds.count], using: &random)
            do {
                let value = try KeyedArchive.decode(Data(input))
                _ = try? KeyedArchiveDecoder().decode(AnyDecodable.self, from: value)
                decoded += 1
            } catch {
                // typed throws: every failure is a KeyedArchiveError, with a message
                #expect(!error.description.isEmpty)
                refused += 1
            }
        }
        #expect(decoded + refused == 6_000 * Self.scale)
        #expect(decoded > 100, "mutations too destructive to exercise the decoder: \(decoded) decoded")
        #expect(refused > 100, "mutations too gentle to exercise the checks: \(refused) refused")
        #expect(clock.now - started < .seconds(60 * Self.scale))
    }

    @Test("3,000 random object graphs of known and unknown classes, right and wrong shapes: each decodes or throws")
    func randomGraphs() throws {
        let classNames = [
            "NSString", "NSMutableString", "NSArray", "NSMutableSet", "NSOrderedSet", "NSDictionary", "NSData", "NSDate", "NSNull",
            "NSUUID", "NSURL", "NSColor", "UIColor", "Person", "NSObject",
        ]
        let fieldNames = [
            "NS.string", "NS.objects", "NS.keys", "NS.data", "NS.time", "NS.uuidbytes", "NS.base", "NS.relative", "NSRGB", "NS.object.0",
            "NS.key.0", "$class", "name", "next",
        ]
        var random = SeededGenerator(seed: 0x6EA9_4 &+ UInt64(Self.scale - 1))
        var decoded = 0
        var refused = 0
        for _ in 0..<3_000 * Self.scale {
            let count = Int.random(in: 2...12, using: &random)
            func reference() -> Plist { .uid(Int.random(in: 0...(count + 1), using: &random)) }  // sometimes past the end
            func scalar() -> Plist {
                switch Int.random(in: 0..<7, using: &random) {
                case 0: return .int(Int64.random(in: -3...3, using: &random))
                case 1: return .real(Double.random(in: -1e9...1e9, using: &random))
                case 2: return .string(["$null", "x", "0.5 0.5 0.5 1", "https://a/"].randomElement(using: &random)!)
                case 3: return .data((0..<Int.random(in: 0...17, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) })
                case 4: return .bool(Bool.random(using: &random))
                case 5: return .array((0..<Int.random(in: 0...3, using: &random)).map { _ in reference() })
                default: return reference()
                }
            }
            var objects: [Plist] = [.string("$null")]
            for _ in 1..<count {
                switch Int.random(in: 0..<4, using: &random) {
                case 0: objects.append(scalar())
                case 1:
                    let chain = (0..<Int.random(in: 1...3, using: &random)).map { _ in classNames.randomElement(using: &random)! }
                    objects.append(.dict([("$classes", .array(chain.map { .string($0) })), ("$classname", .string(chain[0]))]))
                default:
                    let fields = (0..<Int.random(in: 0...4, using: &random)).map { _ in (fieldNames.randomElement(using: &random)!, scalar()) }
                    objects.append(.dict([("$class", reference())] + fields))
                }
            }
            do {
                let value = try KeyedArchive.decode(keyedArchive(objects, root: Int.random(in: 0..<count, using: &random)))
                _ = try? KeyedArchiveDecoder().decode(AnyDecodable.self, from: value)
                decoded += 1
            } catch {
                #expect(!error.description.isEmpty)
                refused += 1
            }
        }
        #expect(decoded > 100 && refused > 100, "decoded \(decoded), refused \(refused)")
    }

    @Test("every truncation of every fixture throws, never traps")
    func truncations() throws {
        for seed in Self.seeds.prefix(goodFixtures.count) {
            for length in 0..<seed.count {
                #expect(throws: KeyedArchiveError.self) { try KeyedArchive.decode(Data(seed.prefix(length))) }
            }
        }
    }

    @Test("random bytes behind a bplist00 header are refused")
    func randomBytes() throws {
        var random = SeededGenerator(seed: 42)
        for _ in 0..<2_000 {
            let body = (0..<Int.random(in: 0..<300, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            #expect(throws: KeyedArchiveError.self) { try KeyedArchive.decode(Data(Array("bplist00".utf8) + body)) }
        }
    }
}

/// Decodes any value by walking every container, to drive the Codable decoder over whatever a mutation produced.
struct AnyDecodable: Decodable {
    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int?
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) {
            self.intValue = intValue
            stringValue = String(intValue)
        }
    }

    init(from decoder: any Decoder) throws {
        if let keyed = try? decoder.container(keyedBy: Key.self) {
            for key in keyed.allKeys { _ = try? keyed.decode(AnyDecodable.self, forKey: key) }
        } else if var unkeyed = try? decoder.unkeyedContainer() {
            while !unkeyed.isAtEnd { if (try? unkeyed.decode(AnyDecodable.self)) == nil { break } }
        } else {
            let single = try decoder.singleValueContainer()
            if (try? single.decode(String.self)) == nil { _ = try? single.decode(Double.self) }
        }
    }
}
