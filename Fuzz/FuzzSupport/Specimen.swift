import Foundation

/// A model with a field of every kind the store's codecs carry, for targets that decode outside
/// bytes into a Codable model as an app would.
public struct Specimen: Codable, Equatable, Sendable {
    public enum Kind: String, Codable, Sendable { case plain, special }
    public enum Shape: Codable, Equatable, Sendable {
        case dot
        case line(length: Double)
        case named(String, Int)
    }
    public struct Part: Codable, Equatable, Sendable {
        public var label: String
        public var weight: Float
        public var note: String?
    }

    public var text: String
    public var count: Int
    public var small: Int8?
    public var short: UInt16?
    public var wide: Int64?
    public var unsigned: UInt64?
    public var ratio: Double?
    public var single: Float?
    public var flag: Bool?
    public var when: Date?
    public var words: [String]?
    public var grid: [[Int]]?
    public var parts: [Part]?
    public var index: [String: Int]?
    public var maybe: [Double?]?
    public var kind: Kind?
    public var shapes: [Shape]?
    public var id: UUID?
    public var blob: Data?
    public var link: URL?

    /// One of each, for seeds.
    public static let sample = Specimen(
        text: "Zoë \"quoted\" \\ / 日本 🎉", count: -42, small: -8, short: 65_535, wide: Int64.min, unsigned: UInt64.max, ratio: 0.1,
        single: 1.5e-3, flag: true, when: Date(timeIntervalSinceReferenceDate: 7.25), words: ["a", "", "e\u{301}"],
        grid: [[1, 2], [], [3]], parts: [Part(label: "x", weight: 2.5, note: nil), Part(label: "y", weight: -0, note: "n")],
        index: ["one": 1, "two": 2], maybe: [1.25, nil], kind: .special, shapes: [.dot, .line(length: 3), .named("n", 7)],
        id: UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"), blob: Data([0, 1, 254, 255]), link: URL(string: "https://example.com/a?b=c"))
}
