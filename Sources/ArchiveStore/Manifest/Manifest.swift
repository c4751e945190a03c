import ArchiveLocking
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The store's version manifest: an SQLite database in WAL mode at
/// `.archive-sync/manifest.sqlite`. Its schema is defined in Migrations.swift only.
///
/// Every change to an object, whoever made it, goes through ``ManifestTransaction/record(_:)``.
final class Manifest: Sendable {
    /// 2 keeps each version's bytes in its history row; 1 kept them once per hash in a
    /// `blobs` table, and is migrated when opened.
    static let formatVersion = 2
    static let defaultHistoryLimit = 10

    private let connection: TracedMutex<SQLiteConnection>
    /// `writer.lock` beside the manifest, held (`flock`) from a write's `BEGIN` until what it
    /// does after its commit is done (``write(flushed:_:afterCommit:)``): a write's files are
    /// put in place after the commit that makes it durable, and no other process's write may
    /// come between the two. -1 when the store is read-only or the file cannot be opened.
    private let writerLock: Int32
    private let writerLockPath: String
    /// What the last write transaction learnt, for the next (``ManifestTransaction/Carried``):
    /// a single save then reads neither the change sequence nor the history limit again.
    private let carried = TracedMutex<ManifestTransaction.Carried?>(nil)
    /// The manifest's resolved path, for a second connection (``ArchiveStore/openManifestReader()``).
    let path: String
    /// This store's replica id, made when the store was created.
    let replica: ReplicaID
    /// Why the store cannot be written, when it cannot: every write throws it.
    let writeRefusal: ArchiveError?
    /// Where every change this process records is published, as soon as it commits.
    let feed = ChangeFeed()
    /// The extensions (each its name and steps' names) whose steps this store has run (see
    /// ``ArchiveStore/install(_:)``).
    let installed = TracedMutex<Set<String>>([])

    /// Opens the existing manifest at `path` (a new one is made by ``create(at:replica:historyLimit:)``).
    ///
    /// Opening only reads; the write lock is taken only to upgrade the schema or to change
    /// the history limit. A manifest without its settings, or that SQLite cannot read, is
    /// refused as damaged (``ArchiveError/damagedManifest(store:problem:)``): it is never
    /// filled in afresh, which would give the store a new replica id and no history.
    ///
    /// - Parameters:
    ///   - store: the store's path as given, for messages.
    ///   - readOnly: why the store cannot be written, when it cannot: the connection then only
    ///     reads, and every write throws this.
    init(path: String, store: String, historyLimit requestedLimit: Int?, readOnly: ArchiveError?) throws {
        let db: SQLiteConnection
        var current: (replica: String, limit: Int, format: Int)
        var upgrade: Bool
        do {
            db = try readOnly == nil ? SQLiteConnection.openWAL(path: path) : SQLiteConnection(path: path, mode: .readOnly)
            guard try db.hasTable("meta"), let text = try db.meta("format"), let replica = try db.meta("replica"),
                let limit = try db.meta("history_limit").flatMap({ Int($0) })
            else {
                throw ArchiveError.damagedManifest(store: store, problem: "has no format, replica id or history limit in its meta table")
            }
            guard let format = Int(text), (1...Self.formatVersion).contains(format) else {
                throw ArchiveError.notAStore(
                    path: store, reason: "its manifest has format \(text); this program reads formats 1 to \(Self.formatVersion)")
            }
            current = (replica, limit, format)
            let pending = try Self.pendingMigrations(db)
            // A process that cannot write may still use a store made before steps were
            // recorded, when it has what the unrecorded steps make.
            upgrade = readOnly == nil ? !pending.isEmpty : !pending.allSatisfy(\.isApplied)
        } catch let error as SQLiteError where error.isDamagedFile {
            throw ArchiveError.damagedManifest(store: store, problem: "is not a readable SQLite database (\(error))")
        }
        if readOnly != nil && upgrade {
            throw ArchiveError.notAStore(
                path: store, reason: "its manifest was made by an older release and must be upgraded once by a process that can write it")
        }
        if let readOnly, requestedLimit != nil && requestedLimit != current.limit { throw readOnly }
        if upgrade || (requestedLimit != nil && requestedLimit != current.limit) {
            try db.execute("BEGIN IMMEDIATE")
            do {
                try Self.migrate(db)
                if let requestedLimit {
                    try db.setMeta("history_limit", String(requestedLimit))
                    current.limit = requestedLimit
                }
                try db.execute("COMMIT")
            } catch {
                try? db.execute("ROLLBACK")
                throw error
            }
        }
        // Only a manifest that opened keeps its WAL's files (a refused one is left as it was).
        if readOnly == nil { db.keepWALFiles() }
        replica = ReplicaID(rawValue: current.replica)
        writeRefusal = readOnly
        self.path = path
        connection = TracedMutex(db)
        writerLockPath = Self.writerLockPath(manifest: path)
        writerLock = readOnly == nil ? Glibc.open(writerLockPath, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o644) : -1
    }

    deinit {
        if writerLock >= 0 { close(writerLock) }
    }

    /// `writer.lock` in the manifest's directory.
    static func writerLockPath(manifest: String) -> String {
        guard let slash = manifest.lastIndex(of: "/") else { return writerLockName }
        return String(manifest[...slash]) + writerLockName
    }

    /// The writer lock's file name, which also carries the commit announcement
    /// (``announceCommit()``).
    static let writerLockName = "writer.lock"

    /// Tells followers in every process (a live session's `ManifestFollower`) that the change
    /// sequence moved, once the commit is visible: inotify reports the WAL's frames before
    /// SQLite publishes the commit, and this after it. `writer.lock` is opened read-only and
    /// closed (`IN_CLOSE_NOWRITE`), which changes no inode: a time set on it would dirty the
    /// inode table block it shares with the WAL's inode, and on ext4 without a journal every
    /// commit's `fdatasync` would then write that block too (docs/choices.md).
    private func announceCommit() {
        let fd = Glibc.open(writerLockPath, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        if fd >= 0 { close(fd) }
    }

    /// Reads under one consistent snapshot.
    func read<T: Sendable>(_ body: (ManifestTransaction) throws -> T) throws -> T {
        try transaction("BEGIN", body)
    }

    /// Runs one statement in SQLite's autocommit mode: a single statement sees one snapshot
    /// by itself, without the `BEGIN` and `COMMIT` of a ``read(_:)`` (every load makes one).
    /// `body` runs one statement only.
    func readOne<T: Sendable>(_ body: (ManifestTransaction) throws -> T) throws -> T {
        try connection.withLock { db in try body(ManifestTransaction(db: db, replica: replica)) }
    }

    /// Writes in one transaction, holding SQLite's write lock (and so excluding every other
    /// writer in every process) from the start. Rolls back if `body` throws.
    ///
    /// `flushed: false` commits without flushing the WAL (`synchronous=NORMAL` for this one
    /// transaction): for a change a power cut may undo, such as dropping committed intents
    /// that a `syncfs` has just made needless (an open checks one that comes back).
    func write<T: Sendable>(flushed: Bool = true, _ body: (ManifestTransaction) throws -> T) throws -> T {
        try write(flushed: flushed, body, afterCommit: { _ in })
    }

    /// Runs `body` excluding every writer of every process, as a write transaction does, but
    /// with no transaction: once it runs, every write that committed before it has also done
    /// what it does after its commit (a save's renames).
    func excludingWriters<T>(_ body: () throws -> T) throws -> T {
        try connection.withLock { _ in
            let locks = writerLock >= 0
            if locks { lockWriters() }
            defer { if locks { flock(writerLock, LOCK_UN) } }
            return try body()
        }
    }

    /// Takes `writer.lock`, which every writer of every process takes before SQLite's lock.
    private func lockWriters() {
        while flock(writerLock, LOCK_EX) != 0 && errno == EINTR {}
    }

    /// ``write(flushed:_:)``, then `afterCommit` with its result, still excluding every
    /// other writer of every process (`writer.lock`) and before the changes are published:
    /// a save puts its files in place there, after the commit that made it durable.
    func write<T: Sendable>(flushed: Bool = true, _ body: (ManifestTransaction) throws -> T, afterCommit: (T) throws -> Void) throws -> T {
        if let writeRefusal { throw writeRefusal }
        return try transaction("BEGIN IMMEDIATE", flushed: flushed, body, afterCommit: afterCommit)
    }

    private func transaction<T: Sendable>(
        _ begin: String, flushed: Bool = true, _ body: (ManifestTransaction) throws -> T, afterCommit: (T) throws -> Void = { _ in }
    ) throws -> T {
        try connection.withLock { db in
            // Every writer takes it before SQLite's lock, so that no two wait on each other.
            let locks = begin != "BEGIN" && writerLock >= 0
            if locks { lockWriters() }
            defer { if locks { flock(writerLock, LOCK_UN) } }
            // SQLite refuses to change it inside a transaction: set around this one, under
            // the connection's lock, so that no other transaction commits unflushed.
            if !flushed { try db.execute("PRAGMA synchronous=NORMAL") }
            defer { if !flushed { try? db.execute("PRAGMA synchronous=FULL") } }
            // Prepared once and kept, as every statement is: `execute` parsed them at every save.
            try db.run(begin)
            // A write transaction takes its snapshot at its BEGIN (a read's only at its first
            // statement): what the last one learnt holds if nothing committed since.
            let writes = begin != "BEGIN"
            let carried = writes ? self.carried.withLock { $0 } : nil
            let tx = ManifestTransaction(
                db: db, replica: replica, carrying: carried.flatMap { $0.dataVersion == db.dataVersion ? $0 : nil })
            let result: T
            do {
                result = try body(tx)
                try db.run("COMMIT")
            } catch {
                try? db.execute("ROLLBACK")
                if writes { self.carried.withLock { $0 = nil } }
                throw error
            }
            if writes {
                let next = tx.carried(at: db.dataVersion)
                self.carried.withLock { $0 = next }
            }
            try afterCommit(result)
            if locks && tx.sequenceMoved { announceCommit() }
            // Still under the connection's lock: a catch-up read of other processes'
            // changes sees these either not at all or already published (never twice).
            if !tx.recorded.isEmpty { feed.publish(tx.recorded) }
            return result
        }
    }

    /// Copies the WAL's committed pages into the database file, off a writer's path: a
    /// passive checkpoint, which waits for no reader and stops at the first page one still
    /// needs. Its flushes make nothing durable that a commit had not already.
    func checkpoint() throws {
        try connection.withLock { try $0.execute("PRAGMA wal_checkpoint(PASSIVE)") }
    }

    /// Within this many nanoseconds of a file's mtime, a rewrite of the same size could keep
    /// its stamp (file system clocks are coarse), so a stamp that new is not trusted.
    static let racyWindow: Int64 = 2_000_000_000

    /// Nanoseconds since 1970, from the real-time clock.
    static func now() -> Int64 { FileSystem.now() }
}
