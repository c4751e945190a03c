import CSQLite
import CWALGather
import Foundation

/// A value bound to, or read from, an SQL statement.
package enum SQLValue {
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob(Data)
    case null
}

/// An error that SQLite reported: its extended result code, its message, and the statement
/// that caused it.
public struct SQLiteError: Error, Sendable, Equatable, CustomStringConvertible {
    /// SQLite's extended result code (`SQLITE_BUSY_SNAPSHOT`, `SQLITE_IOERR_FSYNC`, ...); its
    /// low byte is the primary code (`SQLITE_BUSY`, `SQLITE_IOERR`, ...).
    public let code: Int32
    public let message: String
    /// The statement that failed; nil when opening the database failed.
    public let sql: String?
    /// The `errno` of the system call that failed under SQLite (`sqlite3_system_errno`), kept
    /// for I/O failures only: SQLite reports a failed flush as "disk I/O error" whatever the
    /// cause, a full disk included. 0 when there is none.
    public var systemErrno: Int32 = 0
    /// The database file, when the error came from an open connection.
    public var database: String? = nil

    public var description: String {
        let cause = systemErrno == 0 ? "" : " (\(String(cString: strerror(systemErrno))))"
        if let sql { return "SQLite error \(code): \(message)\(cause) (in: \(sql))" }
        return "SQLite error \(code): \(message)\(cause)"
    }

    /// The store whose manifest `database` is (the directory holding `.archive-sync`), else the file.
    public var store: String? {
        guard let database else { return nil }
        guard let range = database.range(of: "/.archive-sync/", options: .backwards) else { return database }
        return String(database[..<range.lowerBound])
    }

    /// The primary result code: the extended code's low byte.
    public var primaryCode: Int32 { code & 0xff }

    /// True when another connection held the lock for longer than the busy timeout.
    public var isBusy: Bool { primaryCode == SQLITE_BUSY || primaryCode == SQLITE_LOCKED }

    /// True when the file is not a database, or a damaged one.
    var isDamagedFile: Bool { primaryCode == SQLITE_NOTADB || primaryCode == SQLITE_CORRUPT }
}

/// `SQLITE_IOERR_SHMSIZE`, a macro Swift does not import: the `-shm` file could not be grown.
private let sqliteIOErrorShmSize = SQLITE_IOERR | (19 << 8)
/// `SQLITE_IOERR_SHMOPEN`: the `-shm` file was made but could not be set up (no room).
private let sqliteIOErrorShmOpen = SQLITE_IOERR | (18 << 8)

private let SQLITE_TRANSIENT = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// One connection to an SQLite database file, with a cache of prepared statements.
///
/// Not thread-safe: the owner serializes every call (``Manifest`` keeps it behind a mutex).
package final class SQLiteConnection {
    private var handle: OpaquePointer
    private var statements: [StatementKey: OpaquePointer] = [:]

    /// A statement's SQL as the key of its prepared statement, hashed by its length and its
    /// last bytes only: hashing the whole of a long statement (400 bytes for a row of
    /// `objects`) at every run cost a single save more than binding its values. Equal keys
    /// still compare the whole text, byte for byte (as the hash reads it).
    private struct StatementKey: Hashable {
        let sql: String

        static func == (lhs: Self, rhs: Self) -> Bool { ExactName(lhs.sql) == ExactName(rhs.sql) }

        func hash(into hasher: inout Hasher) {
            var sql = sql
            sql.withUTF8 { bytes in
                hasher.combine(bytes.count)
                hasher.combine(bytes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes.suffix(32))))
            }
        }
    }

    /// How ``SQLiteConnection/init(path:mode:busyTimeoutMilliseconds:)`` opens a database.
    package enum OpenMode {
        /// Read and write, creating the file when missing: only for a database being made.
        case create
        /// Read and write an existing file; a missing one fails (`SQLITE_CANTOPEN`) rather than
        /// being made empty.
        case existing
        /// Read only, as WAL mode allows on a read-only file or file system: with the `-wal`
        /// and `-shm` files when they exist or can be made, else as an immutable file (which
        /// takes no locks and makes no files: nothing can write it anyway).
        case readOnly
        /// Read only a file no process writes (a damaged manifest moved aside): no locks, no
        /// `-wal` or `-shm` files read or made.
        case immutable
    }

    /// Opens the database at `path`.
    ///
    /// The corresponding C function is `sqlite3_open_v2`.
    package init(path: String, mode: OpenMode = .existing, busyTimeoutMilliseconds: Int32 = 30_000) throws {
        let flags: Int32
        switch mode {
        case .create: flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
        case .existing: flags = SQLITE_OPEN_READWRITE
        case .readOnly, .immutable: flags = SQLITE_OPEN_READONLY
        }
        let uri = mode == .immutable ? SQLITE_OPEN_URI : 0
        handle = try Self.open(mode == .immutable ? Self.immutableURI(path) : path, flags: flags | uri | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW)
        sqlite3_extended_result_codes(handle, 1)
        sqlite3_busy_timeout(handle, busyTimeoutMilliseconds)
        guard mode == .readOnly else { return }
        // WAL mode reads through the `-shm` file, which read-only media or a directory without
        // write permission cannot give when it is missing (SQLITE_CANTOPEN, or
        // SQLITE_READONLY_DIRECTORY): https://www.sqlite.org/wal.html#readonly
        do {
            try execute("SELECT count(*) FROM sqlite_master")
        } catch let error as SQLiteError where error.code & 0xff == SQLITE_CANTOPEN || error.code & 0xff == SQLITE_READONLY {
            sqlite3_close_v2(handle)
            handle = try Self.open(Self.immutableURI(path), flags: flags | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_URI)
            sqlite3_extended_result_codes(handle, 1)
        }
    }

    private static func open(_ path: String, flags: Int32) throws -> OpaquePointer {
        var db: OpaquePointer?
        // The `unix` VFS when the gathering one could not be made.
        let vfs = archive_wal_gather_register() == SQLITE_OK ? ARCHIVE_WAL_GATHER_VFS : nil
        let rc = sqlite3_open_v2(path, &db, flags, vfs)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            if let db { sqlite3_close_v2(db) }
            var error = SQLiteError(code: rc, message: message, sql: nil)
            error.database = path
            throw error
        }
        return db
    }

    /// `file:PATH?immutable=1`, with every byte of the path that a URI could misread escaped.
    private static func immutableURI(_ path: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out = Array("file:".utf8)
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "/"), UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            }
        }
        return String(decoding: out + Array("?immutable=1".utf8), as: UTF8.self)
    }

    /// Opens the database at `path` in WAL mode.
    ///
    /// WAL mode keeps its index in shared memory, a `-shm` file beside the database that the
    /// first connection makes: on a disk too full for it (no room to grow it, or no inode to
    /// make it: SQLite says it cannot open the file), the database is opened again in
    /// exclusive locking mode, whose index lives in this process's memory, so that reads
    /// never need free space. (No other process has it open then, or its `-shm` would exist;
    /// one that comes meanwhile waits.) A `-wal` file that cannot be made fails the same way
    /// again.
    ///
    /// `synchronous=FULL` flushes the WAL at every commit: with NORMAL, a commit that returned
    /// (an acknowledged save, or the intent that must be durable before its rename) could be
    /// lost to a power cut (docs/power-cut.md).
    ///
    /// SQLite's own checkpoint runs in the commit that takes the WAL past
    /// ``walCheckpointPages``, not past its default of 1,000: a batch of 10,000 objects writes
    /// about 2,600 pages, which its commit then copied into the database file and flushed on
    /// its caller's time. A store checkpoints in the background instead, after
    /// its `syncfs` (``ArchiveStore/settleCommittedWrites()``); the bound caps the WAL of a
    /// process that never settles (one that only scans).
    ///
    /// `journal_size_limit` only matters with ``keepWALFiles()``: the last close then
    /// truncates the WAL to nothing after its checkpoint (any limit makes it do so).
    package static func openWAL(path: String) throws -> SQLiteConnection {
        let settings =
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA wal_autocheckpoint=\(walCheckpointPages); PRAGMA journal_size_limit=\(walSizeLimit);"
        do {
            let db = try SQLiteConnection(path: path)
            try db.execute(settings)
            return db
        } catch let error as SQLiteError
            where [sqliteIOErrorShmSize, sqliteIOErrorShmOpen].contains(error.code) || [SQLITE_FULL, SQLITE_CANTOPEN].contains(error.primaryCode)
        {
            let db = try SQLiteConnection(path: path)
            try db.execute("PRAGMA locking_mode=EXCLUSIVE; " + settings)
            return db
        }
    }

    /// How large a WAL may stay after a checkpoint resets it (``openWAL(path:)``): more than
    /// ``walCheckpointPages`` make, so that only the last close truncates it.
    static let walSizeLimit = 64 << 20

    /// Keeps the `-wal` and `-shm` files once made (`SQLITE_FCNTL_PERSIST_WAL`). By default
    /// the last connection to close deletes both and the next process's open makes them
    /// again: two file creations and two deletes for every command, on the path of a sync's
    /// far side and of a bucket sync's cache (on ext4, a create costs up to milliseconds for
    /// a while after a delete). The last close still checkpoints, and then empties the WAL
    /// down to the connection's `journal_size_limit`. SQLite reads the setting at the close:
    /// a manifest refused after its open (``Manifest``) is closed as before, without it. A
    /// failure leaves SQLite's default.
    package func keepWALFiles() {
        var on: Int32 = 1
        _ = sqlite3_file_control(handle, "main", SQLITE_FCNTL_PERSIST_WAL, &on)
    }

    /// How many pages the WAL holds before a commit checkpoints it (``openWAL(path:)``): 32 MiB.
    package static let walCheckpointPages = 8192

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(handle)
    }

    /// Runs one or more statements that take no parameters and return no rows.
    package func execute(_ sql: String) throws {
        var error: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &error)
        if rc != SQLITE_OK {
            let message = error.map { String(cString: $0) } ?? "unknown error"
            sqlite3_free(error)
            throw withCause(SQLiteError(code: rc, message: message, sql: sql))
        }
    }

    /// Runs `sql` with `bindings` and calls `row` for each result row.
    package func query(_ sql: String, _ bindings: [SQLValue] = [], row: (SQLiteRow) throws -> Void) throws {
        let statement = try prepared(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        try bind(bindings, to: statement, sql: sql)
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_ROW {
                try row(SQLiteRow(statement: statement))
            } else if rc == SQLITE_DONE {
                return
            } else {
                throw lastError(rc, sql: sql)
            }
        }
    }

    /// Runs `sql` with `bindings`, ignoring any result rows.
    package func run(_ sql: String, _ bindings: [SQLValue] = []) throws {
        try query(sql, bindings) { _ in }
    }

    /// The first row's result, or nil when there is no row.
    package func first<T>(_ sql: String, _ bindings: [SQLValue] = [], _ map: (SQLiteRow) throws -> T) throws -> T? {
        var result: T?
        try query(sql, bindings) { row in
            if result == nil { result = try map(row) }
        }
        return result
    }

    /// The rowid of the last row an `INSERT` on this connection made: read from the
    /// connection, where `SELECT last_insert_rowid()` cost every save a statement.
    ///
    /// The corresponding C function is `sqlite3_last_insert_rowid`.
    var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// The writes this connection's WAL file made since it was opened, and the frames they
    /// carried (`CWALGather`); nil when it has no WAL open, or writes it ungathered.
    var gatheredWALWrites: (writes: Int, frames: Int)? {
        var writes: Int64 = 0
        var frames: Int64 = 0
        return archive_wal_gather_counts(handle, &writes, &frames) != 0 ? (Int(writes), Int(frames)) : nil
    }

    /// A number that changes whenever the database does, by this connection's commits or by
    /// any other connection's, in any process (`SQLITE_FCNTL_DATA_VERSION`): taken inside a
    /// write transaction, it says whether anything committed since it was last taken. nil
    /// when SQLite does not say.
    var dataVersion: UInt32? {
        var version: UInt32 = 0
        return sqlite3_file_control(handle, "main", SQLITE_FCNTL_DATA_VERSION, &version) == SQLITE_OK ? version : nil
    }

    /// Whether the database has a table of this name.
    func hasTable(_ name: String) throws -> Bool {
        try first("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [.text(name)]) { _ in true } != nil
    }

    /// Whether `table` has a column of this name.
    func hasColumn(_ column: String, in table: String) throws -> Bool {
        try first("SELECT 1 FROM pragma_table_info(?) WHERE name = ?", [.text(table), .text(column)]) { _ in true } != nil
    }

    private func prepared(_ sql: String) throws -> OpaquePointer {
        if let statement = statements[StatementKey(sql: sql)] { return statement }
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK, let statement else { throw lastError(rc, sql: sql) }
        statements[StatementKey(sql: sql)] = statement
        return statement
    }

    private func bind(_ values: [SQLValue], to statement: OpaquePointer, sql: String) throws {
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let rc: Int32
            switch value {
            case .integer(let v): rc = sqlite3_bind_int64(statement, index, v)
            case .real(let v): rc = sqlite3_bind_double(statement, index, v)
            case .text(let v): rc = sqlite3_bind_text(statement, index, v, -1, SQLITE_TRANSIENT)
            case .blob(let v):
                rc = v.withUnsafeBytes { bytes in
                    // A zero-length blob still binds as a blob, not as NULL.
                    sqlite3_bind_blob(statement, index, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(bytes.count), SQLITE_TRANSIENT)
                }
            case .null: rc = sqlite3_bind_null(statement, index)
            }
            if rc != SQLITE_OK { throw lastError(rc, sql: sql) }
        }
    }

    private func lastError(_ rc: Int32, sql: String) -> SQLiteError {
        withCause(SQLiteError(code: rc, message: String(cString: sqlite3_errmsg(handle)), sql: sql))
    }

    /// `error` with the database's file and, for an I/O failure, the system's reason.
    private func withCause(_ error: SQLiteError) -> SQLiteError {
        var error = error
        if let name = sqlite3_db_filename(handle, "main") { error.database = String(cString: name) }
        // SQLite reads errno when it reports the error, not when the call failed: a later call
        // may have set it since (to ENOENT, say). Kept only when it is a cause of a failed write.
        let cause = sqlite3_system_errno(handle)
        if [SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN].contains(error.primaryCode) && [ENOSPC, EDQUOT, EIO, EROFS, EFBIG].contains(cause) {
            error.systemErrno = cause
        }
        return error
    }
}

/// The current row of a statement being stepped; valid only inside the row callback.
package struct SQLiteRow {
    fileprivate let statement: OpaquePointer

    package func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }
    package func int(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }
    func optionalInt(_ column: Int32) -> Int64? { isNull(column) ? nil : int(column) }
    package func text(_ column: Int32) -> String {
        guard let pointer = sqlite3_column_text(statement, column) else { return "" }
        return String(cString: pointer)
    }
    /// Calls `body` with a text column's UTF-8 bytes, valid during the call: no `String` is made.
    func withText<R>(_ column: Int32, _ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        let pointer = sqlite3_column_text(statement, column)  // before the count, as SQLite asks
        return try body(UnsafeBufferPointer(start: pointer, count: pointer == nil ? 0 : Int(sqlite3_column_bytes(statement, column))))
    }
    package func blob(_ column: Int32) -> Data {
        let count = Int(sqlite3_column_bytes(statement, column))
        guard count > 0, let pointer = sqlite3_column_blob(statement, column) else { return Data() }
        return Data(bytes: pointer, count: count)
    }
}
