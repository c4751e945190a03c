import ArchiveCache
import ArchiveStore
import ArchiveWatch
import Foundation
import Testing

/// A changed file is never served stale: with or without a watcher, whoever changed it.
@Suite("Cache: freshness") struct FreshnessTests {
    @Test func anotherProgramsEditIsReadNextWithoutAWatcher() async throws {
        try await withStore { store in
            let cache = ModelCache<Person>(store: store)
            try store.save(Person(name: "Ada", age: 36), forKey: "ada")
            try age(personFile(store, "ada"))
            #expect(try await cache.value(forKey: "ada") == Person(name: "Ada", age: 36))
            #expect(try await cache.value(forKey: "ada") == Person(name: "Ada", age: 36))
            #expect(cache.statistics.hits == 1)

            try replaceFromAnotherProcess(personFile(store, "ada"), with: #"{"age":37,"name":"Ada Lovelace","note":""}"#)
            #expect(try await cache.value(forKey: "ada") == Person(name: "Ada Lovelace", age: 37))
        }
    }

    @Test func aSameSizeRewriteInPlaceIsReadNextWithoutAWatcher() async throws {
        try await withStore { store in
            let cache = ModelCache<Person>(store: store)
            try store.save(Person(name: "Ada", age: 36), forKey: "ada")
            let file = personFile(store, "ada")
            // Plain writes in place (same size, same inode), with the read between them, all
            // within microseconds: almost surely one clock tick, so the file's stamp does not
            // change, and only the rule that distrusts fresh stamps catches the second write.
            for age in 30..<40 {
                try rewriteInPlace(file, #"{"age":\#(age),"name":"Ada","note":""}"#)
                #expect(try await cache.value(forKey: "ada") == Person(name: "Ada", age: age))
                try rewriteInPlace(file, #"{"age":\#(age + 10),"name":"Ada","note":""}"#)
                #expect(try await cache.value(forKey: "ada") == Person(name: "Ada", age: age + 10))
            }
        }
    }

    @Test func anotherStoreProcessesSaveIsReadNextWithoutAWatcher() async throws {
        try await withStore { store in
            let cache = ModelCache<Person>(store: store)
            try await cache.set(Person(name: "Ada", age: 36), forKey: "ada")
            #expect(try await cache.value(forKey: "ada") == Person(name: "Ada", age: 36))
            try putFromAnotherProcess(store, "Person/ada", #"{"age":40,"name":"Ada","note":"from archive-sync put"}"#)
            #expect(try await cache.value(forKey: "ada") == Person(name: "Ada", age: 40, note: "from archive-sync put"))
        }
    }

    @Test func aDeleteByAnotherProgramReadsAsAbsent() async throws {
        try await withStore { store in
            let cache = ModelCache<Person>(store: store)
            try store.save(Person(name: "Ada", age: 36), forKey: "ada")
            try age(personFile(store, "ada"))
            #expect(try await cache.value(forKey: "ada") != nil)
            try shell(#"rm "$1""#, personFile(store, "ada"))
            #expect(try await cache.value(forKey: "ada") == nil)
        }
    }

    @Test func thisProcesssStoreWritesInvalidateBeforeTheyReturn() async throws {
        try await withStore { store in
            let watcher = try store.startWatching()  // hits trust memory: only the change feed can make them fresh
            defer { watcher.stop() }
            let cache = ModelCache<Person>(store: store)
            try await cache.set(Person(name: "Ada", age: 36), forKey: "ada")
            #expect(try await cache.value(forKey: "ada") == Person(name: "Ada", age: 36))
            try store.save(Person(name: "Ada", age: 37), forKey: "ada")  // through the store, not the cache
            #expect(try await cache.value(forKey: "ada") == Person(name: "Ada", age: 37))
            try store.remove(Person.self, forKey: "ada")
            #expect(try await cache.value(forKey: "ada") == nil)
            #expect(cache.statistics.invalidations >= 2)
        }
    }

    @Test func anotherProgramsEditIsSeenThroughTheWatcher() async throws {
        try await withStore { store in
            let cache = ModelCache<Person>(store: store)
            try store.save(Person(name: "Ada", age: 36), forKey: "ada")
            let watcher = try store.startWatching(WatchOptions(debounce: .milliseconds(10)))
            defer { watcher.stop() }
            #expect(try await cache.value(forKey: "ada") == Person(name: "Ada", age: 36))
            #expect(try await cache.value(forKey: "ada") == Person(name: "Ada", age: 36))

            try replaceFromAnotherProcess(personFile(store, "ada"), with: #"{"age":37,"name":"Ada Lovelace","note":""}"#)
            // The watcher drops the entry from memory by itself (no read needed to notice).
            try await eventually("the watcher to invalidate ada") { cache.keysInMemory.isEmpty }
            #expect(cache.statistics.invalidations == 1)
            #expect(try await cache.value(forKey: "ada") == Person(name: "Ada Lovelace", age: 37))
        }
    }

    @Test func anotherStoreProcessesSaveIsSeenThroughTheWatcher() async throws {
        try await withStore { store in
            let cache = ModelCache<Person>(store: store)
            let watcher = try store.startWatching(WatchOptions(debounce: .milliseconds(10)))
            defer { watcher.stop() }
            try await cache.set(Person(name: "Ada", age: 36), forKey: "ada")
            #expect(try await cache.value(forKey: "ada") == Person(name: "Ada", age: 36))
            try putFromAnotherProcess(store, "Person/ada", #"{"age":41,"name":"Ada","note":""}"#)
            try await eventually("the watcher to invalidate ada") { cache.keysInMemory.isEmpty }
            #expect(try await cache.value(forKey: "ada") == Person(name: "Ada", age: 41))
        }
    }
}
