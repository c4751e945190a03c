import Foundation
import Testing

@testable import ArchiveStore

/// All versions of the contact model live in one collection.
private let contacts = "Contact"

private struct MigrationRefused: Error, CustomStringConvertible {
    var description: String
}

/// Version 1: one name field.
private struct ContactV1: VersionedModel, Equatable {
    static let schemaVersion = 1
    var fullName: String
    var phone: String

    static func migrate(from version: Int, decoder: any Decoder) throws -> ContactV1 {
        throw MigrationRefused(description: "version 1 is the first")
    }
}

/// Version 2: the name split in two. Migrates from version 1 when the name has two parts.
private struct ContactV2: VersionedModel, Equatable {
    static let schemaVersion = 2
    var firstName: String
    var lastName: String
    var phone: String

    private struct V1: Decodable {
        var fullName: String
        var phone: String
    }

    static func migrate(from version: Int, decoder: any Decoder) throws -> ContactV2 {
        guard version == 1 else { throw MigrationRefused(description: "no migration from \(version)") }
        guard decoder.userInfo[.archiveSchemaVersion] as? Int == version else {
            throw MigrationRefused(description: "the decoder does not name the version")
        }
        let old = try V1(from: decoder)
        let parts = old.fullName.split(separator: " ", maxSplits: 1)
        guard parts.count == 2 else { throw MigrationRefused(description: "'\(old.fullName)' has no last name") }
        return ContactV2(firstName: String(parts[0]), lastName: String(parts[1]), phone: old.phone)
    }
}

/// Version 2 again, but refusing every migration: loads only objects already in version 2.
private struct ContactV2NoMigration: VersionedModel, Equatable {
    static let schemaVersion = 2
    var firstName: String
    var lastName: String
    var phone: String

    static func migrate(from version: Int, decoder: any Decoder) throws -> ContactV2NoMigration {
        throw MigrationRefused(description: "this test expects no migration")
    }
}

/// Version 3, written by a newer program.
private struct ContactV3: VersionedModel, Equatable {
    static let schemaVersion = 3
    var firstName: String
    var lastName: String
    var phones: [String]

    static func migrate(from version: Int, decoder: any Decoder) throws -> ContactV3 {
        throw MigrationRefused(description: "not needed here")
    }
}

struct MigrationTests {
    @Test(arguments: [ArchiveCodec.json, .propertyList])
    func olderObjectLoadsThroughMigration(codec: ArchiveCodec) throws {
        try withStore(.init(codec: codec)) { store, _ throws in
            try store.save(ContactV1(fullName: "Ada Lovelace", phone: "1"), forKey: "ada", in: contacts)
            #expect(try store.history(ContactID.ada).last?.schemaVersion == 1)
            let before = try store.data(for: ContactID.ada)

            let loaded = try store.load(ContactV2.self, forKey: "ada", in: contacts)
            #expect(loaded == ContactV2(firstName: "Ada", lastName: "Lovelace", phone: "1"))
            // Loading does not rewrite anything.
            #expect(try store.data(for: ContactID.ada) == before)
            #expect(try store.history(ContactID.ada).count == 1)
        }
    }

    @Test func migrateAllRewritesOldObjectsInTheCurrentSchema() throws {
        try withStore { store, path throws in
            try store.save(ContactV1(fullName: "Ada Lovelace", phone: "1"), forKey: "ada", in: contacts)
            try store.save(ContactV1(fullName: "Charles Babbage", phone: "2"), forKey: "charles", in: contacts)

            let report = try store.migrateAll(of: ContactV2.self, in: contacts)
            #expect(report.migrated.sorted() == ["ada", "charles"])
            #expect(report.failed.isEmpty)

            let history = try store.history(ContactID.ada)
            #expect(history.map(\.version) == [1, 2])
            #expect(history.map(\.schemaVersion) == [1, 2])
            // The file is now in the version 2 shape: it decodes without any migration...
            let file = try contents(of: path + "/Contact/ada.json")
            #expect(
                try JSONDecoder().decode(ContactV2NoMigration.self, from: file)
                    == ContactV2NoMigration(firstName: "Ada", lastName: "Lovelace", phone: "1"))
            // ...and the store no longer migrates it when loading.
            #expect(
                try store.load(ContactV2NoMigration.self, forKey: "ada", in: contacts)
                    == ContactV2NoMigration(firstName: "Ada", lastName: "Lovelace", phone: "1"))
            #expect(
                try store.load(ContactV2.self, forKey: "charles", in: contacts) == ContactV2(firstName: "Charles", lastName: "Babbage", phone: "2"))
            // A version 1 program now sees an object from the future.
            guard case .newerSchema(_, stored: 2, supported: 1)? = archiveError({ try store.load(ContactV1.self, forKey: "ada", in: contacts) })
            else {
                Issue.record("a version 1 type should not read a migrated object")
                return
            }

            // A second run has nothing to do.
            let again = try store.migrateAll(of: ContactV2.self, in: contacts)
            #expect(again.migrated.isEmpty)
            #expect(again.failed.isEmpty)
            #expect(try store.history(ContactID.ada).count == 2)
        }
    }

    @Test func objectThatCannotBeMigratedIsReportedByKeyAndLeftUntouched() throws {
        try withStore { store, path throws in
            try store.save(ContactV1(fullName: "Ada Lovelace", phone: "1"), forKey: "ada", in: contacts)
            try store.save(ContactV1(fullName: "Plato", phone: "3"), forKey: "plato", in: contacts)
            let platoID = try ObjectID(collection: contacts, key: "plato")
            let bytes = try contents(of: path + "/Contact/plato.json")
            let mtime = try modificationTime(of: path + "/Contact/plato.json")

            let report = try store.migrateAll(of: ContactV2.self, in: contacts)
            #expect(report.migrated == ["ada"])
            #expect(report.failed.map(\.key) == ["plato"])

            #expect(try contents(of: path + "/Contact/plato.json") == bytes)
            let after = try modificationTime(of: path + "/Contact/plato.json")
            #expect(after.tv_sec == mtime.tv_sec && after.tv_nsec == mtime.tv_nsec)
            #expect(try store.history(platoID).map(\.schemaVersion) == [1])

            let error = archiveError { try store.load(ContactV2.self, forKey: "plato", in: contacts) }
            guard case .migrationFailed(let id, let from, _)? = error else {
                Issue.record("expected migrationFailed, got \(String(describing: error))")
                return
            }
            #expect(id == platoID)
            #expect(from == 1)
            // The old program still reads it.
            #expect(try store.load(ContactV1.self, forKey: "plato", in: contacts) == ContactV1(fullName: "Plato", phone: "3"))
        }
    }

    @Test func migrationFailureSaysWhyTheMigrationFailed() throws {
        try withStore { store, _ throws in
            try store.save(ContactV1(fullName: "Plato", phone: "3"), forKey: "plato", in: contacts)
            let report = try store.migrateAll(of: ContactV2.self, in: contacts)
            let reason = try #require(report.failed.first?.reason)
            // The migration's own error text, not a generic "The operation could not be completed".
            #expect(reason.contains("'Plato' has no last name"))
            let error = archiveError { try store.load(ContactV2.self, forKey: "plato", in: contacts) }
            #expect(error?.description.contains("'Plato' has no last name") == true)
        }
    }

    @Test func objectSavedWithANewerSchemaThrowsNewerSchema() throws {
        try withStore { store, _ throws in
            try store.save(ContactV3(firstName: "Ada", lastName: "Lovelace", phones: ["1", "2"]), forKey: "ada", in: contacts)
            let error = archiveError { try store.load(ContactV2.self, forKey: "ada", in: contacts) }
            guard case .newerSchema(let id, let stored, let supported)? = error else {
                Issue.record("expected newerSchema, got \(String(describing: error))")
                return
            }
            #expect(id == ContactID.ada)
            #expect(stored == 3)
            #expect(supported == 2)
            // migrateAll leaves newer objects alone.
            let report = try store.migrateAll(of: ContactV2.self, in: contacts)
            #expect(report.migrated.isEmpty)
            #expect(try store.history(ContactID.ada).count == 1)
        }
    }

    @Test func objectWithoutRecordedSchemaIsReadInTheCurrentShapeOrAsVersionOne() throws {
        try withStore { store, _ throws in
            // Written by another program: the manifest knows no schema.
            try store.put(Data(#"{"firstName":"Ada","lastName":"Lovelace","phone":"1"}"#.utf8), as: ContactID.ada)
            let charles = try ObjectID(collection: contacts, key: "charles")
            try store.put(Data(#"{"fullName":"Charles Babbage","phone":"2"}"#.utf8), as: charles)
            #expect(try store.history(charles).last?.schemaVersion == nil)

            #expect(try store.load(ContactV2.self, forKey: "ada", in: contacts) == ContactV2(firstName: "Ada", lastName: "Lovelace", phone: "1"))
            #expect(
                try store.load(ContactV2.self, forKey: "charles", in: contacts) == ContactV2(firstName: "Charles", lastName: "Babbage", phone: "2"))
        }
    }

    @Test func restoringAVersionFromBeforeAMigrationMigratesIt() throws {
        try withStore { store, _ throws in
            try store.save(ContactV1(fullName: "Ada Lovelace", phone: "1"), forKey: "ada", in: contacts)
            _ = try store.migrateAll(of: ContactV2.self, in: contacts)
            try store.save(ContactV2(firstName: "Ada", lastName: "King", phone: "9"), forKey: "ada", in: contacts)
            #expect(try store.history(ContactID.ada).map(\.schemaVersion) == [1, 2, 2])

            // Version 1 is in the version 1 shape: restore must read it through the migration.
            #expect(try store.restore(ContactV2.self, forKey: "ada", version: 1, in: contacts) == 4)
            #expect(try store.history(ContactID.ada).last?.schemaVersion == 1)
            #expect(try store.load(ContactV2.self, forKey: "ada", in: contacts) == ContactV2(firstName: "Ada", lastName: "Lovelace", phone: "1"))
        }
    }
}

private enum ContactID {
    static let ada = try! ObjectID(collection: contacts, key: "ada")
}
