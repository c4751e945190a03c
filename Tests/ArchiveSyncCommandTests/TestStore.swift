import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// What the end-to-end tests share: each runs the built `archive-sync` binary as a child process
// on a store of its own in a fresh temp directory, and checks exit status, stdout, stderr and the disk.

/// A fresh store made by `archive-sync init` in its own temp directory.
struct TestStore {
    /// The temp directory holding the store (and any scratch files of the test).
    let directory: String
    /// The store: `directory/store`.
    let path: String
    /// The replica id `init` printed.
    let replica: String

    init(history: Int? = nil) throws {
        directory = try makeTemporaryDirectory()
        path = directory + "/store"
        let made = try runArchiveSync(["init", path] + (history.map { ["--history", String($0)] } ?? []))
        try #require(made.status == 0, "\(made)")
        let match = try #require(made.output.firstMatch(of: /replica ([0-9a-f]{16}),/), "\(made)")
        replica = String(match.1)
    }

    func delete() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs `archive-sync SUBCOMMAND STORE REST...`.
    @discardableResult
    func run(_ subcommand: String, _ rest: String..., stdin: Data? = nil) throws -> CommandResult {
        try runArchiveSync([subcommand, path] + rest, stdin: stdin)
    }

    /// Puts `text` as `id` through stdin and requires success.
    func put(_ id: String, _ text: String) throws {
        let result = try run("put", id, stdin: Data(text.utf8))
        try #require(result.status == 0, "\(result)")
    }

    /// The bytes `get` prints for `id`, requiring success.
    func get(_ id: String, version: Int? = nil) throws -> Data {
        let result = try version.map { try run("get", id, "--version", String($0)) } ?? run("get", id)
        try #require(result.status == 0, "\(result)")
        return result.stdout
    }

    /// `history --json`, parsed.
    func history(_ id: String) throws -> [[String: Any]] {
        let result = try run("history", id, "--json")
        try #require(result.status == 0, "\(result)")
        return try #require(try parseJSON(result) as? [[String: Any]], "\(result)")
    }

    /// `status --json`, parsed.
    func status() throws -> [String: Any] {
        let result = try run("status", "--json")
        try #require(result.status == 0, "\(result)")
        return try #require(try parseJSON(result) as? [String: Any], "\(result)")
    }

    /// The path of an object's file on disk, as the store names it.
    func file(_ collection: String, _ name: String) -> String {
        path + "/" + collection + "/" + name
    }
}

/// stdout of a `--json` command, parsed as one JSON document.
func parseJSON(_ result: CommandResult) throws -> Any {
    try JSONSerialization.jsonObject(with: result.stdout)
}

/// Writes `text` to `path`, replacing the file (a new inode, as an editor's save does).
func writeFile(_ path: String, _ text: String) throws {
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
}

/// The file's size, mtime in nanoseconds and inode: the stamp the store compares.
func stamp(_ path: String) throws -> [Int64] {
    var info = stat()
    try #require(stat(path, &info) == 0, "stat \(path) failed: errno \(errno)")
    #if canImport(Glibc)
        let mtime = info.st_mtim
    #else
        let mtime = info.st_mtimespec
    #endif
    return [Int64(info.st_size), Int64(mtime.tv_sec) * 1_000_000_000 + Int64(mtime.tv_nsec), Int64(truncatingIfNeeded: info.st_ino)]
}

/// Flips one bit of the byte at `offset` in place (same inode, same size) and puts back the
/// file's access and modification times, as bit rot (or a tool restoring the mtime) would.
func flipBitKeepingStamp(_ path: String, at offset: UInt64) throws {
    var before = stat()
    try #require(stat(path, &before) == 0, "stat \(path) failed: errno \(errno)")
    let handle = try #require(FileHandle(forUpdatingAtPath: path))
    try handle.seek(toOffset: offset)
    let byte = try #require(try handle.read(upToCount: 1)?.first)
    try handle.seek(toOffset: offset)
    try handle.write(contentsOf: Data([byte ^ 0x01]))
    try handle.close()
    #if canImport(Glibc)
        var times = [before.st_atim, before.st_mtim]
    #else
        var times = [before.st_atimespec, before.st_mtimespec]
    #endif
    try #require(utimensat(AT_FDCWD, path, &times, 0) == 0, "utimensat \(path) failed: errno \(errno)")
}

/// Checks that `result` failed with `status` and one `archive-sync: ...` line on stderr that
/// contains each of `fragments`, and printed nothing on stdout.
func expectFailure(
    _ result: CommandResult, status: Int32, mentioning fragments: [String], sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(result.status == status, "\(result)", sourceLocation: sourceLocation)
    #expect(result.errorOutput.hasPrefix("archive-sync: "), "\(result)", sourceLocation: sourceLocation)
    for fragment in fragments {
        #expect(result.errorOutput.contains(fragment), "stderr should mention \(fragment): \(result)", sourceLocation: sourceLocation)
    }
    #expect(result.stdout.isEmpty, "\(result)", sourceLocation: sourceLocation)
}

/// The non-empty lines of `text`.
func lines(_ text: String) -> [String] {
    text.split(separator: "\n").map(String.init)
}

/// The whitespace-separated cells of the table row whose first cell is `first`, or nil.
func row(_ text: String, startingWith first: String) -> [String]? {
    lines(text).map { $0.split(whereSeparator: \.isWhitespace).map(String.init) }.first { $0.first == first }
}
