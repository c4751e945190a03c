import ArchiveCache
import ArchiveStore
import Foundation
import Testing

/// A file that is not the cache's type is an error: never a crash, never a wipe.
@Suite("Cache: errors") struct ErrorTests {
    @Test func aWrongTypeIsAThrownErrorAndTheFileStays() async throws {
        try await withStore { store in
            try store.save(Dog(breed: "mongrel"), forKey: "laika", in: "Person")
            let before = try Data(contentsOf: URL(fileURLWithPath: personFile(store, "laika")))
            let cache = ModelCache<Person>(store: store)
            for _ in 0..<2 {
                await #expect {
                    _ = try await cache.value(forKey: "laika")
                } throws: { error in
                    guard case ArchiveError.undecodable(let id, _, _) = error else { return false }
                    return id.key == "laika"
                }
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: personFile(store, "laika"))) == before)
            #expect(try store.keys(of: Person.self) == ["laika"])
            #expect(cache.keysInMemory.isEmpty)
        }
    }

    @Test func aCorruptFileIsAThrownErrorAndTheFileStays() async throws {
        try await withStore { store in
            let cache = ModelCache<Person>(store: store)
            try await cache.set(Person(name: "Ada", age: 36), forKey: "ada")
            try replaceFromAnotherProcess(personFile(store, "ada"), with: "{not json")
            await #expect(throws: ArchiveError.self) { _ = try await cache.value(forKey: "ada") }
            // A read-through with a fetch does not paper over it by overwriting the file either.
            await #expect(throws: ArchiveError.self) { _ = try await cache.value(forKey: "ada") { Person(name: "New", age: 1) } }
            #expect(try String(contentsOfFile: personFile(store, "ada"), encoding: .utf8) == "{not json")
        }
    }
}
