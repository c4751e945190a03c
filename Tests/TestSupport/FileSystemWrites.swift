import Foundation

#if canImport(Glibc)
    import Glibc
#endif

// Plain file-system writes: what another program does to a store's files, with no store
// code in between.

/// A system call a test made failed.
public struct SyscallFailed: Error, CustomStringConvertible {
    /// The call: `open`, `write`, `rename`...
    public let call: String
    public let path: String
    public let errno: Int32

    public var description: String { "\(call) \(path): \(String(cString: strerror(errno)))" }
}

/// Writes `data` to `path` with open(2), write(2) and close(2), in place: creates the file or
/// truncates it, keeping its inode. The kernel reports one IN_CLOSE_WRITE.
public func writeFile(_ path: String, _ data: Data) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { throw SyscallFailed(call: "open", path: path, errno: errno) }
    defer { close(fd) }
    try data.withUnsafeBytes { buffer in
        var written = 0
        while written < buffer.count {
            let count = write(fd, buffer.baseAddress! + written, buffer.count - written)
            guard count >= 0 else { throw SyscallFailed(call: "write", path: path, errno: errno) }
            written += count
        }
    }
}

/// Writes `text` as UTF-8 to `path` (see ``writeFile(_:_:)``).
public func writeFile(_ path: String, _ text: String) throws {
    try writeFile(path, Data(text.utf8))
}

/// rename(2), as `mv` does within one file system.
public func renameFile(_ from: String, to: String) throws {
    guard rename(from, to) == 0 else { throw SyscallFailed(call: "rename", path: from, errno: errno) }
}

/// unlink(2), as `rm` does.
public func removeFile(_ path: String) throws {
    guard unlink(path) == 0 else { throw SyscallFailed(call: "unlink", path: path, errno: errno) }
}

/// link(2): a second name for an existing file.
public func hardLink(_ existing: String, at path: String) throws {
    guard link(existing, path) == 0 else { throw SyscallFailed(call: "link", path: path, errno: errno) }
}

/// mkdir(2).
public func makeDirectory(_ path: String) throws {
    guard mkdir(path, 0o755) == 0 else { throw SyscallFailed(call: "mkdir", path: path, errno: errno) }
}
