// The README's library tour, as a program that runs: `swift run quickstart ./store`.
import ArchiveStore
import Foundation

// Any Codable model: nested objects, arrays, dictionaries, optionals, Date, URL, UUID, enums.
struct Address: Codable, Equatable {
    var street: String
    var city: String
}

enum Role: String, Codable { case admin, member }

struct Person: Codable, Equatable {
    var id: String
    var name: String
    var role: Role
    var address: Address  // nested: archived in place, in the same file
    var tags: [String]
    var links: [String: URL]
    var avatar: Data?
    var joined: Date
    var token: UUID
}

// A class hierarchy: the subclass archives its own and its inherited properties.
class Animal: Codable {
    var name: String
    init(name: String) { self.name = name }
}

final class Dog: Animal {
    var breed: String

    init(name: String, breed: String) {
        self.breed = breed
        super.init(name: name)
    }

    private enum CodingKeys: String, CodingKey { case breed }

    required init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        breed = try container.decode(String.self, forKey: .breed)
        try super.init(from: decoder)  // inherited properties come from the same object
    }

    override func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(breed, forKey: .breed)
        try super.encode(to: encoder)  // ...and go into the same object
    }
}

// Schema evolution: version 2 split `fullName` into `first` and `last`.
struct Contact: VersionedModel, Equatable {
    static let schemaVersion = 2
    var first: String
    var last: String

    init(first: String, last: String) {
        self.first = first
        self.last = last
    }

    private struct Version1: Decodable { var fullName: String }

    static func migrate(from version: Int, decoder: any Decoder) throws -> Contact {
        let old = try Version1(from: decoder)
        let parts = old.fullName.split(separator: " ", maxSplits: 1).map(String.init)
        return Contact(first: parts.first ?? "", last: parts.count > 1 ? parts[1] : "")
    }
}

let directory = CommandLine.arguments.dropFirst().first ?? "./store"
let store = try ArchiveStore(directory: directory)  // creates it if missing

let ada = Person(
    id: "person1", name: "Ada Lovelace", role: .admin,
    address: Address(street: "12 St James's Square", city: "London"),
    tags: ["math", "engines"], links: ["notes": URL(string: "https://example.org/notes")!],
    avatar: Data([0x89, 0x50, 0x4E, 0x47]), joined: Date(timeIntervalSince1970: 1_000_000_000.25),
    token: UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!)

try store.save(ada, forKey: "person1")  // store/Person/person1.json
var renamed = ada
renamed.name = "Augusta Ada King"
try store.save(renamed, forKey: "person1")  // version 2

let loaded = try store.load(Person.self, forKey: "person1")  // nil when absent
precondition(loaded == renamed)

// Many objects, one durability barrier.
let team = (2...5).map { n in
    Person(
        id: "person\(n)", name: "Member \(n)", role: .member, address: ada.address, tags: [], links: [:], avatar: nil, joined: ada.joined,
        token: UUID())
}
try store.batch { tx in
    for person in team { try tx.save(person, forKey: person.id) }
}
print("Person keys:", try store.keys(of: Person.self))

// History and restore: restoring version 1 makes version 3 with version 1's contents.
for version in try store.history(of: Person.self, forKey: "person1") {
    print("person1 version \(version.version): \(version.size) bytes, sha256 \(version.hash!.description.prefix(12))…")
}
try store.restore(Person.self, forKey: "person1", version: 1)
let restored = try store.load(Person.self, forKey: "person1")
precondition(restored == ada)

// A subclass is stored in its own collection, `Dog`, with its inherited `name`.
try store.save(Dog(name: "Laika", breed: "mongrel"), forKey: "laika")
let laika = try store.load(Dog.self, forKey: "laika")!
print("Dog:", laika.name, laika.breed)

// Safe, typed loading: the wrong type is an error that names the object, never a crash.
do {
    _ = try store.load(Dog.self, forKey: "person1", in: "Person")
} catch {
    print("As expected:", error)
}

// Schema evolution: an object written by version 1 of Contact loads through `migrate`.
try store.put(Data(#"{"fullName":"Grace Hopper"}"#.utf8), as: ObjectID(collection: "Contact", key: "grace"))
print("Migrated:", try store.load(Contact.self, forKey: "grace")!)
print("Rewritten:", try store.migrateAll(of: Contact.self).migrated)

try store.remove(Person.self, forKey: "person5")
try store.removeAll(of: Dog.self)  // exactly `Dog`: never a collection named `DogHouse`
print("status:", try store.status().objects, "objects")
