import Foundation
import Testing

@testable import ArchiveStore

/// A client module's tables: steps run once per store and are recorded; statements it runs
/// with a conditional write commit, or roll back, with that write.
@Suite("Store: extensions") struct ExtensionTests {
    /// A step that is not idempotent: run twice, it would insert a second row.
    private static let first = (name: "first", sql: "CREATE TABLE IF NOT EXISTS notes(text TEXT); INSERT INTO notes VALUES('one');")

    private static func noteCount(_ store: ArchiveStore) throws -> Int {
        try store.readManifest { sql in try sql.first("SELECT count(*) FROM notes") { Int($0.int(0)) } ?? -1 }
    }

    @Test func anExtensionsStepRunsOnceAndIsRecorded() throws {
        try withStore { store, path throws in
            let notes = StoreExtension(name: "Notes", steps: [Self.first])
            try store.install(notes)
            try store.install(notes)
            #expect(try Self.noteCount(store) == 1)
            let recorded = try store.readManifest { sql in
                try sql.first("SELECT extension || '/' || step FROM extension_steps") { $0.text(0) }
            }
            #expect(recorded == "Notes/first")

            // Another open of the store runs nothing again; a step added later runs alone.
            let reopened = try ArchiveStore(directory: path)
            try reopened.install(notes)
            #expect(try Self.noteCount(reopened) == 1)
            let second = (name: "second", sql: "INSERT INTO notes VALUES('two');")
            try reopened.install(StoreExtension(name: "Notes", steps: [Self.first, second]))
            #expect(try Self.noteCount(reopened) == 2)
            #expect(
                try ArchiveStore(directory: path).readManifest { sql in try sql.first("SELECT count(*) FROM extension_steps") { $0.int(0) } } == 2)
        }
    }

    private struct Refused: Error {}

    /// The statements a client runs with a conditional write are in the write's transaction:
    /// when they throw, neither they nor the write happen (no file, no version).
    @Test func statementsRunWithAConditionalWriteRollBackWithItWhenTheyThrow() throws {
        try withStore { store, path throws in
            try store.install(StoreExtension(name: "Notes", steps: [Self.first]))
            let id = try ObjectID(collection: "Person", key: "ada")
            let data = try ArchiveCodec.json.encode(Person(name: "Ada", age: 36))
            #expect(throws: (any Error).self) {
                try store.applyConditional([ConditionalWrite(id: id, content: data, expected: nil)]) { sql, going in
                    #expect(going == [true])
                    try sql.run("INSERT INTO notes VALUES('with the write')")
                    throw Refused()
                }
            }
            #expect(try Self.noteCount(store) == 1)
            #expect(try store.load(Person.self, forKey: "ada") == nil)
            #expect(!FileManager.default.fileExists(atPath: path + "/Person/ada.json"))
            #expect(try store.scan().changes.isEmpty)

            // Without the throw, both commit.
            let versions = try store.applyConditional([ConditionalWrite(id: id, content: data, expected: nil)]) { sql, _ in
                try sql.run("INSERT INTO notes VALUES('with the write')")
            }
            #expect(versions == [1])
            #expect(try Self.noteCount(store) == 2)
            #expect(try store.load(Person.self, forKey: "ada") == Person(name: "Ada", age: 36))
        }
    }

    /// A write whose object no longer holds what it expects is skipped, and its statements
    /// are told so.
    @Test func aConditionalWriteOfAChangedObjectIsSkippedAndSaysSo() throws {
        try withStore { store, _ throws in
            try store.save(Person(name: "Ada", age: 36), forKey: "ada")
            let id = try ObjectID(collection: "Person", key: "ada")
            var told: [Bool] = []
            let versions = try store.applyConditional([ConditionalWrite(id: id, content: nil, expected: ContentHash(of: Data("old".utf8)))]) {
                _, going in told = going
            }
            #expect(versions == [nil])
            #expect(told == [false])
            #expect(try store.load(Person.self, forKey: "ada") == Person(name: "Ada", age: 36))
        }
    }
}
