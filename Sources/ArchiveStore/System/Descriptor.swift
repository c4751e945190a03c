import CArchiveShims
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// An open file descriptor, closed when the last reference to it goes.
///
/// Pass the descriptor itself, never its number: a call that is given the object keeps it
/// open for as long as the call runs, while a bare number can be closed (and reused) under it.
package final class Descriptor: Sendable {
    /// The descriptor's number, for the calls of this layer only.
    let fd: Int32
    /// What was opened, for error messages.
    package let path: String

    /// Takes ownership of `fd`, which this object closes.
    init(adopting fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit { _ = Glibc.close(fd) }
}

extension FileSystem {
    /// Opens a directory, or returns nil when it is not there (`ENOENT`, `ENOTDIR`, or a
    /// symlink where a directory should be). Any other failure, such as running out of file
    /// descriptors, is thrown: it says nothing about whether the directory exists.
    static func openDirectoryIfPresent(_ name: String, in parent: Descriptor, path: String) throws -> Descriptor? {
        do {
            return try openDirectory(name, in: parent, path: path)
        } catch let error as SystemCallError where [ENOENT, ENOTDIR, ELOOP].contains(error.errno) {
            return nil
        }
    }

    /// Opens a directory. The corresponding C function is `openat` with `O_DIRECTORY`.
    ///
    /// - Parameters:
    ///   - name: the name, relative to `parent` (or a path when `parent` is nil).
    ///   - parent: the directory `name` is in; nil for the working directory.
    ///   - followSymlink: false refuses a symlink (the call fails with `ELOOP` or `ENOTDIR`).
    static func openDirectory(_ name: String, in parent: Descriptor? = nil, path: String, followSymlink: Bool = false) throws -> Descriptor {
        var flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC
        if !followSymlink { flags |= O_NOFOLLOW }
        while true {
            let fd = openat(parent?.fd ?? AT_FDCWD, name, flags)
            if fd >= 0 { return Descriptor(adopting: fd, path: path) }
            let code = errno
            if code == EINTR { continue }
            // O_NOFOLLOW | O_DIRECTORY on a symlink fails with ENOTDIR: say it is a symlink.
            if code == ENOTDIR, !followSymlink, kind(of: name, in: parent) == S_IFLNK {
                throw SystemCallError(call: "open", path: path, errno: ELOOP)
            }
            throw SystemCallError(call: "open", path: path, errno: code)
        }
    }

    /// Opens a file by its path (absolute, or relative to the working directory) without
    /// following a symlink at its last component. The corresponding C function is `open` with `O_NOFOLLOW`.
    static func openFile(atPath path: String, flags: Int32) throws -> Descriptor {
        let fd = try check("open", path) { Glibc.open(path, flags | O_CLOEXEC | O_NOFOLLOW) }
        return Descriptor(adopting: fd, path: path)
    }

    /// Opens `name` in `directory`, creating it when `create` says so, without following a
    /// symlink; nil when it does not exist and is not to be created.
    /// The corresponding C function is `openat` with `O_NOFOLLOW`.
    static func openFile(_ name: String, in directory: Descriptor, flags: Int32, path: String) throws -> Descriptor? {
        while true {
            let fd = openat(directory.fd, name, flags | O_NOFOLLOW | O_CLOEXEC, 0o644)
            if fd >= 0 { return Descriptor(adopting: fd, path: path) }
            let code = errno
            if code == EINTR { continue }
            if code == ENOENT && flags & O_CREAT == 0 { return nil }
            throw SystemCallError(call: "open", path: path, errno: code)
        }
    }

    /// Creates `name` in `directory` (it must not exist), readable by this user only; nil when
    /// that fails for any reason. The corresponding C function is `openat` with `O_CREAT | O_EXCL`.
    static func createMarker(_ name: String, in directory: Descriptor) -> Descriptor? {
        let fd = openat(directory.fd, name, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        return fd >= 0 ? Descriptor(adopting: fd, path: directory.path.appendingComponent(name)) : nil
    }

    /// The `S_IFMT` bits of an entry, without following a symlink; nil when it cannot be read.
    /// The corresponding C function is `fstatat` with `AT_SYMLINK_NOFOLLOW`.
    static func kind(of name: String, in parent: Descriptor?) -> mode_t? {
        var info = stat()
        guard fstatat(parent?.fd ?? AT_FDCWD, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
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
    static func explainOpenFailure(_ relativePath: String, in directory: Descriptor, path: String, errno code: Int32) -> any Error {
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

    /// Opens `relativePath` below `directory` without following a symlink anywhere on the way;
    /// nil, with `errno` set, when that fails.
    ///
    /// The corresponding C function is `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`;
    /// where the kernel lacks it, `openat` with `O_NOFOLLOW` on each component.
    static func openBeneath(_ relativePath: String, in directory: Descriptor, flags: Int32) -> Descriptor? {
        openBeneath(relativePath, in: directory.fd, flags: flags).map {
            Descriptor(adopting: $0, path: directory.path.appendingComponent(relativePath))
        }
    }

    private static func openBeneath(_ relativePath: String, in directory: Int32, flags: Int32) -> Int32? {
        while true {
            let fd = archive_open_beneath(directory, relativePath, flags | O_CLOEXEC, 0)
            if fd >= 0 { return fd }
            // ENOSYS: a kernel before 5.6; EPERM: a seccomp profile that refuses openat2.
            if ![EINTR, ENOSYS, EPERM].contains(errno) { return nil }
            if errno != EINTR { break }
        }
        var parent = directory
        var components = relativePath.split(separator: "/", omittingEmptySubsequences: true)
        let last = components.removeLast()
        defer { if parent != directory { _ = Glibc.close(parent) } }
        for component in components {
            let next = openat(parent, String(component), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if parent != directory {
                let code = errno
                _ = Glibc.close(parent)
                errno = code
            }
            guard next >= 0 else {
                parent = directory
                return nil
            }
            parent = next
        }
        let fd = openat(parent, String(last), flags | O_NOFOLLOW | O_CLOEXEC)
        return fd >= 0 ? fd : nil
    }
}
