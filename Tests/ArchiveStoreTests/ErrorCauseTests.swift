import Foundation
import TestSupport
import Testing

@testable import ArchiveStore

/// Errors keep what caused them, and their exit status follows from the cause.
@Suite("Errors keep their cause")
struct ErrorCauseTests {
    /// A manifest locked by another connection past the busy timeout is "busy" (exit 3), with
    /// SQLite's own code kept, not a flattened string.
    @Test func aManifestLockedTooLongIsBusyWithSQLitesCode() throws {
        try withTemporaryDirectory { dir in
            let path = dir + "/db.sqlite"
            let holder = try SQLiteConnection(path: path, mode: .create)
            try holder.execute("PRAGMA journal_mode=WAL; CREATE TABLE t(x); BEGIN IMMEDIATE")
            defer { try? holder.execute("ROLLBACK") }
            let other = try SQLiteConnection(path: path, busyTimeoutMilliseconds: 20)
            var caught: (any Error)?
            do { try other.execute("BEGIN IMMEDIATE") } catch { caught = error }
            let error = ArchiveError.wrap(try #require(caught))
            guard case .manifestBusy(let cause) = error else {
                Issue.record("expected manifestBusy, got \(error)")
                return
            }
            #expect(cause.primaryCode == 5)  // SQLITE_BUSY
            #expect(error.exitStatus == ExitStatus.busy)
            #expect(!error.isBadInput)
        }
    }

    @Test func anSQLiteFailureKeepsItsExtendedCode() throws {
        try withTemporaryDirectory { dir in
            let db = try SQLiteConnection(path: dir + "/db.sqlite", mode: .create)
            var caught: (any Error)?
            do { try db.execute("CREATE TABLE t(x UNIQUE); INSERT INTO t VALUES (1); INSERT INTO t VALUES (1)") } catch { caught = error }
            guard case .manifest(let cause) = ArchiveError.wrap(try #require(caught)) else {
                Issue.record("expected a manifest error")
                return
            }
            #expect(cause.code == 2067)  // SQLITE_CONSTRAINT_UNIQUE
            #expect(cause.primaryCode == 19)
        }
    }

    /// A manifest error names the store whose manifest failed (a command's one sentence on a
    /// full disk said only "manifest error: SQLite error 13: database or disk is full").
    @Test func aManifestErrorNamesItsStore() throws {
        try withTemporaryDirectory { dir in
            try FileManager.default.createDirectory(atPath: dir + "/S/.archive-sync", withIntermediateDirectories: true)
            let db = try SQLiteConnection(path: dir + "/S/.archive-sync/manifest.sqlite", mode: .create)
            var caught: (any Error)?
            do { try db.execute("CREATE TABLE t(x UNIQUE); INSERT INTO t VALUES (1); INSERT INTO t VALUES (1)") } catch { caught = error }
            let error = ArchiveError.wrap(try #require(caught))
            #expect(error.description.hasPrefix("manifest error in \(dir)/S: SQLite error 2067"), "\(error)")
        }
    }

    /// A failure nobody described is a failure (exit 1), never the user's bad input (exit 2).
    @Test func anUnknownErrorIsAFailureNotBadInput() {
        struct Unforeseen: Error {}
        let error = ArchiveError.wrap(Unforeseen())
        #expect(error.exitStatus == ExitStatus.failure)
        #expect(!error.isBadInput)
    }
}
