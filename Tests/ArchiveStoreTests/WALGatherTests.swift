import Foundation
import TestSupport
import Testing

@testable import ArchiveStore

/// The manifest's VFS (`CWALGather`) writes a commit's WAL frames in one call; SQLite must see
/// nothing else change: each commit is in the file before another connection can read it,
/// whatever the synchronous setting, and a transaction larger than the page cache (whose
/// pages spill to the WAL before it commits) commits whole.
@Suite struct WALGatherTests {
    /// A database of one table, opened with the manifest's settings.
    private func openTable(_ path: String) throws -> SQLiteConnection {
        try SQLiteConnection(path: path, mode: .create).execute("CREATE TABLE t(id INTEGER PRIMARY KEY, data BLOB NOT NULL)")
        return try SQLiteConnection.openWAL(path: path)
    }

    @Test func aCommitsFramesReachTheWALInOneWrite() throws {
        try withTemporaryDirectory { dir throws in
            let db = try openTable(dir + "/m.sqlite")
            // A first commit starts the WAL: its header is written and flushed on its own.
            try db.run("INSERT INTO t(id, data) VALUES(100, x'00')")
            let before = try #require(db.gatheredWALWrites, "the manifest's WAL is not written through the gathering VFS")
            // Three rows of 3,000 bytes: three table pages and more, in one commit.
            try db.execute("BEGIN IMMEDIATE")
            for n in 0..<3 { try db.run("INSERT INTO t(id, data) VALUES(?, ?)", [.integer(Int64(n)), .blob(Data(repeating: 1, count: 3_000))]) }
            try db.execute("COMMIT")
            let after = try #require(db.gatheredWALWrites)
            #expect(after.writes - before.writes == 1, "the commit's frames took \(after.writes - before.writes) writes")
            #expect(after.frames - before.frames >= 3)
        }
    }

    @Test func anUnflushedCommitIsInTheFileBeforeAnotherConnectionReadsIt() throws {
        try withTemporaryDirectory { dir throws in
            let writer = try openTable(dir + "/m.sqlite")
            // No flush at the commit: nothing but the gathering VFS's own write puts the frames
            // in the file before SQLite publishes the commit in the WAL index.
            try writer.execute("PRAGMA synchronous=NORMAL")
            let reader = try SQLiteConnection(path: dir + "/m.sqlite")
            for n in 1...50 {
                try writer.run("INSERT INTO t(id, data) VALUES(?, ?)", [.integer(Int64(n)), .blob(Data(repeating: UInt8(n), count: 500 * n))])
                let read = try reader.first("SELECT count(*), sum(length(data)) FROM t") { ($0.int(0), $0.int(1)) }
                #expect(
                    read?.0 == Int64(n) && read?.1 == Int64(500 * n * (n + 1) / 2),
                    "after commit \(n) the other connection read \(String(describing: read))")
            }
            #expect(try reader.first("PRAGMA integrity_check") { $0.text(0) } == "ok")
        }
    }

    @Test func aTransactionLargerThanThePageCacheCommitsWhole() throws {
        try withTemporaryDirectory { dir throws in
            let db = try openTable(dir + "/m.sqlite")
            // 24 MB in one transaction: SQLite's 2 MB page cache spills to the WAL many times,
            // in gathered writes as long as the file takes in one call.
            try db.execute("BEGIN IMMEDIATE")
            for n in 0..<6_000 {
                try db.run("INSERT INTO t(id, data) VALUES(?, ?)", [.integer(Int64(n)), .blob(Data(repeating: UInt8(n % 251), count: 4_000))])
            }
            try db.execute("COMMIT")
            let counts = try #require(db.gatheredWALWrites)
            #expect(counts.frames > 6_000 && counts.writes * 20 < counts.frames, "\(counts.frames) frames in \(counts.writes) writes")
            let other = try SQLiteConnection(path: dir + "/m.sqlite")
            #expect(
                try other.first("SELECT count(*) FROM t WHERE length(data) = 4000 AND hex(substr(data, 1, 1)) = printf('%02X', id % 251)") {
                    $0.int(0)
                } == 6_000)
            #expect(try other.first("PRAGMA integrity_check") { $0.text(0) } == "ok")
        }
    }
}
