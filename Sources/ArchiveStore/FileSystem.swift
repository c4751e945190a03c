import CArchiveShims
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A system call that failed: which call, on what path, and the `errno` it set.
public struct SystemCallError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The C function that failed, such as `openat` or `fsync`.
    public let call: String
    /// The path the call was working on.
    public let path: String
    /// The `errno` value the call set.
    public let errno: Int32

    public var description: String {
        "\(call)(\(path)) failed: \(String(cString: strerror(errno)))"
    }
}

/// What a scan compares to tell whether a file changed: size, modification time and inode.
struct FileStamp: Equatable, Sendable {
    var size: Int64
    var mtimeNanoseconds: Int64
    var inode: UInt64
}

extension timespec {
    /// Nanoseconds since 1970.
    var nanoseconds: Int64 { Int64(tv_sec) * 1_000_000_000 + Int64(tv_nsec) }
}

extension FileStamp {
    init(_ info: stat) {
        size = Int64(info.st_size)
        mtimeNanoseconds = info.st_mtim.nanoseconds
        inode = UInt64(info.st_ino)
    }
}

/// What tells whether a directory's entries changed: adding, removing or renaming an entry
/// sets the directory's mtime and ctime. The ctime cannot be set back (`rsync -a` or `touch`
/// can restore an mtime), and the inode tells a directory made anew.
struct DirectoryStamp: Equatable, Sendable {
    var inode: UInt64
    var mtimeNanoseconds: Int64
    var ctimeNanoseconds: Int64
}

/// What `fstatat` says about one directory entry, without following a symlink.
struct FileStatus: Sendable {
    enum Kind: Sendable { case regular, directory, symlink, other }
    var kind: Kind
    var stamp: FileStamp
}

/// An open file descriptor. The owner closes it, once.
struct FileHandle {
    let fd: Int32
    let path: String

    func close() { _ = Glibc.close(fd) }
}

/// `UTIME_OMIT` from `<sys/stat.h>` (a macro Swift does not import): leave this time as it is.
private let utimeOmit = (1 << 30) - 2

/// Where `d_name` starts in a `dirent`.
private let direntNameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!

/// Thin, typed wrappers over the POSIX calls the store needs.
///
/// Every name is resolved relative to an open directory with `O_NOFOLLOW`, so that nothing
/// inside a store can send a read or a write through a symlink to somewhere else.
enum FileSystem {
    /// Retries `body` while it fails with `EINTR`; throws a ``SystemCallError`` on any other failure.
    @discardableResult
    static func check(_ call: String, _ path: @autoclosure () -> String, _ body: () -> Int32) throws -> Int32 {
        while true {
            let result = body()
            if result >= 0 { return result }
            let code = errno  // before building the path, which may allocate and so touch errno
            if code == EINTR { continue }
            throw SystemCallError(call: call, path: path(), errno: code)
        }
    }

    /// Opens a directory, or returns nil when it is not there (`ENOENT`, `ENOTDIR`, or a
    /// symlink where a directory should be). Any other failure, such as running out of file
    /// descriptors, is thrown: it says nothing about whether the directory exists.
    static func openDirectoryIfPresent(_ name: String, in parent: Int32, path: String) throws -> FileHandle? {
        do {
            return try openDirectory(name, in: parent, path: path)
        } catch let error as SystemCallError where [ENOENT, ENOTDIR, ELOOP].contains(error.errno) {
            return nil
        }
    }

    /// Opens a directory. The corresponding C function is `openat` with `O_DIRECTORY`.
    ///
    /// - Parameters:
    ///   - name: the name, relative to `parent` (or a path when `parent` is `AT_FDCWD`).
    ///   - parent: the directory `name` is in.
    ///   - followSymlink: false refuses a symlink (the call fails with `ELOOP` or `ENOTDIR`).
    static func openDirectory(_ name: String, in parent: Int32 = AT_FDCWD, path: String, followSymlink: Bool = false) throws -> FileHandle {
        var flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC
        if !followSymlink { flags |= O_NOFOLLOW }
        let fd = openat(parent, name, flags)
        guard fd >= 0 else {
            let code = errno
            // O_NOFOLLOW | O_DIRECTORY on a symlink fails with ENOTDIR: say it is a symlink.
            if code == ENOTDIR, !followSymlink, kind(of: name, in: parent) == S_IFLNK {
                throw SystemCallError(call: "open", path: path, errno: ELOOP)
            }
            if code == EINTR { return try openDirectory(name, in: parent, path: path, followSymlink: followSymlink) }
            throw SystemCallError(call: "open", path: path, errno: code)
        }
        return FileHandle(fd: fd, path: path)
    }

    /// The `S_IFMT` bits of an entry, without following a symlink; nil when it cannot be read.
    /// The corresponding C function is `fstatat` with `AT_SYMLINK_NOFOLLOW`.
    static func kind(of name: String, in parent: Int32) -> mode_t? {
        var info = stat()
        guard fstatat(parent, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        return info.st_mode & S_IFMT
    }

    /// What a file of this mode is, for an error message: "a directory", "a FIFO", ...
    static func kindName(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFREG: return "a regular file"
        case S_IFDIR: return "a directory"
        case S_IFLNK: return "a symlink"
        case S_IFIFO: return "a FIFO"
        case S_IFSOCK: return "a socket"
        case S_IFCHR: return "a character device"
        case S_IFBLK: return "a block device"
        default: return "not a file"
        }
    }

    /// Why opening `relativePath` below `directory` failed, naming the component at fault:
    /// `openat2` says ELOOP (or ENOTDIR) for a symlink anywhere on the way, and a message that
    /// blamed the last name would send the user to the wrong place.
    static func explainOpenFailure(_ relativePath: String, in directory: Int32, path: String, errno code: Int32) -> any Error {
        guard code == ELOOP || code == ENOTDIR, path.hasSuffix(relativePath) else {
            return SystemCallError(call: "open", path: path, errno: code)
        }
        let base = path.dropLast(relativePath.count)
        let components = relativePath.split(separator: "/", omittingEmptySubsequences: true)
        for end in components.indices {
            let prefix = components[...end].joined(separator: "/")
            switch kind(of: prefix, in: directory) {
            case S_IFLNK?: return SystemCallError(call: "open", path: base + prefix, errno: ELOOP)
            case let mode? where mode != S_IFDIR && end != components.indices.last:
                return SystemCallError(call: "open", path: base + prefix, errno: ENOTDIR)
            default: continue
            }
        }
        return SystemCallError(call: "open", path: path, errno: code)
    }

    /// Creates `path` and any missing parents, as `mkdir -p` does; an existing entry is left
    /// for the caller to open (and refuse, if it is not a directory). Each directory made is
    /// durable when this returns: a power cut could otherwise lose a new store, and every save
    /// made in it, with its entry in its parent (docs/power-cut.md).
    /// The corresponding C functions are `mkdir`, and `open` and `fsync` of each new one's parent.
    static func makeDirectories(_ path: String) throws {
        var prefix = path.hasPrefix("/") ? "/" : ""
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            let parent = prefix.isEmpty ? "." : prefix
            prefix += component
            if mkdir(prefix, 0o755) == 0 {
                let fd = try check("open", parent) { open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
                defer { _ = Glibc.close(fd) }
                try sync(fd, path: parent)
            } else {
                let code = errno
                // EEXIST: already there; EACCES/EROFS on an existing parent (such as `/`): go on,
                // and let the next component's mkdir, or the open, report what is really wrong.
                if code != EEXIST && !((code == EACCES || code == EROFS) && kind(of: prefix, in: AT_FDCWD) == S_IFDIR) {
                    throw SystemCallError(call: "mkdir", path: prefix, errno: code)
                }
            }
            prefix += "/"
        }
    }

    /// The stamp of an open directory. The corresponding C function is `fstat`.
    static func directoryStamp(_ fd: Int32, path: @autoclosure () -> String) throws -> DirectoryStamp {
        var info = stat()
        try check("fstat", path()) { fstat(fd, &info) }
        return DirectoryStamp(inode: UInt64(info.st_ino), mtimeNanoseconds: info.st_mtim.nanoseconds, ctimeNanoseconds: info.st_ctim.nanoseconds)
    }

    /// Creates a directory if it does not exist. The corresponding C function is `mkdirat`.
    /// - Returns: true when the directory was created by this call.
    @discardableResult
    static func makeDirectory(_ name: String, in parent: Int32, path: String) throws -> Bool {
        if mkdirat(parent, name, 0o755) == 0 { return true }
        let code = errno
        if code == EEXIST { return false }
        throw SystemCallError(call: "mkdir", path: path, errno: code)
    }

    /// Opens `relativePath` below `directory` without following a symlink anywhere on the way.
    ///
    /// The corresponding C function is `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`;
    /// where the kernel lacks it, `openat` with `O_NOFOLLOW` on each component.
    static func openBeneath(_ relativePath: String, in directory: Int32, flags: Int32) -> Int32 {
        while true {
            let fd = archive_open_beneath(directory, relativePath, flags | O_CLOEXEC, 0)
            // ENOSYS: a kernel before 5.6; EPERM: a seccomp profile that refuses openat2.
            if fd >= 0 || ![EINTR, ENOSYS, EPERM].contains(errno) { return fd }
            if errno != EINTR { break }
        }
        var parent = directory
        var components = relativePath.split(separator: "/", omittingEmptySubsequences: true)
        let last = components.removeLast()
        defer { if parent != directory { _ = Glibc.close(parent) } }
        for component in components {
            let next = openat(parent, String(component), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if parent != directory { _ = Glibc.close(parent) }
            guard next >= 0 else {
                parent = directory
                return -1
            }
            parent = next
        }
        return openat(parent, String(last), flags | O_NOFOLLOW | O_CLOEXEC)
    }

    /// Reads a whole regular file below `directory`, or returns nil when it does not exist.
    ///
    /// The corresponding C functions are `openat2` (see ``openBeneath(_:in:flags:)``), `fstat` and `read`.
    static func readFile(_ relativePath: String, in directory: Int32, path: @autoclosure () -> String) throws -> Data? {
        guard let (fd, size) = try openRegularFile(relativePath, in: directory, path: path()) else { return nil }
        defer { _ = Glibc.close(fd) }
        return try readToEnd(fd, size: size, path: path())
    }

    /// Opens a regular file below `directory` for reading, with its size, or returns nil when
    /// it does not exist; anything else there (a FIFO, a symlink on the way) is refused, naming it.
    ///
    /// The corresponding C functions are `openat2` (see ``openBeneath(_:in:flags:)``) and `fstat`.
    static func openRegularFile(_ relativePath: String, in directory: Int32, path: @autoclosure () -> String) throws -> (fd: Int32, size: Int)? {
        // O_NONBLOCK: a FIFO put where a file should be must not block the store (it is refused below).
        let fd = openBeneath(relativePath, in: directory, flags: O_RDONLY | O_NONBLOCK)
        if fd < 0 {
            let code = errno
            if code == ENOENT { return nil }
            throw explainOpenFailure(relativePath, in: directory, path: path(), errno: code)
        }
        var info = stat()
        do {
            try check("fstat", path()) { fstat(fd, &info) }
            guard info.st_mode & S_IFMT == S_IFREG else {
                throw ArchiveError.notRegularFile(path: path(), kind: kindName(info.st_mode))
            }
        } catch {
            _ = Glibc.close(fd)
            throw error
        }
        return (fd, Int(info.st_size))
    }

    /// Reads an open file from its current offset to its end; `size` is what `fstat` gave.
    /// The corresponding C function is `read`.
    static func readToEnd(_ fd: Int32, size: Int, path: @autoclosure () -> String) throws -> Data {
        let expected = max(size, 0)
        var capacity = expected + 1
        var data = Data(count: capacity)
        var count = 0
        // Stop at the size fstat gave (saving a read that would return 0), or read on to EOF
        // if the file turns out longer.
        while count < capacity, count != expected || expected == 0 {
            let n = data.withUnsafeMutableBytes { buffer in
                read(fd, buffer.baseAddress! + count, capacity - count)
            }
            if n < 0 {
                let code = errno
                if code == EINTR { continue }
                throw SystemCallError(call: "read", path: path(), errno: code)
            }
            if n == 0 { break }
            count += n
            if count == capacity {
                capacity *= 2
                data.count = capacity
            }
        }
        data.count = count
        return data
    }

    /// Creates `name` (which must not exist) and writes `data` to it; with `sync`, also
    /// `fdatasync`s it. The corresponding C functions are `openat`, `write`, `fdatasync` and `fstat`.
    /// - Returns: the new file's stamp.
    /// - Parameter modified: when given, the file's mtime (nanoseconds since 1970), as `touch -d` would set it.
    static func writeNewFile(
        _ name: String, in directory: Int32, data: Data, sync: Bool, modified: Int64? = nil, path: @autoclosure () -> String
    ) throws -> FileStamp {
        let fd = try check("open", path()) {
            openat(directory, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o644)
        }
        let handle = FileHandle(fd: fd, path: "")
        defer { handle.close() }
        var written = 0
        try data.withUnsafeBytes { buffer in
            while written < buffer.count {
                let n = write(handle.fd, buffer.baseAddress! + written, buffer.count - written)
                if n < 0 {
                    let code = errno
                    if code == EINTR { continue }
                    throw SystemCallError(call: "write", path: path(), errno: code)
                }
                written += n
            }
        }
        if let modified {
            let times = [
                timespec(tv_sec: 0, tv_nsec: utimeOmit),
                timespec(tv_sec: Int(modified / 1_000_000_000), tv_nsec: Int(modified % 1_000_000_000)),
            ]
            try check("futimens", path()) { futimens(handle.fd, times) }
        }
        if sync { try check("fdatasync", path()) { fdatasync(handle.fd) } }
        var info = stat()
        try check("fstat", path()) { fstat(handle.fd, &info) }
        return FileStamp(info)
    }

    /// Flushes a file or directory to stable storage. The corresponding C function is `fsync`.
    static func sync(_ fd: Int32, path: @autoclosure () -> String) throws {
        try check("fsync", path()) { fsync(fd) }
    }

    /// Flushes the whole file system that holds `fd`. The corresponding C function is `syncfs`.
    static func syncFileSystem(_ fd: Int32, path: @autoclosure () -> String) throws {
        try check("syncfs", path()) { archive_syncfs(fd) }
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
    static func rename(_ from: String, to: String, in directory: Int32, path: @autoclosure () -> String) throws {
        try checkEntryName(from, "rename", path: path)
        try checkEntryName(to, "rename", path: path)
        try check("rename", path()) { renameat(directory, from, directory, to) }
    }

    /// Renames `from` to `to`, both in `directory`, only if nothing stands at `to`: one atomic
    /// call where the file system can (`renameat2` with `RENAME_NOREPLACE`), else a check and
    /// a rename.
    /// - Returns: false, renaming nothing, when `to` exists.
    static func renameIfAbsent(_ from: String, to: String, in directory: Int32, path: @autoclosure () -> String) throws -> Bool {
        try checkEntryName(from, "rename", path: path)
        try checkEntryName(to, "rename", path: path)
        if archive_rename_noreplace(directory, from, to) == 0 { return true }
        let code = errno
        if code == EEXIST { return false }
        guard code == EINVAL || code == ENOSYS else { throw SystemCallError(call: "renameat2", path: path(), errno: code) }
        guard try status(to, in: directory, path: path()) == nil else { return false }
        try rename(from, to: to, in: directory, path: path())
        return true
    }

    /// Removes a file; a file already gone is not an error. The corresponding C function is `unlinkat`.
    /// - Returns: true when this call removed the file.
    @discardableResult
    static func removeFile(_ name: String, in directory: Int32, path: @autoclosure () -> String) throws -> Bool {
        try checkEntryName(name, "remove", path: path)
        if unlinkat(directory, name, 0) == 0 { return true }
        let code = errno
        if code == ENOENT { return false }
        throw SystemCallError(call: "unlink", path: path(), errno: code)
    }

    /// Describes an entry without following a symlink, or returns nil when it does not exist.
    /// The corresponding C function is `fstatat` with `AT_SYMLINK_NOFOLLOW`.
    static func status(_ name: String, in directory: Int32, path: @autoclosure () -> String) throws -> FileStatus? {
        try name.withCString { try status($0, in: directory, path: path()) }
    }

    /// ``status(_:in:path:)`` of a name given as a C string. A name with a `/` in it (from a
    /// damaged manifest row) is no entry of `directory`: nil, without looking elsewhere.
    static func status(_ name: UnsafePointer<CChar>, in directory: Int32, path: @autoclosure () -> String) throws -> FileStatus? {
        if strchr(name, Int32(UInt8(ascii: "/"))) != nil { return nil }
        var info = stat()
        if fstatat(directory, name, &info, AT_SYMLINK_NOFOLLOW) != 0 {
            let code = errno
            if code == ENOENT { return nil }
            throw SystemCallError(call: "stat", path: path(), errno: code)
        }
        let kind: FileStatus.Kind
        switch info.st_mode & S_IFMT {
        case S_IFREG: kind = .regular
        case S_IFDIR: kind = .directory
        case S_IFLNK: kind = .symlink
        default: kind = .other
        }
        return FileStatus(kind: kind, stamp: FileStamp(info))
    }

    /// One entry of a directory listing.
    struct DirectoryEntry {
        var name: String
        /// `DT_REG`, `DT_DIR`, `DT_LNK` and so on; `DT_UNKNOWN` when the file system does not say.
        var type: UInt8
    }

    /// Lists a directory, leaving out `.` and `..`.
    /// The corresponding C functions are `fdopendir` and `readdir`.
    static func listDirectory(_ directory: Int32, path: @autoclosure () -> String) throws -> [DirectoryEntry] {
        var entries: [DirectoryEntry] = []
        try forEachEntry(of: directory, path: path()) { name, type in
            entries.append(DirectoryEntry(name: String(decoding: name, as: UTF8.self), type: type))
        }
        return entries
    }

    /// Calls `body` with each entry's name (its bytes, valid during the call) and type, leaving
    /// out `.` and `..`. The corresponding C functions are `fdopendir` and `readdir`.
    static func forEachEntry(
        of directory: Int32, path: @autoclosure () -> String, _ body: (_ name: UnsafeBufferPointer<UInt8>, _ type: UInt8) throws -> Void
    ) throws {
        // A new open file description, not dup(): a dup shares the offset that readdir moves,
        // and two threads listing one directory would each get part of it.
        let copy = try check("open", path()) { openat(directory, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard let stream = fdopendir(copy) else {
            let error = errno
            _ = Glibc.close(copy)
            throw SystemCallError(call: "opendir", path: path(), errno: error)
        }
        defer { closedir(stream) }
        rewinddir(stream)
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                if errno != 0 { throw SystemCallError(call: "readdir", path: path(), errno: errno) }
                return
            }
            let start = (UnsafeRawPointer(entry) + direntNameOffset).assumingMemoryBound(to: UInt8.self)
            let name = UnsafeBufferPointer(start: start, count: strlen(UnsafeRawPointer(start).assumingMemoryBound(to: CChar.self)))
            if name.elementsEqual(".".utf8) || name.elementsEqual("..".utf8) { continue }
            try body(name, entry.pointee.d_type)
        }
    }
}

/// This process, named so that another process can tell whether it still runs.
///
/// A pid alone can be reused; the pid with the process's start time (field 22 of
/// `/proc/PID/stat`) cannot, within one boot.
struct ProcessIdentity: Equatable, Sendable {
    var pid: Int32
    var startTime: Int64

    static let current = ProcessIdentity(pid: getpid(), startTime: startTime(of: getpid()) ?? 0)

    /// True when this process is still running (or its liveness cannot be ruled out).
    var isRunning: Bool {
        guard kill(pid, 0) == 0 || errno == EPERM else { return false }
        guard let start = ProcessIdentity.startTime(of: pid) else { return true }
        return start == startTime
    }

    private static func startTime(of pid: Int32) -> Int64? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        // Fields after the command name, which may itself contain spaces and parentheses.
        let fields = text[text.index(after: close)...].split(separator: " ")
        // Field 3 (state) is fields[0]; field 22 (starttime) is fields[19].
        return fields.count > 19 ? Int64(fields[19]) : nil
    }
}
