import BenchSupport
import CSQLite
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

// The C floors of workloads 1, 2 and 6: the file-system calls of a durability order, with no
// encoding and no manifest; and workload 1's SQLite floor, the least manifest a save can have.

/// One file that grows by whole pages per write, each flushed with `fdatasync`: a durable
/// commit of one page. Growing, each flush also writes the file's inode, which a WAL
/// overwritten in place does not (``SQLiteCommitFloor`` is that one).
struct AppendedLog {
    let fd: Int32
    let path: String

    init(_ path: String) throws {
        self.path = path
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        if fd < 0 { throw BenchError("open \(path): \(String(cString: strerror(errno)))") }
    }

    func close() { _ = Glibc.close(fd) }

    /// Appends `bytes` padded to a whole number of 4 KiB pages (at least one) in one write,
    /// and flushes them.
    func append(_ bytes: [UInt8]) throws {
        let page = bytes + [UInt8](repeating: 0, count: max(4096, (bytes.count + 4095) / 4096 * 4096) - bytes.count)
        let written = page.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        if written != page.count || fdatasync(fd) != 0 { throw BenchError("append \(path): \(String(cString: strerror(errno)))") }
    }
}

/// A directory written with plain system calls.
struct RawDirectory {
    let fd: Int32
    /// Where temp files are made: `fd` itself, or a staging directory.
    let tempFD: Int32
    let path: String

    /// `staging`: the directory to make temp files in, when not `path`.
    init(_ path: String, staging: String? = nil) throws {
        self.path = path
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd < 0 { throw BenchError("open \(path): \(String(cString: strerror(errno)))") }
        tempFD = staging.map { open($0, O_RDONLY | O_DIRECTORY | O_CLOEXEC) } ?? fd
        if tempFD < 0 { throw BenchError("open \(staging ?? path): \(String(cString: strerror(errno)))") }
    }

    func close() {
        if tempFD != fd { _ = Glibc.close(tempFD) }
        _ = Glibc.close(fd)
    }

    /// Writes a temp file, `fsync`s it when asked (Foundation's `.atomic`) and renames it to `name`.
    func write(_ bytes: [UInt8], as name: String, sync: Bool) throws {
        try stage(bytes, as: name, sync: sync)
        try place(name)
    }

    /// Writes the temp file that ``place(_:)`` renames to `name`, `fsync`ed when asked.
    func stage(_ bytes: [UInt8], as name: String, sync: Bool = false) throws {
        let temp = ".tmp." + name
        let file = openat(tempFD, temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        try check(file >= 0, "open", temp)
        let written = bytes.withUnsafeBytes { Glibc.write(file, $0.baseAddress, $0.count) }
        try check(written == bytes.count, "write", temp)
        if sync { try check(fsync(file) == 0, "fsync", temp) }
        _ = Glibc.close(file)
    }

    /// Renames the temp file ``stage(_:as:sync:)`` wrote to `name`, unflushed.
    func place(_ name: String) throws {
        try check(renameat(tempFD, ".tmp." + name, fd, name) == 0, "rename", name)
    }

    private func check(_ ok: Bool, _ call: String, _ name: String) throws {
        if !ok { throw BenchError("\(call) \(path)/\(name): \(String(cString: strerror(errno)))") }
    }
}

/// The store's group commit with nothing but its flush: threads whose commits arrive while
/// one is being flushed wait, and the next leader appends one 4 KiB page for each of them in
/// one write and flushes them with one `fdatasync` (as `CommitQueue` does with SQLite's WAL).
final class GroupCommitLog: Sendable {
    private final class Ticket: @unchecked Sendable {
        /// Set by the leader that flushed this ticket's page, before it signals.
        var outcome: Result<Void, any Error>?
        let signal = DispatchSemaphore(value: 0)
    }

    private struct State: @unchecked Sendable {
        var waiting: [Ticket] = []
        var leading = false
    }

    private let state = Mutex(State())
    private let log: AppendedLog

    init(_ path: String) throws { log = try AppendedLog(path) }

    func close() { log.close() }

    /// Returns once a page of `bytes` is flushed, alone or with other threads' pages.
    func commit(_ bytes: [UInt8]) throws {
        let ticket = Ticket()
        let leads = state.withLock { state -> Bool in
            state.waiting.append(ticket)
            defer { state.leading = true }
            return !state.leading
        }
        if !leads { ticket.signal.wait() }
        if ticket.outcome == nil {
            let group = state.withLock { state -> [Ticket] in
                defer { state.waiting = [] }
                return state.waiting
            }
            let page = bytes + [UInt8](repeating: 0, count: max(0, 4096 - bytes.count))
            let outcome = Result { try log.append(Array([[UInt8]](repeating: page, count: group.count).joined())) }
            for other in group {
                other.outcome = outcome
                if other !== ticket { other.signal.signal() }
            }
            let next = state.withLock { state -> Ticket? in
                if state.waiting.isEmpty { state.leading = false }
                return state.waiting.first
            }
            next?.signal.signal()
        }
        try ticket.outcome!.get()
    }
}

/// The least a save whose one flush is a SQLite commit can do: the store's design (a durable
/// manifest commit carries the save) with nothing of the store's own. One transaction per save
/// in SQLite's WAL at `synchronous=FULL`, 4 KiB pages, prepared statements: a `history` row
/// holding the version's bytes and the object's row with its new version. No version vector,
/// hash, stamp, sequence or intent. The caller checkpoints between rounds, untimed, so the WAL
/// is overwritten in place as the store's is after its settle.
final class SQLiteCommitFloor {
    private var db: OpaquePointer?
    private var begin: OpaquePointer?
    private var insertHistory: OpaquePointer?
    private var upsertObject: OpaquePointer?
    private var end: OpaquePointer?
    let path: String

    init(_ path: String) throws {
        self.path = path
        guard sqlite3_open(path, &db) == SQLITE_OK else { throw BenchError("open \(path): \(String(cString: sqlite3_errmsg(db)))") }
        try run(
            """
            PRAGMA page_size=4096; PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA wal_autocheckpoint=0;
            CREATE TABLE objects(collection TEXT NOT NULL, key TEXT NOT NULL, version INTEGER NOT NULL,
                PRIMARY KEY(collection, key)) WITHOUT ROWID;
            CREATE TABLE history(collection TEXT NOT NULL, key TEXT NOT NULL, version INTEGER NOT NULL, content BLOB NOT NULL,
                PRIMARY KEY(collection, key, version)) WITHOUT ROWID;
            """)
        begin = try prepare("BEGIN IMMEDIATE")
        insertHistory = try prepare("INSERT INTO history VALUES('Person', ?1, 1, ?2)")
        upsertObject = try prepare("INSERT INTO objects VALUES('Person', ?1, 1) ON CONFLICT DO UPDATE SET version = excluded.version")
        end = try prepare("COMMIT")
    }

    func close() {
        for statement in [begin, insertHistory, upsertObject, end] { sqlite3_finalize(statement) }
        sqlite3_close(db)
    }

    /// Records version 1 of `key` with `bytes`, and returns once the commit is flushed.
    func commit(_ bytes: [UInt8], forKey key: String) throws {
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        sqlite3_bind_text(insertHistory, 1, key, -1, transient)
        _ = bytes.withUnsafeBytes { sqlite3_bind_blob(insertHistory, 2, $0.baseAddress, Int32($0.count), transient) }
        sqlite3_bind_text(upsertObject, 1, key, -1, transient)
        for statement in [begin, insertHistory, upsertObject, end] {
            let status = sqlite3_step(statement)
            sqlite3_reset(statement)
            guard status == SQLITE_DONE else { throw error(String(cString: sqlite3_sql(statement))) }
        }
    }

    private func prepare(_ sql: String) throws -> OpaquePointer? {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else { throw error(sql) }
        return statement
    }

    /// Copies the WAL into the database; the next commit then writes the WAL from its start.
    func checkpoint() throws { try run("PRAGMA wal_checkpoint(PASSIVE)") }

    private func run(_ sql: String) throws {
        guard sqlite3_exec(db, sql, nil, nil, nil) == SQLITE_OK else { throw error(sql) }
    }

    private func error(_ what: String) -> BenchError {
        BenchError("\(path): \(what): \(String(cString: sqlite3_errmsg(db)))")
    }
}
