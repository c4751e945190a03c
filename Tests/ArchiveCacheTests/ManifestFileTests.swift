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
