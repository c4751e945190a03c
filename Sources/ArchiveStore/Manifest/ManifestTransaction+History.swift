import ArchiveLocking
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

extension ManifestTransaction {
    // MARK: History

    /// The kept versions of `id`, oldest first.
    func history(_ id: ObjectID) throws -> [ObjectVersion] {
        var versions: [ObjectVersion] = []
        try db.query(
            "SELECT \(ObjectVersion.columns) FROM history WHERE collection = ? AND key = ? ORDER BY version", [.text(id.collection), .text(id.key)]
        ) { versions.append(ObjectVersion(row: $0)) }
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

    func removeIntent(_ id: Int64) throws {
        try db.run("DELETE FROM intents WHERE id = ?", [.integer(id)])
    }

    /// Every intent still recorded; one whose entries cannot be read, or are not well formed,
    /// has nil entries.
    func intents() throws -> [WriteIntent] {
        var intents: [WriteIntent] = []
        try db.query("SELECT id, pid, start, entries FROM intents") { row in
            let entries = (try? JSONDecoder().decode([WriteIntent.Entry].self, from: Data(row.text(3).utf8)))
            intents.append(
                WriteIntent(
                    id: row.int(0), owner: ProcessIdentity(pid: Int32(row.int(1)), startTime: row.int(2)),
                    entries: entries.flatMap { $0.allSatisfy(\.isWellFormed) ? $0 : nil }))
        }
        return intents
    }
}
