import Foundation
import TestSupport
import Testing

@testable import ArchiveStore

#if canImport(Glibc)
    import Glibc
#endif

// MARK: - Temporary stores

/// Opens a new store at `<fresh temp dir>/store`, passes it and the store path to `body`, and
/// removes the directory afterwards.
func withStore<T>(_ options: ArchiveStore.Options = .init(), _ body: (ArchiveStore, String) throws -> T) throws -> T {
    try withTemporaryDirectory { dir throws in
        let path = dir + "/store"
        let store = try ArchiveStore(directory: path, options: options)
        return try withExtendedLifetime(store) { try body(store, path) }
    }
}

/// The async form of ``withStore(_:_:)``, for a test that waits: `Task.sleep` gives its thread
/// back to the other tests, where `Thread.sleep` would hold one of the few the test runner has.
func withStore<T>(_ options: ArchiveStore.Options = .init(), _ body: (ArchiveStore, String) async throws -> T) async throws -> T {
    try await withTemporaryDirectory { dir in
        let path = dir + "/store"
        let store = try ArchiveStore(directory: path, options: options)
        defer { withExtendedLifetime(store) {} }
        return try await body(store, path)
    }
}

/// Keeps `store` from settling on its own while a test runs (its writes' `syncfs`, the
/// intents' removal, the replaced files' removal): the test settles when it chooses.
func holdSettles(_ store: ArchiveStore) {
    store.durability.withLock { $0.scheduled = true }
}

// MARK: - Looking at the disk

/// Every path under the store's `.archive-sync/staging`, relative to it.
func stagedEntries(_ store: String) -> [String] {
    (try? FileManager.default.subpathsOfDirectory(atPath: store + "/" + FileName.metadataDirectory + "/staging")) ?? []
}

/// Every path under `store`, relative to it, except the `.archive-sync` metadata directory.
func filesInStore(_ store: String) -> Set<String> {
    let all = (try? FileManager.default.subpathsOfDirectory(atPath: store)) ?? []
    return Set(all.filter { $0 != FileName.metadataDirectory && !$0.hasPrefix(FileName.metadataDirectory + "/") })
}

/// True when `path` exists as anything, a dangling symlink included.
func entryExists(_ path: String) -> Bool {
    var info = stat()
    return lstat(path, &info) == 0
}

/// The raw bytes of a file.
func contents(of path: String) throws -> Data {
    try Data(contentsOf: URL(fileURLWithPath: path))
}

/// Writes `data` to `path` in place (no temp file, no rename), creating the file if needed:
/// what an editor or another program does.
func overwrite(_ path: String, with data: Data) throws {
    try writeFile(path, data)
}

/// Inverts every bit of one byte of an existing file, in place: the size and the inode stay.
func flipByte(_ path: String, at offset: Int) throws {
    let fd = open(path, O_RDWR | O_CLOEXEC)
    guard fd >= 0 else { throw SystemCallError(call: "open", path: path, errno: errno) }
    defer { close(fd) }
    var byte: UInt8 = 0
    guard pread(fd, &byte, 1, off_t(offset)) == 1 else { throw SystemCallError(call: "pread", path: path, errno: errno) }
    byte = ~byte
    guard pwrite(fd, &byte, 1, off_t(offset)) == 1 else { throw SystemCallError(call: "pwrite", path: path, errno: errno) }
}

/// The file's modification time, with nanoseconds.
func modificationTime(of path: String) throws -> timespec {
    var info = stat()
    guard lstat(path, &info) == 0 else { throw SystemCallError(call: "lstat", path: path, errno: errno) }
    return info.st_mtim
}

/// The file's inode number.
func inode(of path: String) throws -> UInt64 {
    var info = stat()
    guard lstat(path, &info) == 0 else { throw SystemCallError(call: "lstat", path: path, errno: errno) }
    return UInt64(info.st_ino)
}

/// Sets the file's access and modification times to `time`, exactly (nanoseconds included).
func setModificationTime(of path: String, to time: timespec) throws {
    var times = [time, time]
    guard utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW) == 0 else {
        throw SystemCallError(call: "utimensat", path: path, errno: errno)
    }
}

/// `time` moved by `seconds`.
func shifted(_ time: timespec, bySeconds seconds: Int) -> timespec {
    timespec(tv_sec: time.tv_sec + seconds, tv_nsec: time.tv_nsec)
}

/// A process id that no running process has.
func deadProcessID() -> Int32 {
    var pid: Int32 = 999_999
    while kill(pid, 0) == 0 || errno == EPERM { pid -= 1 }
    return pid
}

// MARK: - Errors

/// The ``ArchiveError`` that `body` throws; records an issue when it throws something else or nothing.
func archiveError<T>(sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> T) -> ArchiveError? {
    do {
        _ = try body()
        Issue.record("expected an ArchiveError, but nothing was thrown", sourceLocation: sourceLocation)
        return nil
    } catch let error as ArchiveError {
        return error
    } catch {
        Issue.record("expected an ArchiveError, got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

// MARK: - Models shared by several files

/// A plain model stored in the `Person` collection.
struct Person: Codable, Equatable, Sendable {
    var name: String
    var age: Int
}

/// A model whose collection name starts with `Person`, to catch prefix matches.
struct PersonModel: Codable, Equatable, Sendable {
    var title: String
}

/// Anything other than a `Person`, for wrong-type loads.
struct Invoice: Codable, Equatable, Sendable {
    var number: Int
    var total: Double
    var lines: [String]
}
