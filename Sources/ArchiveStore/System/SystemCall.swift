import CArchiveShims
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

// The store's system-call layer: every call that touches the disk goes through this folder.
//
// Own small types, not swift-system 1.8.1: it has no public `openat` relative to a directory
// descriptor, no `openat2` or `renameat2`, locks through OFD `fcntl` rather than `flock` (which
// older binaries of this store hold), and its `FileDescriptor` does not own (close) what it wraps.

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

/// Thin, typed wrappers over the POSIX calls the store needs.
///
/// Every name is resolved relative to an open directory with `O_NOFOLLOW` (or
/// `AT_SYMLINK_NOFOLLOW`, or `openat2` with `RESOLVE_NO_SYMLINKS`), so that nothing inside a
/// store can send a read or a write through a symlink to somewhere else.
package enum FileSystem {
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

    /// The absolute path of `path` with every symlink resolved. The corresponding C function is `realpath`.
    static func resolvedPath(_ path: String) throws -> String {
        guard let resolved = realpath(path, nil) else { throw SystemCallError(call: "realpath", path: path, errno: errno) }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Why this process may not access `name` in `directory` with `mode` (`W_OK`...), as an
    /// `errno`; nil when it may. The corresponding C function is `faccessat` with `AT_EACCESS`.
    static func accessError(_ name: String, in directory: Descriptor, mode: Int32) -> Int32? {
        faccessat(directory.fd, name, mode, AT_EACCESS) == 0 ? nil : errno
    }
}

extension String {
    /// This path with `component` (a name, or a relative path) appended after one `/`: the one
    /// way paths are joined in this package. A trailing `/` of this path is not doubled.
    package func appendingComponent(_ component: some StringProtocol) -> String {
        if isEmpty { return String(component) }
        return hasSuffix("/") ? self + component : self + "/" + component
    }

    /// This path with each of `components` appended in turn (see ``appendingComponent(_:)``).
    package func appendingComponents(_ components: String...) -> String {
        components.reduce(self) { $0.appendingComponent($1) }
    }
}
