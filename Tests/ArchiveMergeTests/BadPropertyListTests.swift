import Foundation
import TestSupport
import Testing

@testable import ArchiveMerge

/// Property lists a reader of outside bytes must refuse with an error, never a trap.
@Suite struct BadPropertyListTests {
    private static func binary(_ value: some Encodable) throws -> Data {
        let encoder = PropertyListEncoder()
        encoder.outputFormat = .binary
        return try encoder.encode(value)
    }

    /// A `bplist00` file of `objects` (each its bytes), the first the top, with 2-byte offsets
    /// and 1-byte references.
    private static func handMade(_ objects: [[UInt8]]) -> Data {
        var bytes = Array("bplist00".utf8)
        var offsets: [UInt8] = []
        for object in objects {
            offsets += [UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)]
            bytes += object
        }
        let table = bytes.count
        bytes += offsets
        func be(_ value: Int) -> [UInt8] { (0..<8).reversed().map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) } }
        bytes += [0, 0, 0, 0, 0, 0, 2, 1] + be(objects.count) + be(0) + be(table)
        return Data(bytes)
    }

    @Test func aHandMadeListReads() throws {
        // {"a": [true, 5]}
        let data = Self.handMade([[0xD1, 1, 2], [0x51, 0x61], [0xA2, 3, 4], [0x09], [0x10, 5]])
        #expect(try Document(propertyList: data) == .object(["a": .array([.bool(true), .number(DocumentNumber(Int64(5)))])]))
    }

    @Test(arguments: [
        ("an array that contains itself", [[0xA1, 0]] as [[UInt8]]),
        ("a set", [[0xC1, 1], [0x51, 0x61]]),
        ("a UID", [[0x80, 1]]),
        ("a null", [[0x00]]),
        ("a key that is not a string", [[0xD1, 1, 1], [0x10, 5]]),
        ("the same key twice", [[0xD2, 1, 1, 2, 2], [0x51, 0x61], [0x10, 5]]),
        ("a reference past the objects", [[0xA1, 9]]),
        ("a count past the file", [[0xAF, 0x13, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]]),
        ("an integer of 128 bits", [[0x14, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]]),
        ("an ASCII string with a high byte", [[0x51, 0xE9]]),
        ("a lone UTF-16 surrogate", [[0x61, 0xD8, 0x00]]),
        ("an unknown marker", [[0xF0]]),
    ])
    func malformedBinaryListsAreRefused(_ what: String, objects: [[UInt8]]) {
        #expect(throws: DocumentError.self, "\(what)") { try Document(propertyList: Self.handMade(objects)) }
    }

    /// 40 levels, each an array holding the level below twice: 2^40 values from 200 bytes.
    @Test func sharedObjectsCannotExpandWithoutBound() {
        let objects: [[UInt8]] = (0..<40).map { (level: Int) -> [UInt8] in level == 39 ? [0x09] : [0xA2, UInt8(level + 1), UInt8(level + 1)] }
        #expect(throws: DocumentError.self) { try Document(propertyList: Self.handMade(objects)) }
    }

    @Test func truncatedAndMutatedListsAreRefusedOrRead() throws {
        struct Sample: Encodable {
            var name = "Ann"
            var tags = ["a", "b"]
            var season = "\u{E9}t\u{E9}"
        }
        let valid = try Self.binary(Sample())
        for length in 0..<valid.count {
            #expect(throws: DocumentError.self) { try Document(propertyList: valid.prefix(length)) }
        }
        var random = SeededGenerator(seed: 21)
        for _ in 0..<20_000 {
            var mutated = [UInt8](valid)
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                mutated[Int.random(in: 0..<mutated.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
            }
            // Either answer is fine; a trap is not.
            _ = try? Document(propertyList: Data(mutated))
        }
    }

    @Test func deepOrNonUTF8XMLIsRefused() {
        let deep =
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><plist version=\"1.0\">" + String(repeating: "<array>", count: 300)
            + String(repeating: "</array>", count: 300) + "</plist>"
        #expect(throws: DocumentError.self) { try Document(propertyList: Data(deep.utf8)) }
        #expect(throws: DocumentError.self) {
            try Document(propertyList: Data("<plist><string>\u{E9}</string></plist>".utf8.map { $0 == 0xC3 ? 0xFF : $0 }))
        }
        #expect(throws: DocumentError.self) { try Document(propertyList: Data("<plist><dict><key>a</key></plist>".utf8)) }
        #expect(throws: DocumentError.self) { try Document(propertyList: Data("not a plist".utf8)) }
        // The old text format, which Foundation reads and the store never writes.
        #expect(throws: DocumentError.self) { try Document(propertyList: Data("b".utf8)) }
        #expect(throws: DocumentError.self) { try Document(propertyList: Data("{a = 1;}".utf8)) }
    }

    /// Values Foundation's XML reader might choke on: each is refused or read, never a trap.
    @Test(arguments: [
        "<integer>99999999999999999999999</integer>", "<integer>-99999999999999999999999</integer>", "<integer>abc</integer>",
        "<real>abc</real>", "<real>nan</real>", "<date>garbage</date>", "<data>!!!</data>", "<key>a</key>", "<dict><key>a</key></dict>",
        "<dict><string>a</string><string>b</string></dict>", "<dict><key>a</key><true/><key>a</key><false/></dict>",
        "<array><array/><dict/></array>", "<string>&amp;&lt;&#233;&#xD800;</string>", "<unknown/>",
    ])
    func oddXMLValuesAreRefusedOrRead(_ body: String) {
        let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><plist version=\"1.0\">\(body)</plist>"
        _ = try? Document(propertyList: Data(xml.utf8))
    }

    /// PropertyListDecoder reads the last of two equal keys in XML; so does the tree.
    @Test func xmlWithTheSameKeyTwiceReadsAsTheDecoderDoes() throws {
        let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><plist version=\"1.0\"><dict><key>a</key><true/><key>a</key><false/></dict></plist>"
        #expect(try Document(propertyList: Data(xml.utf8)) == .object(["a": .bool(false)]))
    }

    @Test func deepBinaryListsAreRefused() throws {
        // One-byte references reach 255 objects: 200 levels, and limits on either side.
        let chain: [[UInt8]] = (0..<200).map { (level: Int) -> [UInt8] in level == 199 ? [0x09] : [0xA1, UInt8(level + 1)] }
        #expect(throws: DocumentError.self) { try Document(propertyList: Self.handMade(chain), limits: DocumentLimits(depth: 100, values: 1000)) }
        #expect(try Document(propertyList: Self.handMade(chain), limits: DocumentLimits(depth: 300, values: 1000)) != .null)
    }
}
