import CArchiveShims
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// `UTIME_OMIT` from `<sys/stat.h>` (a macro Swift does not import): leave this time as it is.
private let utimeOmit = (1 << 30) - 2

extension FileSystem {
    /// Creates `name` (which must not exist) and writes `data` to it; with `sync`, also
    /// `fdatasync`s it. The corresponding C functions are `openat`, `write`, `futimens`,
    /// `fdatasync` and `statx`.
    /// - Returns: the new file's stamp.
    /// - Parameter modified: the file's mtime (nanoseconds since 1970), as `touch -d` would
    ///   set it; by default the real-time clock's time now.
    static func writeNewFile(
        _ name: String, in directory: Descriptor, data: Data, sync: Bool, modified: Int64? = nil, path: @autoclosure () -> String
    ) throws -> FileStamp {
        let fd = try check("open", path()) {
            openat(directory.fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o644)
        }
        let file = Descriptor(adopting: fd, path: "")
        try write(data, to: file, path: path())
        // The stamp is what this call sets, not read back: reading the file's times would make
        // its rename take a fine-grained time (`identity(of:in:)` says what that costs).
        let mtime = modified ?? Self.now()
        let times = [
            timespec(tv_sec: 0, tv_nsec: utimeOmit),
            timespec(tv_sec: Int(mtime / 1_000_000_000), tv_nsec: Int(mtime % 1_000_000_000)),
        ]
        try check("futimens", path()) { futimens(file.fd, times) }
        if sync { try check("fdatasync", path()) { fdatasync(file.fd) } }
        guard let identity = identity(of: file) else {
            let code = errno
            throw SystemCallError(call: "statx", path: path(), errno: code)
        }
        return FileStamp(size: Int64(data.count), mtimeNanoseconds: mtime, inode: identity.inode)
    }

    /// Nanoseconds since 1970, from the real-time clock. The corresponding C function is `clock_gettime`.
    static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return time.nanoseconds
    }

    /// Writes all of `data` at the current offset of `file`. The corresponding C function is `write`.
    static func write(_ data: some DataProtocol & ContiguousBytes, to file: Descriptor, path: @autoclosure () -> String) throws {
        var written = 0
        try data.withUnsafeBytes { buffer in
            while written < buffer.count {
                let n = Glibc.write(file.fd, buffer.baseAddress! + written, buffer.count - written)
                if n < 0 {
                    let code = errno
                    if code == EINTR { continue }
                    throw SystemCallError(call: "write", path: path(), errno: code)
                }
                written += n
            }
        }
    }

    /// Replaces what `file` holds with `data`, written at its start. The corresponding C
    /// functions are `ftruncate` and `pwrite`.
    static func replaceContents(of file: Descriptor, with data: [UInt8]) throws {
        try check("ftruncate", file.path) { ftruncate(file.fd, 0) }
        let written = try check("pwrite", file.path) { Int32(truncatingIfNeeded: pwrite(file.fd, data, data.count, 0)) }
        if written != data.count { throw SystemCallError(call: "pwrite", path: file.path, errno: EIO) }
    }

    /// Flushes a file or directory to stable storage. The corresponding C function is `fsync`.
    static func sync(_ file: Descriptor, path: @autoclosure () -> String) throws {
        try check("fsync", path()) { fsync(file.fd) }
    }

    /// Flushes the whole file system that holds `file`. The corresponding C function is `syncfs`.
    static func syncFileSystem(_ file: Descriptor, path: @autoclosure () -> String) throws {
        try check("syncfs", path()) { archive_syncfs(file.fd) }
    }

    /// Refuses a name with a `/` in it before a call that changes `directory`: the names these
    /// calls take are one entry of it, and some come from the manifest, where a damaged record
    /// must not reach a file elsewhere.
    private static func checkEntryName(_ name: String, _ call: String, path: () -> String) throws {
        if name.utf8.contains(UInt8(ascii: "/")) {
            throw ArchiveError.invalidInput("refusing to \(call) \(path()): '\(name)' is not one name in its directory")
        }
    }

    /// Atomically replaces `to` with `from`, both in `directory`. The corresponding C function is `renameat`.
    static func rename(_ from: String, to: String, in directory: Descriptor, path: @autoclosure () -> String) throws {
        try checkEntryName(from, "rename", path: path)
        try checkEntryName(to, "rename", path: path)
        try check("rename", path()) { renameat(directory.fd, from, directory.fd, to) }
    }

    /// Atomically replaces `to` in `directory` with `from` in `source` (one file system). The
    /// corresponding C function is `renameat`.
    static func rename(_ from: String, in source: Descriptor, to: String, in directory: Descriptor, path: @autoclosure () -> String) throws {
        try checkEntryName(from, "rename", path: path)
        try checkEntryName(to, "rename", path: path)
        try check("rename", path()) { renameat(source.fd, from, directory.fd, to) }
    }

    /// Swaps `from` in `source` and `to` in `directory` in one atomic call (`renameat2` with
    /// `RENAME_EXCHANGE`): a rename over `to` that leaves the file it replaced at `from`
    /// instead of freeing it there and then.
    /// - Returns: false, changing nothing, when `to` does not exist or the file system cannot.
    static func exchange(_ from: String, in source: Descriptor, with to: String, in directory: Descriptor, path: @autoclosure () -> String) throws
        -> Bool
    {
        try checkEntryName(from, "rename", path: path)
        try checkEntryName(to, "rename", path: path)
        if archive_rename_exchange(source.fd, from, directory.fd, to) == 0 { return true }
        let code = errno
        guard code == ENOENT || code == EINVAL || code == ENOSYS else { throw SystemCallError(call: "renameat2", path: path(), errno: code) }
        return false
    }

    /// Renames `from` to `to`, both in `directory`, only if nothing stands at `to` (see
    /// ``renameIfAbsent(_:in:to:in:path:)``).
    /// - Returns: false, renaming nothing, when `to` exists.
    static func renameIfAbsent(_ from: String, to: String, in directory: Descriptor, path: @autoclosure () -> String) throws -> Bool {
        try renameIfAbsent(from, in: directory, to: to, in: directory, path: path())
    }

    /// Renames `from` in `source` to `to` in `directory` only if nothing stands at `to`: one
    /// atomic call where the file system can (`renameat2` with `RENAME_NOREPLACE`), else a
    /// check and a rename.
    /// - Returns: false, renaming nothing, when `to` exists.
    static func renameIfAbsent(
        _ from: String, in source: Descriptor, to: String, in directory: Descriptor, path: @autoclosure () -> String
    ) throws -> Bool {
        try checkEntryName(from, "rename", path: path)
        try checkEntryName(to, "rename", path: path)
        if archive_rename_noreplace(source.fd, from, directory.fd, to) == 0 { return true }
        let code = errno
        if code == EEXIST { return false }
        guard code == EINVAL || code == ENOSYS else { throw SystemCallError(call: "renameat2", path: path(), errno: code) }
        guard try status(to, in: directory, path: path()) == nil else { return false }
        try rename(from, in: source, to: to, in: directory, path: path())
        return true
    }

    /// Removes a file; a file already gone is not an error. The corresponding C function is `unlinkat`.
    /// - Returns: true when this call removed the file.
    @discardableResult
    static func removeFile(_ name: String, in directory: Descriptor, path: @autoclosure () -> String) throws -> Bool {
        try checkEntryName(name, "remove", path: path)
        if unlinkat(directory.fd, name, 0) == 0 { return true }
        let code = errno
        if code == ENOENT { return false }
        throw SystemCallError(call: "unlink", path: path(), errno: code)
    }

    /// Removes a directory that holds files only, and its files; one already gone is not an
    /// error. The corresponding C functions are `unlinkat` (each file, then the directory with
    /// `AT_REMOVEDIR`).
    static func removeDirectory(_ name: String, in parent: Descriptor, path: @autoclosure () -> String) throws {
        try checkEntryName(name, "remove", path: path)
        guard let directory = try openDirectoryIfPresent(name, in: parent, path: path()) else { return }
        for entry in try listDirectory(directory, path: path()) {
            try removeFile(entry.name, in: directory, path: path().appendingComponent(entry.name))
        }
        if unlinkat(parent.fd, name, AT_REMOVEDIR) == 0 { return }
        let code = errno
        if code != ENOENT { throw SystemCallError(call: "rmdir", path: path(), errno: code) }
    }

    /// Removes a file by its path, as `unlink` does; nothing is said when it fails (for
    /// removing what may not be there).
    static func removeFileIfPresent(atPath path: String) {
        _ = unlink(path)
    }
}
