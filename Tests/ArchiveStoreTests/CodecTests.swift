import Foundation
import TestSupport
import Testing

@testable import ArchiveStore

/// A model with every kind of property the codecs must carry.
struct Profile: Codable, Equatable, Sendable {
    struct Address: Codable, Equatable, Sendable {
        var street: String
        var city: String
        var postcode: String?
        var location: Coordinates
    }

    struct Coordinates: Codable, Equatable, Sendable {
        var latitude: Double
        var longitude: Double
    }

    enum Role: String, Codable, Sendable {
        case admin, member, guest
    }

    enum Contact: Codable, Equatable, Sendable {
        case email(String)
        case phone(country: Int, number: String)
        case postal(Address)
        case none
    }

    var name: String
    var age: Int
    var height: Double
    var isActive: Bool
    var address: Address
    var previousAddresses: [Address]
    var tags: [String]
    var matrix: [[Int]]
    var scores: [String: Int]
    var addressBook: [String: Address]
    var nickname: String?
    var middleName: String?
    var missingAddress: Address?
    var presentAddress: Address?
    var born: Date
    var avatar: Data
    var homepage: URL
    var id: UUID
    var role: Role
    var roles: [Role]
    var contacts: [Contact]

    static let sample = Profile(
        name: "Ada Lovelace",
        age: 36,
        height: 1.65,
        isActive: true,
        address: Address(street: "12 St James's Square", city: "London", postcode: nil, location: Coordinates(latitude: 51.507, longitude: -0.135)),
        previousAddresses: [
            Address(street: "Ockham Park", city: "Surrey", postcode: "KT24", location: Coordinates(latitude: 51.3, longitude: -0.45)),
            Address(street: "Horsley Towers", city: "East Horsley", postcode: nil, location: Coordinates(latitude: 51.27, longitude: -0.43)),
        ],
        tags: ["analyst", "metaphysician", "ünïcødé", "日本語", "🧮"],
        matrix: [[1, 2, 3], [], [-4]],
        scores: ["math": 100, "poetry": 42, "zeta": 0, "alpha": -1],
        addressBook: [
            "babbage": Address(street: "1 Dorset St", city: "London", postcode: "W1", location: Coordinates(latitude: 51.52, longitude: -0.15))
        ],
        nickname: nil,
        middleName: "Augusta",
        missingAddress: nil,
        presentAddress: Address(street: "x", city: "y", postcode: "z", location: Coordinates(latitude: 0, longitude: 0)),
        born: Date(timeIntervalSince1970: 1_700_000_000.123_456),
        avatar: Data((0...255).map { UInt8($0) }),
        homepage: URL(string: "https://example.com/a%20b/c?q=1&r=%2F#frag")!,
        id: UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!,
        role: .admin,
        roles: [.member, .guest],
        contacts: [
            .email("ada@example.com"), .phone(country: 44, number: "20 7946 0000"),
            .postal(Address(street: "s", city: "c", postcode: nil, location: Coordinates(latitude: 1, longitude: 2))), .none,
        ]
    )
}

/// A model stored in its own collection, to check per-collection codecs.
struct Thumbnail: Codable, Equatable, Sendable {
    var pixels: Data
    var width: Int
}

/// The base of a class hierarchy, archived with synthesized Codable.
class Shape: Codable {
    var name: String
    var origin: [Double]

    init(name: String, origin: [Double]) {
        self.name = name
        self.origin = origin
    }
}

/// A subclass that archives its inherited properties through `superEncoder()`/`superDecoder()`.
final class Circle: Shape {
    var radius: Double
    var filled: Bool

    private enum CodingKeys: String, CodingKey { case radius, filled }

    init(name: String, origin: [Double], radius: Double, filled: Bool) {
        self.radius = radius
        self.filled = filled
        super.init(name: name, origin: origin)
    }

    required init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        radius = try container.decode(Double.self, forKey: .radius)
        filled = try container.decode(Bool.self, forKey: .filled)
        try super.init(from: container.superDecoder())
    }

    override func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(radius, forKey: .radius)
        try container.encode(filled, forKey: .filled)
        try super.encode(to: container.superEncoder())
    }
}

/// A subclass that archives its inherited properties into the same container as its own.
final class Square: Shape {
    var side: Double

    private enum CodingKeys: String, CodingKey { case side }

    init(name: String, origin: [Double], side: Double) {
        self.side = side
        super.init(name: name, origin: origin)
    }

    required init(from decoder: any Decoder) throws {
        side = try decoder.container(keyedBy: CodingKeys.self).decode(Double.self, forKey: .side)
        try super.init(from: decoder)
    }

    override func encode(to encoder: any Encoder) throws {
        try super.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(side, forKey: .side)
    }
}

struct CodecTests {
    @Test(arguments: [ArchiveCodec.json, .propertyList])
    func everyKindOfPropertyRoundTrips(codec: ArchiveCodec) throws {
        try withStore(.init(codec: codec)) { store, _ throws in
            try store.save(Profile.sample, forKey: "ada")
            let loaded = try #require(try store.load(Profile.self, forKey: "ada"))
            #expect(loaded == Profile.sample)
            // Spot checks that name the parts most likely to break.
            #expect(loaded.nickname == nil)
            #expect(loaded.middleName == "Augusta")
            #expect(loaded.born == Profile.sample.born)
            #expect(loaded.born.timeIntervalSince1970.truncatingRemainder(dividingBy: 1) != 0)
            #expect(loaded.avatar.count == 256)
            #expect(loaded.contacts[1] == .phone(country: 44, number: "20 7946 0000"))
            #expect(loaded.homepage.absoluteString == "https://example.com/a%20b/c?q=1&r=%2F#frag")
        }
    }

    @Test(arguments: [ArchiveCodec.json, .propertyList])
    func fileExtensionNamesTheCodec(codec: ArchiveCodec) throws {
        try withStore(.init(codec: codec)) { store, path throws in
            try store.save(Profile.sample, forKey: "ada")
            let other: ArchiveCodec = codec == .json ? .propertyList : .json
            #expect(FileManager.default.fileExists(atPath: "\(path)/Profile/ada.\(codec.fileExtension)"))
            #expect(!FileManager.default.fileExists(atPath: "\(path)/Profile/ada.\(other.fileExtension)"))
            let bytes = try contents(of: "\(path)/Profile/ada.\(codec.fileExtension)")
            if codec == .propertyList {
                #expect(bytes.starts(with: Array("bplist00".utf8)))
            } else {
                #expect(try JSONSerialization.jsonObject(with: bytes) is [String: Any])
            }
        }
    }

    @Test func collectionCodecOverridesTheStoreCodec() throws {
        try withStore(.init(codec: .json, collectionCodecs: ["Profile": .propertyList])) { store, path throws in
            let thumbnail = Thumbnail(pixels: Data([0, 1, 2, 255]), width: 2)
            try store.save(Profile.sample, forKey: "ada")
            try store.save(thumbnail, forKey: "t1")

            #expect(FileManager.default.fileExists(atPath: "\(path)/Profile/ada.plist"))
            #expect(!FileManager.default.fileExists(atPath: "\(path)/Profile/ada.json"))
            #expect(try contents(of: "\(path)/Profile/ada.plist").starts(with: Array("bplist00".utf8)))
            #expect(FileManager.default.fileExists(atPath: "\(path)/Thumbnail/t1.json"))
            #expect(try store.load(Profile.self, forKey: "ada") == Profile.sample)
            #expect(try store.load(Thumbnail.self, forKey: "t1") == thumbnail)
        }
    }

    @Test func objectSavedInAnotherCodecStillLoadsAfterTheSettingChanges() throws {
        try withTemporaryDirectory { dir throws in
            let path = dir + "/store"
            do {
                let store = try ArchiveStore(directory: path, options: .init(codec: .propertyList))
                try store.save(Profile.sample, forKey: "ada")
            }
            let store = try ArchiveStore(directory: path, options: .init(codec: .json))
            #expect(try store.load(Profile.self, forKey: "ada") == Profile.sample)
            // The next save rewrites it in the new codec and leaves no file in the old one.
            var changed = Profile.sample
            changed.age += 1
            try store.save(changed, forKey: "ada")
            #expect(filesInStore(path) == ["Profile", "Profile/ada.json"])
            #expect(try store.load(Profile.self, forKey: "ada") == changed)
        }
    }

    @Test(arguments: [ArchiveCodec.json, .propertyList])
    func savingTheSameModelTwiceGivesTheSameBytesAndNoNewVersion(codec: ArchiveCodec) throws {
        try withStore(.init(codec: codec)) { store, _ throws in
            let id = try ObjectID(collection: "Profile", key: "ada")
            #expect(try store.save(Profile.sample, forKey: "ada") == 1)
            let first = try store.data(for: id)
            // An equal value built separately, with its dictionaries filled in another order.
            var again = Profile.sample
            var scores: [String: Int] = [:]
            scores.reserveCapacity(64)
            for (key, value) in Profile.sample.scores.sorted(by: { $0.key > $1.key }) { scores[key] = value }
            again.scores = scores
            #expect(try store.save(again, forKey: "ada") == 1)
            let second = try store.data(for: id)

            #expect(first == second)
            let history = try store.history(of: Profile.self, forKey: "ada")
            #expect(history.map(\.version) == [1])
            #expect(history[0].hash == ContentHash(of: second))
        }
    }

    @Test(arguments: [ArchiveCodec.json, .propertyList])
    func encodingIsDeterministicWhateverTheDictionaryOrder(codec: ArchiveCodec) throws {
        var forward: [String: Int] = [:]
        for index in 0..<100 { forward["k\(index)"] = index }
        var backward: [String: Int] = [:]
        backward.reserveCapacity(1000)
        for index in (0..<100).reversed() { backward["k\(index)"] = index }
        #expect(forward == backward)
        #expect(try codec.encode(forward) == codec.encode(backward))
    }

    @Test(arguments: [ArchiveCodec.json, .propertyList])
    func subclassArchivesItsInheritedPropertiesThroughSuperEncoder(codec: ArchiveCodec) throws {
        try withStore(.init(codec: codec)) { store, _ throws in
            try store.save(Circle(name: "wheel", origin: [1.5, -2], radius: 3.25, filled: true), forKey: "c")
            let loaded = try #require(try store.load(Circle.self, forKey: "c"))
            #expect(loaded.name == "wheel")
            #expect(loaded.origin == [1.5, -2])
            #expect(loaded.radius == 3.25)
            #expect(loaded.filled == true)
        }
    }

    @Test(arguments: [ArchiveCodec.json, .propertyList])
    func subclassArchivesItsInheritedPropertiesInTheSameContainer(codec: ArchiveCodec) throws {
        try withStore(.init(codec: codec)) { store, _ throws in
            try store.save(Square(name: "tile", origin: [0, 4], side: 7), forKey: "s")
            let loaded = try #require(try store.load(Square.self, forKey: "s"))
            #expect(loaded.name == "tile")
            #expect(loaded.origin == [0, 4])
            #expect(loaded.side == 7)
        }
    }

    @Test func subclassIsStoredInItsOwnCollectionWithBaseFieldsInTheFile() throws {
        try withStore { store, path throws in
            try store.save(Circle(name: "wheel", origin: [0, 0], radius: 1, filled: false), forKey: "c")
            let object = try JSONSerialization.jsonObject(with: contents(of: "\(path)/Circle/c.json")) as? [String: Any]
            let base = try #require(object?["super"] as? [String: Any])
            #expect(base["name"] as? String == "wheel")
            #expect(object?["radius"] as? Double == 1)
        }
    }

    /// Found by the fuzz target `fuzz-plist-codec` (its inputs are kept in Fuzz/Crashes/):
    /// Foundation's decoder trapped on an XML property list with bytes that are not UTF-8 in an
    /// `<integer>`, so loading such a file from a store ended the app.
    @Test func xmlPropertyListThatIsNotUTF8IsAnErrorNotATrap() throws {
        struct Wide: Decodable { var wide: Int64? }
        let bytes =
            Data("<plist version=\"1.0\"><dict><key>wide</key><integer>-".utf8) + Data(repeating: 0xFF, count: 7)
            + Data("08</integer></dict></plist>".utf8)
        #expect(throws: DecodingError.self) { try ArchiveCodec.propertyList.decode(Wide.self, from: bytes) }
        #expect(throws: DecodingError.self) {
            try ArchiveCodec.propertyList.decode(Wide.self, from: bytes, userInfo: [CodingUserInfoKey(rawValue: "any")!: 1])
        }
        // XML in UTF-16 (with its byte-order mark) still decodes.
        let utf16 = try #require(
            "<?xml version=\"1.0\" encoding=\"UTF-16\"?><plist version=\"1.0\"><dict><key>wide</key><integer>5</integer></dict></plist>"
                .data(using: .utf16))
        #expect(try ArchiveCodec.propertyList.decode(Wide.self, from: utf16).wide == 5)
    }

    /// Found by `fuzz-plist-codec` too: a binary property list whose dictionary claims 2^62
    /// entries made both PropertyListDecoder and PropertyListSerialization trap, in `load` and
    /// in `put` (which checks the bytes it is given), and one with a set of dictionaries made
    /// `put` crash; both are refused now, and `put` stores nothing.
    @Test func binaryPropertyListWithAnImpossibleCountIsAnErrorNotATrap() throws {
        struct Small: Codable, Equatable { var x: Int? }
        var bytes: [UInt8] = Array("bplist00".utf8) + [0xDF, 0x13, 0x40, 0, 0, 0, 0, 0, 0, 0] + [8]
        bytes += [0, 0, 0, 0, 0, 0, 1, 1] + [0, 0, 0, 0, 0, 0, 0, 1] + [0, 0, 0, 0, 0, 0, 0, 0] + [0, 0, 0, 0, 0, 0, 0, 18]
        #expect(throws: DecodingError.self) { try ArchiveCodec.propertyList.decode(Small.self, from: Data(bytes)) }
        // The same with a reference size of 0 (each reference then costs no bytes): the guard's
        // own walk looped over the 2^62 entries (a hang found by the fuzzer).
        var noReferences = bytes
        noReferences[noReferences.count - 25] = 0
        #expect(throws: DecodingError.self) { try ArchiveCodec.propertyList.decode(Small.self, from: Data(noReferences)) }
        try withStore { store, _ in
            let id = try ObjectID(collection: "Small", key: "s")
            #expect(throws: (any Error).self) { _ = try store.put(Data(bytes), as: id, codec: .propertyList) }
            #expect(try store.keys(of: Small.self).isEmpty)
            // A set holding a dictionary: PropertyListSerialization crashed (SIGSEGV) bridging it.
            var set: [UInt8] = Array("bplist00".utf8) + [0xC1, 0x01, 0xD0] + [8, 10]
            set += [0, 0, 0, 0, 0, 0, 1, 1] + [0, 0, 0, 0, 0, 0, 0, 2] + [0, 0, 0, 0, 0, 0, 0, 0] + [0, 0, 0, 0, 0, 0, 0, 11]
            #expect(throws: (any Error).self) { _ = try store.put(Data(set), as: id, codec: .propertyList) }
            // Any set: one of one string crashed it too.
            var strings: [UInt8] = Array("bplist00".utf8) + [0xC1, 0x01, 0x53, 0x61, 0x62, 0x63] + [8, 10]
            strings += [0, 0, 0, 0, 0, 0, 1, 1] + [0, 0, 0, 0, 0, 0, 0, 2] + [0, 0, 0, 0, 0, 0, 0, 0] + [0, 0, 0, 0, 0, 0, 0, 14]
            #expect(throws: (any Error).self) { _ = try store.put(Data(strings), as: id, codec: .propertyList) }
            #expect(try store.keys(of: Small.self).isEmpty)
            // The store's own binary property lists still pass.
            _ = try store.put(try ArchiveCodec.propertyList.encode(Small(x: 7)), as: id, codec: .propertyList)
            #expect(try store.load(Small.self, forKey: "s") == Small(x: 7))
        }
    }
}
