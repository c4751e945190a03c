import Foundation
import KeyedArchive
import Testing

/// A model archived with NSCoding, as an iOS app did.
class Animal: NSObject, NSCoding {
    var name: String
    var legs: Int
    var tags: [String]

    init(name: String, legs: Int, tags: [String]) {
        self.name = name
        self.legs = legs
        self.tags = tags
    }

    func encode(with coder: NSCoder) {
        coder.encode(name, forKey: "name")
        coder.encode(legs, forKey: "legs")
        coder.encode(tags, forKey: "tags")
    }

    required init?(coder: NSCoder) {
        guard let name = coder.decodeObject(forKey: "name") as? String else { return nil }
        self.name = name
        legs = coder.decodeInteger(forKey: "legs")
        tags = coder.decodeObject(forKey: "tags") as? [String] ?? []
    }
}

final class Dog: Animal {
    var owner: Animal?

    init(name: String, owner: Animal?) {
        self.owner = owner
        super.init(name: name, legs: 4, tags: ["good"])
    }

    override func encode(with coder: NSCoder) {
        super.encode(with: coder)
        coder.encode(owner, forKey: "owner")
    }

    required init?(coder: NSCoder) {
        owner = coder.decodeObject(forKey: "owner") as? Animal
        super.init(coder: coder)
    }
}

/// The model's shape for KeyedArchiveDecoder.
struct AnimalValue: Decodable, Equatable {
    var name: String
    var legs: Int
    var tags: [String]
}

/// Archives written on this machine by Foundation's own NSKeyedArchiver: the two
/// implementations checked against each other.
@Suite("Against Foundation's NSKeyedArchiver and NSKeyedUnarchiver", .serialized)
struct FoundationArchiverTests {
    static func archive(_ root: Any, xml: Bool = false) -> Data {
        let archiver = NSKeyedArchiver(requiringSecureCoding: false)
        archiver.setClassName("Animal", for: Animal.self)
        archiver.setClassName("Dog", for: Dog.self)
        if xml { archiver.outputFormat = .xml }
        archiver.encode(root, forKey: NSKeyedArchiveRootObjectKey)
        archiver.finishEncoding()
        return archiver.encodedData
    }

    static func foundationValues() -> NSDictionary {
        NSDictionary(dictionary: [
            "string": "héllo wörld ✓",
            "mutableString": NSMutableString(string: "mutable"),
            "int": NSNumber(value: -42),
            "big": NSNumber(value: Int64.max),
            "double": NSNumber(value: 2.5),
            "bool": NSNumber(value: true),
            "data": Data([0, 1, 2, 255]) as NSData,
            "mutableData": NSMutableData(data: Data("abc".utf8)),
            "date": NSDate(timeIntervalSinceReferenceDate: 123_456.5),
            "array": NSArray(array: ["a", NSNumber(value: 7)]),
            "set": NSSet(array: ["only"]),
            "null": NSNull(),
            "uuid": NSUUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!,
            "url": NSURL(string: "https://example.com/path?q=1")!,
            "nested": NSDictionary(dictionary: ["inner": NSArray(array: [NSDictionary(dictionary: ["deep": "value"])])]),
        ])
    }

    static let expectedValues: KeyedValue = .dictionary([
        "string": .string("héllo wörld ✓"), "mutableString": .string("mutable"), "int": .integer(-42), "big": .integer(Int64.max),
        "double": .real(2.5), "bool": .bool(true), "data": .data(Data([0, 1, 2, 255])), "mutableData": .data(Data("abc".utf8)),
        "date": .date(Date(timeIntervalSinceReferenceDate: 123_456.5)), "array": .array([.string("a"), .integer(7)]),
        "set": .array([.string("only")]), "null": .null, "uuid": .string("E621E1F8-C36C-495A-93FC-0C247A3E6E5F"),
        "url": .string("https://example.com/path?q=1"),
        "nested": .dictionary(["inner": .array([.dictionary(["deep": .string("value")])])]),
    ])

    @Test("Foundation's value classes, binary and XML", arguments: [false, true])
    func valueClasses(xml: Bool) throws {
        let data = Self.archive(Self.foundationValues(), xml: xml)
        let value = try KeyedArchive.decode(data)
        #expect(value == Self.expectedValues)
        if case .dictionary(let got) = value, case .dictionary(let want) = Self.expectedValues {
            for key in want.keys where got[key] != want[key] { Issue.record("\(key): \(String(describing: got[key])) != \(want[key]!)") }
        }
    }

    @Test("what NSKeyedUnarchiver reads from the same bytes, we read too")
    func sameAsUnarchiver() throws {
        let data = Self.archive(Self.foundationValues())
        let theirs = try NSKeyedUnarchiver.unarchiveTopLevelObjectWithData(data) as? NSDictionary
        let ours = try KeyedArchive.decode(data)
        let theirString = try #require(theirs?["string"] as? String)
        #expect(ours["string"] == .string(theirString))
        #expect(ours["int"] == .integer(Int64(try #require(theirs?["int"] as? NSNumber).int64Value)))
        #expect(ours["date"] == .date(try #require(theirs?["date"] as? Date)))
        #expect(ours["data"] == .data(try #require(theirs?["data"] as? Data)))
        #expect(ours["url"] == .string(try #require(theirs?["url"] as? URL).absoluteString))
    }

    @Test("an NSCoding subclass: class chain, inherited fields, a nested model, and the Codable decoder")
    func codingSubclass() throws {
        let dog = Dog(name: "Laika", owner: Animal(name: "Oleg", legs: 2, tags: ["pilot", "engineer"]))
        for xml in [false, true] {
            let data = Self.archive(dog, xml: xml)
            guard case .object(let object) = try KeyedArchive.decode(data) else {
                Issue.record("the root is not an object")
                return
            }
            // Foundation on Linux names Swift classes with their module, whatever setClassName says.
            #expect(object.classes.count == 3)
            #expect(object.className.hasSuffix("Dog") && object.classes[1].hasSuffix("Animal") && object.classes[2] == "NSObject")
            #expect(object.fields["name"] == .string("Laika") && object.fields["legs"] == .integer(4))
            #expect(object.fields["owner"]?["tags"] == .array([.string("pilot"), .string("engineer")]))
            #expect(try KeyedArchiveDecoder().decode(AnimalValue.self, from: data) == AnimalValue(name: "Laika", legs: 4, tags: ["good"]))
            // And Foundation reads back the same model.
            NSKeyedUnarchiver.setClass(Dog.self, forClassName: "Dog")
            NSKeyedUnarchiver.setClass(Animal.self, forClassName: "Animal")
            let back = try NSKeyedUnarchiver.unarchiveTopLevelObjectWithData(data) as? Dog
            #expect(back?.owner?.name == "Oleg")
        }
    }

    @Test("an object graph with a cycle written by Foundation decodes with a reference marker")
    func foundationCycle() throws {
        let dog = Dog(name: "Laika", owner: nil)
        dog.owner = dog
        guard case .object(let object) = try KeyedArchive.decode(Self.archive(dog)) else {
            Issue.record("the root is not an object")
            return
        }
        #expect(object.fields["owner"] == .reference(uid: try #require(object.uid)))
    }
}
