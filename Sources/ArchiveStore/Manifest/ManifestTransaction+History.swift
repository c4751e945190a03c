import ArchiveLocking
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

extension ManifestTransaction {
    // MARK: History

    /// The kept versions of `id`, oldest first: the newest the history limit keeps, or with
    /// `unsettled`, also the older ones kept until a settle (``record(_:existing:)``).
    func history(_ id: ObjectID, unsettled: Bool = false) throws -> [ObjectVersion] {
        var versions: [ObjectVersion] = []
        try db.query(
            "SELECT \(ObjectVersion.columns) FROM history WHERE collection = ? AND key = ? ORDER BY version", [.text(id.collection), .text(id.key)]
        ) { versions.append(ObjectVersion(row: $0)) }
        if !unsettled, let newest = versions.last?.version, case let limit = try historyLimit(), newest > limit {
            versions.removeAll { $0.version <= newest - limit }
        }
        return versions
    }

    /// The kept contents of version `version` of `id`; nil for a delete or a dropped version.
    func content(of id: ObjectID, version: Int) throws -> Data? {
        try db.first(
            "SELECT data FROM history WHERE collection = ? AND key = ? AND version = ? AND data IS NOT NULL",
            [.text(id.collection), .text(id.key), .integer(Int64(version))]
        ) { $0.blob(0) }
    }

    /// Calls `body` with every kept version's id, version, recorded hash and contents.
    func forEachContent(_ body: (ObjectID, Int, ContentHash, Data) throws -> Void) throws {
        try db.query("SELECT collection, key, version, hash, data FROM history WHERE data IS NOT NULL AND hash IS NOT NULL") {
            try body(ObjectID(unchecked: $0.text(0), key: $0.text(1)), Int($0.int(2)), ContentHash(bytes: $0.blob(3)), $0.blob(4))
        }
    }

    // MARK: Directories

    /// The stamp of each collection directory whose every entry a scan found to be an object
    /// it recorded, as that scan took it before listing the directory.
    func directoryStamps() throws -> [ExactName: DirectoryStamp] {
        var stamps: [ExactName: DirectoryStamp] = [:]
        try db.query("SELECT name, inode, mtime, ctime FROM directories") {
            stamps[ExactName($0.text(0))] = DirectoryStamp(
                inode: UInt64(bitPattern: $0.int(1)), mtimeNanoseconds: $0.int(2), ctimeNanoseconds: $0.int(3))
        }
        return stamps
    }

    /// Records (or, with nil, forgets) a directory's stamp.
    func setDirectoryStamp(_ name: String, _ stamp: DirectoryStamp?) throws {
        guard let stamp else {
            try db.run("DELETE FROM directories WHERE name = ?", [.text(name)])
            return
        }
        try db.run(
            "INSERT OR REPLACE INTO directories(name, inode, mtime, ctime) VALUES(?, ?, ?, ?)",
            [.text(name), .integer(Int64(bitPattern: stamp.inode)), .integer(stamp.mtimeNanoseconds), .integer(stamp.ctimeNanoseconds)])
    }

    // MARK: Intents

    /// Records writes about to start; returns the intent's id.
    func addIntent(_ entries: [WriteIntent.Entry], owner: ProcessIdentity = .current) throws -> Int64 {
        let text = WriteIntent.Entry.json(entries)
        try db.run("INSERT INTO intents(pid, start, entries) VALUES(?, ?, ?)", [.integer(Int64(owner.pid)), .integer(owner.startTime), .text(text)])
        return db.lastInsertRowID
    }

    /// Records that this process's commits from now on, until its next settle, change
    /// files without an intent of their own (``WriteIntent/after``); returns the intent's id.
    func addSettlePeriod(owner: ProcessIdentity = .current) throws -> Int64 {
        let after = try currentSequence()
        let earlier = try unsettledAfter()
        // Not JSON: a release that reads no `after` takes the row for a damaged intent, and
        // scans the store rather than trusting it.
        try db.run(
            "INSERT INTO intents(pid, start, entries, after) VALUES(?, ?, ?, ?)",
            [.integer(Int64(owner.pid)), .integer(owner.startTime), .text(WriteIntent.settlePeriodEntries), .integer(Int64(after))])
        cachedUnsettledAfter = .some(min(earlier ?? after, after))
        return db.lastInsertRowID
    }

    /// The change sequence after which some change may not be durable on disk yet: the least
    /// `after` of the settle periods still recorded (``WriteIntent/after``); nil when none is.
    func unsettledAfter() throws -> Int? {
        if let cachedUnsettledAfter { return cachedUnsettledAfter }
        let after = try db.first("SELECT min(after) FROM intents") { $0.optionalInt(0).map { Int($0) } } ?? nil
        cachedUnsettledAfter = .some(after)
        return after
    }

    /// Drops intents whose files a `syncfs` made durable. Where settle periods were among
    /// them, the versions past the history limit that they kept (``record(_:existing:)``) go
    /// too, for every object that no period still recorded covers. An id that is no longer
    /// `owner`'s (finished by another process, and given since to a new intent) is left.
    func removeSettled(_ ids: [Int64], owner: ProcessIdentity) throws {
        var after: Int?
        for id in ids {
            guard
                let row = try db.first(
                    "SELECT after FROM intents WHERE id = ? AND pid = ? AND start = ?",
                    [.integer(id), .integer(Int64(owner.pid)), .integer(owner.startTime)], { $0.optionalInt(0) })
            else { continue }
            if let ended = row { after = min(after ?? Int(ended), Int(ended)) }
            try removeIntent(id)
        }
        guard let after else { return }
        let limit = try historyLimit()
        let covered: SQLValue = try unsettledAfter().map { .integer(Int64($0)) } ?? .null
        try db.run(
            """
            DELETE FROM history WHERE rowid IN (
                SELECT h.rowid FROM objects o JOIN history h ON h.collection = o.collection AND h.key = o.key
                WHERE o.seq > ?1 AND (?2 IS NULL OR o.seq <= ?2) AND o.version > ?3 AND h.version <= o.version - ?3)
            """, [.integer(Int64(after)), covered, .integer(Int64(limit))])
    }

    func removeIntent(_ id: Int64) throws {
        try db.run("DELETE FROM intents WHERE id = ?", [.integer(id)])
        cachedUnsettledAfter = nil
    }

    /// Every intent still recorded; one whose entries cannot be read, or are not well formed,
    /// has nil entries.
    func intents() throws -> [WriteIntent] {
        var intents: [WriteIntent] = []
        // A manifest that a process which cannot write opens may predate the column.
        let after = try db.hasColumn("after", in: "intents") ? "after" : "NULL"
        try db.query("SELECT id, pid, start, entries, \(after) FROM intents") { row in
            let owner = ProcessIdentity(pid: Int32(row.int(1)), startTime: row.int(2))
            if let after = row.optionalInt(4), row.text(3) == WriteIntent.settlePeriodEntries {
                intents.append(WriteIntent(id: row.int(0), owner: owner, entries: [], after: Int(after)))
                return
            }
            let entries = (try? JSONDecoder().decode([WriteIntent.Entry].self, from: Data(row.text(3).utf8)))
            intents.append(WriteIntent(id: row.int(0), owner: owner, entries: entries.flatMap { $0.allSatisfy(\.isWellFormed) ? $0 : nil }))
        }
        return intents
    }
}
