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

    /// What one write transaction learnt that the next may use without reading it again: the
    /// change sequence and the history limit, true for as long as no other connection commits
    /// (``SQLiteConnection/dataVersion`` stays as it was after this connection's commit).
    struct Carried: Sendable {
        var dataVersion: UInt32
        var sequence: Int
        var historyLimit: Int?
        /// ``unsettledAfter()``'s answer, when this transaction read or kept it.
        var unsettledAfter: Int??
    }

    init(db: SQLiteConnection, replica: ReplicaID, carrying carried: Carried? = nil) {
        self.db = db
        self.replica = replica
        sequence = carried?.sequence
        cachedHistoryLimit = carried?.historyLimit
        cachedUnsettledAfter = carried?.unsettledAfter
    }

    /// What the next write transaction may use, once this one committed and the database
    /// is at `dataVersion`; nil when this one never learnt the sequence.
    func carried(at dataVersion: UInt32?) -> Carried? {
        guard let dataVersion, let sequence else { return nil }
        return Carried(dataVersion: dataVersion, sequence: sequence, historyLimit: cachedHistoryLimit, unsettledAfter: cachedUnsettledAfter)
    }

    /// ``unsettledAfter()`` as last read or kept in this transaction; nil when unknown.
    var cachedUnsettledAfter: Int??

    /// How many versions of each object history keeps: read in each transaction (or carried
    /// from the last, when no other connection committed since), because another process may
    /// have changed it.
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
