import ArchiveCache
import ArchiveStore
import Foundation
import Testing

/// A disk byte limit, enforced on every write through the cache, evicting the least recently used.
@Suite("Cache: disk limit") struct DiskLimitTests {
    /// A person whose archive takes a little over 200 bytes.
    static func large(_ name: String) -> Person { Person(name: name, age: 1, note: String(repeating: "x", count: 200)) }

    @Test func everyWriteKeepsTheCollectionUnderItsLimit() async throws {
        try await withStore { store in
            let cache = ModelCache<Person>(store: store, diskLimit: .collection(bytes: 1_000))
            for n in 0..<12 {
                try await cache.set(Self.large("p\(n)"), forKey: "p\(n)")
                #expect(try collectionBytes(store) <= 1_000, "after write \(n)")
            }
            #expect(try store.keys(of: Person.self).count == 4)
            #expect(cache.statistics.diskEvictions == 8)
        }
    }

    @Test func theLeastRecentlyReadIsEvictedFirst() async throws {
        try await withStore { store in
            let cache = ModelCache<Person>(store: store, diskLimit: .collection(bytes: 700))  // three fit
            for key in ["a", "b", "c"] {
                try await cache.set(Self.large(key), forKey: key)
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(try await cache.value(forKey: "a") == Self.large("a"))  // a read after c was written
            try await Task.sleep(for: .milliseconds(20))
            try await cache.set(Self.large("d"), forKey: "d")
            #expect(try store.keys(of: Person.self) == ["a", "c", "d"])  // b: the oldest use
            #expect(try await cache.value(forKey: "b") == nil)  // gone from memory too
        }
    }

    @Test func aStoreLimitCountsEveryCollection() async throws {
        try await withStore { store in
            try store.save(Dog(breed: String(repeating: "y", count: 200)), forKey: "rex")
            try await Task.sleep(for: .milliseconds(20))
            let cache = ModelCache<Person>(store: store, diskLimit: .store(bytes: 500))
            try await cache.set(Self.large("a"), forKey: "a")
            try await Task.sleep(for: .milliseconds(20))
            try await cache.set(Self.large("b"), forKey: "b")
            #expect(try store.keys(of: Dog.self) == [])  // the oldest object in the store
            #expect(try store.keys(of: Person.self) == ["a", "b"])
            #expect(try store.status().bytes <= 500)
        }
    }
}

@Suite("Cache: removals never take a newer save")
struct ConditionalRemovalTests {
    /// An eviction or expiry chooses an object by the contents it held; another process (here,
    /// a second store object) saving it before the removal lands keeps it: the removal is
    /// skipped, the newer save stays on disk and in the manifest.
    @Test func anObjectSavedAfterItWasChosenIsNotRemoved() async throws {
        try await withStore { store in
            try store.prepareCacheTable()
            try store.save(Person(name: "Ada", age: 36), forKey: "ada")
            try store.save(Person(name: "Grace", age: 85), forKey: "grace")
            let victims = try store.leastRecentlyUsed(in: "Person", over: 0, keeping: [])
            #expect(victims.map(\.id.key) == ["ada", "grace"])
            let other = try ArchiveStore(directory: store.path)
            try other.save(Person(name: "Ada", age: 37), forKey: "ada")  // after the choice
            #expect(try store.removeObjects(victims) == 1)
            #expect(try store.load(Person.self, forKey: "ada") == Person(name: "Ada", age: 37))
            #expect(try store.load(Person.self, forKey: "grace") == nil)
        }
    }
}
