import Foundation
import KeyedArchive
import Testing

struct PersonModel: Decodable, Equatable {
    var str: String
    var muStr: String
    var dic: [String: String]
    var muDic: [String: String]
    var arr: [String]
    var muArr: [String]
    var data: Data
    var muData: Data
    var set: Set<String>
    var muSet: [String]
    var w_float: Float
    var w_doule: Double
    var w_cgfloat: Double
    var w_int: Int
    var w_integer: Int64
    var w_uinteger: UInt
    var w_bool: Bool
}

enum Gender: Int, Decodable {
    case female = 0
    case male = 1
}

struct Color: Decodable, Equatable {
    var UIRed: Double
    var UIGreen: Double
    var UIBlue: Double
    var UIAlpha: Double
}

struct Car: Decodable, Equatable {
    var color: Color
}

struct Person: Decodable, Equatable {
    var name: String
    var age: Int
    var gender: Gender
    var isAdult: Bool
    var labelArray: [String]
    var car: Car
}

class Human: Decodable {
    var name: String
    var age: Double
    var born: Date
}

final class MalePerson: Human {
    var facialHair: String

    private enum CodingKeys: String, CodingKey { case facialHair }

    required init(from decoder: any Decoder) throws {
        facialHair = try decoder.container(keyedBy: CodingKeys.self).decode(String.self, forKey: .facialHair)
        try super.init(from: decoder)
    }
}

@Suite("KeyedArchiveDecoder: straight into Codable types")
struct DecoderTests {
    @Test("every property kind of the WZXArchiver model decodes into Swift types")
    func personModel() throws {
        let person = try KeyedArchiveDecoder().decode(PersonModel.self, from: try fixture("WZX_PersonModel_person1.archiver"))
        let expected = PersonModel(
            str: "str", muStr: "muStr", dic: ["key": "value"], muDic: ["key": "muValue"], arr: ["arr1", "arr2"],
            muArr: ["muarr1", "muarr2"], data: Data("str".utf8), muData: Data("str".utf8), set: ["1", "2", "3"], muSet: ["1", "2", "3"],
            w_float: 1.1, w_doule: 2.2, w_cgfloat: 3.3, w_int: 4, w_integer: 5, w_uinteger: 6, w_bool: true)
        #expect(person == expected)
    }

    @Test("nested objects, an enum from its archived integer, an array of strings")
    func nested() throws {
        let person = try KeyedArchiveDecoder().decode(Person.self, from: try fixture("PersonCache.archiver"))
        #expect(person.gender == .male)
        #expect(person.car.color == Color(UIRed: 0, UIGreen: 0, UIBlue: 0, UIAlpha: 1))
        #expect(person.labelArray == ["阳光", "萌新", "正太"])
        #expect(person.name == "小明" && person.age == 23 && person.isAdult)
    }

    @Test("a subclass reads its inherited fields from the same object; an archived integer decodes as Double; NSDate as Date")
    func subclass() throws {
        let male = try KeyedArchiveDecoder().decode(MalePerson.self, from: try fixture("MalePerson.archiver"))
        #expect(male.facialHair == "beard" && male.name == "Jason")
        #expect(male.age == 18.0)
        #expect(male.born == Date(timeIntervalSince1970: 725_846_400))
    }

    @Test("an array at the root")
    func rootArray() throws {
        #expect(try KeyedArchiveDecoder().decode([String].self, from: try fixture("MyArray.archiver")) == ["阳光", "萌新", "正太"])
    }

    @Test("a type mismatch is a DecodingError.typeMismatch with the coding path")
    func mismatchPath() throws {
        struct WrongColor: Decodable { var UIRed: String }
        struct WrongCar: Decodable { var color: WrongColor }
        struct WrongPerson: Decodable { var car: WrongCar }
        do {
            _ = try KeyedArchiveDecoder().decode(WrongPerson.self, from: try fixture("PersonCache.archiver"))
            Issue.record("decoded a real as a String")
        } catch DecodingError.typeMismatch(let type, let context) {
            #expect(ObjectIdentifier(type) == ObjectIdentifier(String.self))
            #expect(context.codingPath.map(\.stringValue) == ["car", "color", "UIRed"])
        }
    }

    @Test("a missing field is keyNotFound; a number that does not fit is dataCorrupted")
    func missingAndOverflow() throws {
        struct NeedsZip: Decodable { var zip: String }
        struct Tiny: Decodable { var w_int: Int8; var w_doule: Int }
        let data = try fixture("WZX_PersonModel_person1.archiver")
        #expect {
            _ = try KeyedArchiveDecoder().decode(NeedsZip.self, from: data)
        } throws: { error in
            guard case DecodingError.keyNotFound(let key, _) = error else { return false }
            return key.stringValue == "zip"
        }
        #expect {
            _ = try KeyedArchiveDecoder().decode(Tiny.self, from: data)
        } throws: { error in
            guard case DecodingError.dataCorrupted(let context) = error else { return false }
            return context.codingPath.map(\.stringValue) == ["w_doule"]
        }
    }

    @Test("an unreadable archive is a KeyedArchiveError, not a DecodingError")
    func unreadable() throws {
        let data = try fixture("hostile/no_top.archiver")
        #expect(throws: KeyedArchiveError.self) { try KeyedArchiveDecoder().decode(Person.self, from: data) }
    }

    @Test("a cycle cannot become a value type: dataCorrupted, not a crash")
    func cycle() throws {
        final class Node: Decodable { var next: Node? }
        let data = keyedArchive([.string("$null"), classDescription("Node", "NSObject"), instance(1, [("next", .uid(2))])], root: 2)
        #expect {
            _ = try KeyedArchiveDecoder().decode(Node.self, from: data)
        } throws: { error in
            guard case DecodingError.dataCorrupted(let context) = error else { return false }
            return context.codingPath.map(\.stringValue) == ["next"]
        }
    }

    @Test("URL and UUID from NSURL and NSUUID, Optional from $null")
    func urlAndUUID() throws {
        struct Link: Decodable { var url: URL; var id: UUID; var note: String? }
        let uuid = UUID()
        let u = uuid.uuid
        let bytes: [UInt8] = [u.0, u.1, u.2, u.3, u.4, u.5, u.6, u.7, u.8, u.9, u.10, u.11, u.12, u.13, u.14, u.15]
        let data = keyedArchive(
            [
                .string("$null"), classDescription("Link", "NSObject"), instance(1, [("url", .uid(4)), ("id", .uid(6)), ("note", .uid(0))]),
                classDescription("NSURL", "NSObject"), instance(3, [("NS.base", .uid(0)), ("NS.relative", .string("https://swift.org/a"))]),
                classDescription("NSUUID", "NSObject"), instance(5, [("NS.uuidbytes", .data(bytes))]),
            ], root: 2)
        let link = try KeyedArchiveDecoder().decode(Link.self, from: data)
        #expect(link.url == URL(string: "https://swift.org/a"))
        #expect(link.id == uuid)
        #expect(link.note == nil)
    }
}
