import ArchiveLocking
import Foundation

// How a client module (the model cache, sync) keeps data of its own in a store's manifest,
// without the store knowing it: the whole interface is in this file (docs/extending.md walks it).
//
// 1. Tables: a client declares a ``StoreExtension`` (a name, and ordered, named steps of SQL)
//    and calls ``ArchiveStore/install(_:)`` before using its tables. Pending steps run once per
//    store, under the manifest's write lock, and are recorded in the `extension_steps` table.
// 2. Reads and writes of those tables: ``ArchiveStore/readManifest(_:)`` and
//    ``ArchiveStore/writeManifest(_:)`` give a ``ManifestSQL`` inside one manifest transaction.
// 3. Object writes that commit with statements of the client's: ``ArchiveStore/applyConditional(_:then:)``.
// 4. A second, read-only connection for reads that must not wait behind the store's own:
//    ``ArchiveStore/openManifestReader()``.
//
// A client writes only its own tables. It may read the core `objects` table (one row per
// object, tombstones included) by these columns: `collection`, `key`, `file`, `version`,
// `hash`, `size`, `modified` (nanoseconds since 1970), `deleted` (0 or 1), `seq` (the store's
// change sequence at the row's last change) and `origin` (`local`, `sync`, `external`).

/// A client module's tables in a store's manifest: ordered, named steps that make them.
///
/// A step is recorded by name once it has run, and never runs again in that store: a released
/// step is never edited, a change is a new step at the end. Tables made before steps were
/// recorded are adopted, not recreated: such a table's first step is its
/// `CREATE TABLE IF NOT EXISTS` with the definition it always had.
package struct StoreExtension: Sendable {
    /// Unique among the extensions of a store: the module's name is a good one.
    let name: String
    /// Each step's name and its SQL, run as a whole (several statements may be separated by `;`).
    let steps: [(name: String, sql: String)]

    package init(name: String, steps: [(name: String, sql: String)]) {
        self.name = name
        self.steps = steps
    }
}

/// Statements on the manifest, inside the transaction of the call that gives it; valid only
/// during that call. Bindings are `?` placeholders.
package struct ManifestSQL {
    let db: SQLiteConnection

    /// Runs one statement that returns no rows.
    package func run(_ sql: String, _ bindings: [SQLValue] = []) throws { try db.run(sql, bindings) }

    /// Calls `row` with each row of one statement, in order.
    package func query(_ sql: String, _ bindings: [SQLValue] = [], row: (SQLiteRow) throws -> Void) throws {
        try db.query(sql, bindings, row: row)
    }

    /// The first row of one statement, mapped; nil when there is none.
    package func first<T>(_ sql: String, _ bindings: [SQLValue] = [], _ map: (SQLiteRow) throws -> T) throws -> T? {
        try db.first(sql, bindings, map)
    }
}

/// A save (`content`) or delete (nil) that goes ahead only while its object still holds
/// `expected`: another process's change, in the manifest or not yet scanned on disk, is never
/// overwritten.
package struct ConditionalWrite: Sendable {
    var id: ObjectID
    /// The file name's extension, which names the codec (`json`, `plist`); nil for the
    /// collection's codec.
    var fileExtension: String?
    var content: Data?
    /// The live contents the object must hold; nil: it must hold no live object.
    var expected: ContentHash?
    /// A version another replica made, recorded as it is; nil for a new version of this replica's.
    var version: ReplicatedVersion?

    package init(id: ObjectID, fileExtension: String? = nil, content: Data?, expected: ContentHash?, version: ReplicatedVersion? = nil) {
        self.id = id
        self.fileExtension = fileExtension
        self.content = content
        self.expected = expected
        self.version = version
    }
}

/// A version as the replica that made it recorded it.
package struct ReplicatedVersion: Sendable {
    var vector: VersionVector
    /// Nanoseconds since 1970.
    var modified: Int64
    var author: ReplicaID

    package init(vector: VersionVector, modified: Int64, author: ReplicaID) {
        self.vector = vector
        self.modified = modified
        self.author = author
    }
}

/// A read-only connection of its own to a store's manifest: each call is one statement, in
/// SQLite's autocommit mode, not behind the store's connection lock.
package final class ManifestReader: Sendable {
    private let connection: TracedMutex<SQLiteConnection>

    fileprivate init(path: String, readOnly: Bool) throws {
        connection = TracedMutex(try SQLiteConnection(path: path, mode: readOnly ? .readOnly : .existing))
    }

    /// The first row of one statement, mapped; nil when there is none.
    package func first<T: Sendable>(_ sql: String, _ bindings: [SQLValue] = [], _ map: @Sendable (SQLiteRow) throws -> T) throws -> T? {
        do { return try connection.withLock { try $0.first(sql, bindings, map) } } catch { throw ArchiveError.wrap(error) }
    }
}

extension ArchiveStore {
    /// Runs `extension`'s steps this store has not recorded, in order, under the manifest's
    /// write lock, and records them; cheap once done (remembered per open store). A store this
    /// process cannot write is used as it is.
    package func install(_ extension: StoreExtension) throws {
        // Remembered with its steps: a later install may add one.
        let installed = ([`extension`.name] + `extension`.steps.map(\.name)).joined(separator: "\u{0}")
        if manifest.installed.withLock({ $0.contains(installed) }) { return }
        try withManifest { manifest in
            let recorded = try manifest.read { try ExtensionSteps.recorded(of: `extension`, in: $0.db) }
            if !`extension`.steps.allSatisfy({ recorded.contains($0.name) }) {
                guard manifest.writeRefusal == nil else { return }
                try manifest.write { tx in try ExtensionSteps.runPending(of: `extension`, in: tx.db) }
            }
            manifest.installed.withLock { _ = $0.insert(installed) }
        }
    }

    /// Reads under one consistent snapshot of the manifest.
    package func readManifest<T: Sendable>(_ body: (ManifestSQL) throws -> T) throws -> T {
        try withManifest { try $0.read { try body(ManifestSQL(db: $0.db)) } }
    }

    /// Writes in one transaction, holding the manifest's write lock; rolls back if `body` throws.
    /// Like every write, it first finishes the recovery of interrupted writes, if one waits.
    package func writeManifest<T: Sendable>(_ body: (ManifestSQL) throws -> T) throws -> T {
        try requireRecovered()
        return try withManifest { try $0.write { try body(ManifestSQL(db: $0.db)) } }
    }

    /// Applies `writes` with one durability barrier, as a batch does, each only while its
    /// object holds what it expects, and runs `then` in the transaction that records them.
    ///
    /// `then` runs before any file is replaced, with whether each write goes ahead (or its
    /// object already holds what it asks). If it throws, nothing is written or recorded. A
    /// write whose file is found changed on disk in the instant before its rename is still
    /// skipped afterwards (its result is nil).
    ///
    /// - Returns: each object's version afterwards, or nil for a skipped write.
    @discardableResult
    package func applyConditional(_ writes: [ConditionalWrite], then: ((ManifestSQL, [Bool]) throws -> Void)? = nil) throws -> [Int?] {
        let pending = try writes.map { write in
            let fileExtension = write.fileExtension ?? codec(for: write.id.collection).fileExtension
            guard ArchiveCodec(fileExtension: fileExtension) != nil else {
                throw ArchiveError.invalidInput("\(write.id) has the extension '\(fileExtension)', which names no codec")
            }
            let file = FileName.join(stem: FileName.encode(write.id.key), extension: fileExtension)
            var pending = PendingWrite(id: write.id, file: write.content == nil ? "" : file, content: write.content)
            pending.incoming = write.version
            pending.condition = WriteCondition(liveHash: write.expected)
            return pending
        }
        guard let then else { return try applyChecked(pending) }
        return try applyChecked(pending) { tx, going in try then(ManifestSQL(db: tx.db), going) }
    }

    /// Opens a second connection to the manifest, read-only when the store is.
    package func openManifestReader() throws -> ManifestReader {
        do { return try ManifestReader(path: manifest.path, readOnly: isReadOnly) } catch { throw ArchiveError.wrap(error) }
    }
}

/// Where extensions' steps are recorded: one row per step run. Made by the first install.
private enum ExtensionSteps {
    static let table = """
        CREATE TABLE IF NOT EXISTS extension_steps(
            extension TEXT NOT NULL,
            step TEXT NOT NULL,
            applied INTEGER NOT NULL,
            PRIMARY KEY(extension, step)
        ) WITHOUT ROWID;
        """

    static func recorded(of extension: StoreExtension, in db: SQLiteConnection) throws -> Set<String> {
        guard try db.hasTable("extension_steps") else { return [] }
        var names: Set<String> = []
        try db.query("SELECT step FROM extension_steps WHERE extension = ?", [.text(`extension`.name)]) { names.insert($0.text(0)) }
        return names
    }

    /// Inside a write transaction: what another process recorded meanwhile is not run again.
    static func runPending(of extension: StoreExtension, in db: SQLiteConnection) throws {
        try db.execute(table)
        let recorded = try recorded(of: `extension`, in: db)
        for step in `extension`.steps where !recorded.contains(step.name) {
            try db.execute(step.sql)
            try db.run(
                "INSERT INTO extension_steps(extension, step, applied) VALUES(?, ?, ?)",
                [.text(`extension`.name), .text(step.name), .integer(Manifest.now())])
        }
    }
}
