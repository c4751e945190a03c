import ArchiveLocking
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The manifest inside one transaction. Valid only inside ``Manifest/read(_:)`` or ``Manifest/write(_:)``.
final class ManifestTransaction {
    /// The connection; client modules reach their own tables only through ``ManifestSQL``.
    let db: SQLiteConnection
    let replica: ReplicaID
    private var sequence: Int?
    private var cachedHistoryLimit: Int?
    /// Every change recorded in this transaction, published when it commits.
    var recorded: [StoreChange] = []
    /// True once a row took a new change sequence: the commit is then announced to followers.
    private(set) var sequenceMoved = false
    /// When this transaction began: the time it records as every change's.
    let now = Manifest.now()

    init(db: SQLiteConnection, replica: ReplicaID) {
        self.db = db
        self.replica = replica
    }

    /// How many versions of each object history keeps: read in each transaction, because
    /// another process may have changed it.
    func historyLimit() throws -> Int {
        if let cachedHistoryLimit { return cachedHistoryLimit }
        let limit = try meta("history_limit").flatMap { Int($0) } ?? Manifest.defaultHistoryLimit
        cachedHistoryLimit = limit
        return limit
    }

    // MARK: Meta

    func meta(_ name: String) throws -> String? { try db.meta(name) }

    func setMeta(_ name: String, _ value: String) throws { try db.setMeta(name, value) }

    /// The store-wide change sequence: the number of changes ever recorded. Objects keep
    /// their rows as tombstones, so the largest `seq` of any row is the latest change.
    func currentSequence() throws -> Int {
        if let sequence { return sequence }
        let stored = try db.first("SELECT coalesce(max(seq), 0) FROM objects") { Int($0.int(0)) } ?? 0
        sequence = stored
        return stored
    }

    /// Takes the next change sequence number for a row that changes in this transaction.
    func nextSequence() throws -> Int {
        let next = try currentSequence() + 1
        sequence = next
        sequenceMoved = true
        return next
    }
}

extension SQLiteConnection {
    /// A store setting from the `meta` table.
    func meta(_ name: String) throws -> String? {
        try first("SELECT value FROM meta WHERE name = ?", [.text(name)]) { $0.text(0) }
    }

    func setMeta(_ name: String, _ value: String) throws {
        try run("INSERT OR REPLACE INTO meta(name, value) VALUES(?, ?)", [.text(name), .text(value)])
    }
}
