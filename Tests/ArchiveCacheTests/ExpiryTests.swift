import ArchiveCache
import ArchiveStore
import Foundation
import Testing

/// Expiry lives in the manifest, per object version: an expired object reads as absent and is purged.
@Suite("Cache: expiry") struct ExpiryTests {
    @Test func anExpiredObjectReadsAsAbsentAndIsPurged() async throws {
        try await withStore { store in
            let cache = ModelCache<Person>(store: store)
            try await cache.set(Person(name: "Grace", age: 85), forKey: "grace")
            try await cache.set(Person(name: "Ada", age: 36), forKey: "ada", expiresAfter: .seconds(2))
            #expect(try await cache.value(forKey: "ada") == Person(name: "Ada", age: 36))
            try await Task.sleep(for: .milliseconds(2_200))

            #expect(try await cache.value(forKey: "ada") == nil)
            #expect(!FileManager.default.fileExists(atPath: personFile(store, "ada")))
            #expect(try store.keys(of: Person.self) == ["grace"])  // the manifest no longer lists it
            #expect(try store.history(of: Person.self, forKey: "ada").last?.isDeleted == true)
            #expect(cache.statistics.expired == 1)
            #expect(try await cache.value(forKey: "grace") == Person(name: "Grace", age: 85))
        }
    }

    @Test func expiryIsKeptInTheManifestNotInMemory() async throws {
        try await withStore { store in
            try await ModelCache<Person>(store: store).set(Person(name: "Ada", age: 36), forKey: "ada", expiresAfter: .seconds(2))
            try age(personFile(store, "ada"))  // file times play no part
            let reopened = try ArchiveStore(directory: store.path)
            let cache = ModelCache<Person>(store: reopened)
            #expect(try await cache.value(forKey: "ada") == Person(name: "Ada", age: 36))
            #expect(try cache.keys() == ["ada"])
            try await Task.sleep(for: .milliseconds(2_200))
            #expect(try cache.keys() == [])  // listing leaves expired objects out
            #expect(try cache.removeExpired() == ["ada"])
            #expect(!FileManager.default.fileExists(atPath: personFile(store, "ada")))
        }
    }

    @Test func aLaterSaveWithoutExpiryKeepsTheObject() async throws {
        try await withStore { store in
            let cache = ModelCache<Person>(store: store)
            try await cache.set(Person(name: "Ada", age: 36), forKey: "ada", expiresAfter: .milliseconds(200))
            try await cache.set(Person(name: "Ada", age: 37), forKey: "ada")
            try store.save(Person(name: "Grace", age: 85), forKey: "grace")
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await cache.value(forKey: "ada") == Person(name: "Ada", age: 37))
            #expect(try cache.keys() == ["ada", "grace"])
        }
    }

    @Test func anotherProcessesNewVersionIsNotBoundByAnOldExpiry() async throws {
        try await withStore { store in
            let cache = ModelCache<Person>(store: store)
            try await cache.set(Person(name: "Ada", age: 36), forKey: "ada", expiresAfter: .milliseconds(200))
            try putFromAnotherProcess(store, "Person/ada", #"{"age":50,"name":"Ada","note":""}"#)
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await cache.value(forKey: "ada") == Person(name: "Ada", age: 50))
        }
    }
}
