import CArchiveShims
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

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
package struct FileStatus: Sendable, BitwiseCopyable {
    package enum Kind: Sendable, BitwiseCopyable { case regular, directory, symlink, other }
    var kind: Kind
    var stamp: FileStamp
}

extension FileStatus.Kind {
    init(_ mode: mode_t) {
        switch mode & S_IFMT {
        case S_IFREG: self = .regular
        case S_IFDIR: self = .directory
        case S_IFLNK: self = .symlink
        default: self = .other
        }
    }
}

extension FileSystem {
    /// The stamp of an open directory. The corresponding C function is `fstat`.
    static func directoryStamp(_ directory: Descriptor, path: @autoclosure () -> String) throws -> DirectoryStamp {
        var info = stat()
        try check("fstat", path()) { fstat(directory.fd, &info) }
        return DirectoryStamp(inode: UInt64(info.st_ino), mtimeNanoseconds: info.st_mtim.nanoseconds, ctimeNanoseconds: info.st_ctim.nanoseconds)
    }

    /// How many names an open file has; 0 once it is removed. The corresponding C function is `fstat`.
    static func linkCount(of file: Descriptor) -> Int? {
        var info = stat()
        return fstat(file.fd, &info) == 0 ? Int(info.st_nlink) : nil
    }

    /// Describes an entry without following a symlink, or returns nil when it does not exist.
    /// The corresponding C function is `fstatat` with `AT_SYMLINK_NOFOLLOW`.
    static func status(_ name: String, in directory: Descriptor, path: @autoclosure () -> String) throws -> FileStatus? {
        try name.withCString { try status($0, in: directory, path: path()) }
    }

    /// ``status(_:in:path:)`` of a name given as a C string. A name with a `/` in it (from a
    /// damaged manifest row) is no entry of `directory`: nil, without looking elsewhere.
    static func status(_ name: UnsafePointer<CChar>, in directory: Descriptor, path: @autoclosure () -> String) throws -> FileStatus? {
        if strchr(name, Int32(UInt8(ascii: "/"))) != nil { return nil }
        var info = stat()
        if fstatat(directory.fd, name, &info, AT_SYMLINK_NOFOLLOW) != 0 {
            let code = errno
            if code == ENOENT { return nil }
            throw SystemCallError(call: "stat", path: path(), errno: code)
        }
        return FileStatus(kind: FileStatus.Kind(info.st_mode), stamp: FileStamp(info))
    }

    /// What stands at `path` (absolute, or relative to the working directory), or nil when
    /// nothing does; a symlink at its last component is followed only when `followingSymlink`
    /// says so (for a store's root, which may be one). The corresponding C function is `fstatat`.
    package static func entryKind(atPath path: String, followingSymlink: Bool = false) -> FileStatus.Kind? {
        var info = stat()
        guard fstatat(AT_FDCWD, path, &info, followingSymlink ? 0 : AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        return FileStatus.Kind(info.st_mode)
    }

    /// The stamp of the regular file at `relativePath` below `directory` (`Person/person1.json`),
    /// or nil when it is missing, is not a regular file, or a directory on the way is a symlink
    /// (or not a directory). The corresponding C function is `fstatat` with
    /// `AT_SYMLINK_NOFOLLOW`, on the file and on each directory on the way: two calls for the
    /// usual path, where opening the directory would take three.
    static func regularFileStamp(atRelativePath relativePath: String, in directory: Descriptor) -> FileStamp? {
        var info = stat()
        guard fstatat(directory.fd, relativePath, &info, AT_SYMLINK_NOFOLLOW) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        var prefix = relativePath[...]
        while let slash = prefix.lastIndex(of: "/") {
            prefix = prefix[..<slash]
            guard kind(of: String(prefix), in: directory) == S_IFDIR else { return nil }
        }
        return FileStamp(info)
    }

    /// What names one file: its device and inode.
    struct Identity: Equatable, Sendable {
        var device: UInt64 = 0
        var inode: UInt64 = 0
    }

    /// The file that `name` in `directory` is (a symlink itself, not followed), and its kind;
    /// nil when it cannot be read. It reads no time of the file, so that a save's checks do
    /// not make its files' next changes take fine-grained times (`archive_identity` says why).
    /// The corresponding C function is `statx`, asking for the type and the inode only.
    static func identity(of name: String, in directory: Descriptor) -> (identity: Identity, kind: FileStatus.Kind)? {
        identity(directory.fd, name, flags: AT_SYMLINK_NOFOLLOW)
    }

    /// The file that `file` is open on, as ``identity(of:in:)`` reads it.
    static func identity(of file: Descriptor) -> Identity? {
        identity(file.fd, "", flags: AT_EMPTY_PATH)?.identity
    }

    private static func identity(_ fd: Int32, _ name: String, flags: Int32) -> (identity: Identity, kind: FileStatus.Kind)? {
        var identity = Identity()
        var mode: UInt32 = 0
        guard archive_identity(fd, name, flags, &identity.device, &identity.inode, &mode) == 0 else { return nil }
        return (identity, FileStatus.Kind(mode_t(mode)))
    }
}
