import ArchiveCache
import ArchiveStore
import Foundation
import Testing

/// The cache reads what the store reads: the file the manifest names.
@Suite("Cache: the manifest's file") struct ManifestFileTests {
    @Test func aFileBesideTheObjectsFileIsNeverServed() async throws {
        try await withStore { store in
            let encoder = PropertyListEncoder()
            encoder.outputFormat = .xml
            try store.put(encoder.encode(Person(name: "Ada", age: 36)), as: ObjectID(collection: "Person", key: "ada"), codec: .propertyList)
            // Where the store's default codec would put `ada`: a scan leaves it alone, as `ada.plist` holds the key.
            try shell(#"printf '%s' '{"age":1,"name":"impostor","note":""}' > "$1""#, personFile(store, "ada"))
            let cache = ModelCache<Person>(store: store)
            #expect(try await cache.value(forKey: "ada") == Person(name: "Ada", age: 36))
        }
    }
}

extension ManifestFileTests {
    /// A miss of a key loaded before reads the file it was found in, without asking the
    /// manifest again, while that file keeps the stamp it had (the same version): a lookup per
    /// miss made misses slower than plain Foundation reads. Shown by a manifest row changed
    /// behind the cache's back, which only a lookup would see; once the file changes, the
    /// manifest is asked again.
    @Test func aMissOfAnUnchangedFileAsksTheManifestNoMore() async throws {
        try await withStore { store in
            try store.save(Person(name: "Ada", age: 36), forKey: "ada")
            // Older than the window in which a stamp cannot be trusted.
            try shell(#"touch -d '-10 seconds' "$1""#, personFile(store, "ada"))
            let cache = ModelCache<Person>(store: store)
            #expect(try await cache.value(forKey: "ada") == Person(name: "Ada", age: 36))
            try store.writeManifest { try $0.run("UPDATE objects SET file = 'elsewhere.json' WHERE key = 'ada'") }
            cache.removeAllFromMemory()
            #expect(try await cache.value(forKey: "ada") == Person(name: "Ada", age: 36))
            try rewriteInPlace(personFile(store, "ada"), #"{"age":37,"name":"Ada","note":""}"#)
            cache.removeAllFromMemory()
            #expect(try await cache.value(forKey: "ada") == nil)
        }
    }
}
