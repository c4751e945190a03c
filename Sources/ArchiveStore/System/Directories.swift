import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Where `d_name` starts in a `dirent`.
private let direntNameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!

extension FileSystem {
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
                try sync(openDirectory(parent, path: parent, followSymlink: true), path: parent)
            } else {
                let code = errno
                // EEXIST: already there; EACCES/EROFS on an existing parent (such as `/`): go on,
                // and let the next component's mkdir, or the open, report what is really wrong.
                if code != EEXIST && !((code == EACCES || code == EROFS) && kind(of: prefix, in: nil) == S_IFDIR) {
                    throw SystemCallError(call: "mkdir", path: prefix, errno: code)
                }
            }
            prefix += "/"
        }
    }

    /// Creates a directory if it does not exist. The corresponding C function is `mkdirat`.
    /// - Returns: true when the directory was created by this call.
    @discardableResult
    static func makeDirectory(_ name: String, in parent: Descriptor, path: String) throws -> Bool {
        if mkdirat(parent.fd, name, 0o755) == 0 { return true }
        let code = errno
        if code == EEXIST { return false }
        throw SystemCallError(call: "mkdir", path: path, errno: code)
    }

    /// One entry of a directory listing.
    struct DirectoryEntry {
        var name: String
        /// `DT_REG`, `DT_DIR`, `DT_LNK` and so on; `DT_UNKNOWN` when the file system does not say.
        var type: UInt8
    }

    /// Lists a directory, leaving out `.` and `..`.
    /// The corresponding C functions are `fdopendir` and `readdir`.
    static func listDirectory(_ directory: Descriptor, path: @autoclosure () -> String) throws -> [DirectoryEntry] {
        var entries: [DirectoryEntry] = []
        try forEachEntry(of: directory, path: path()) { name, type in
            entries.append(DirectoryEntry(name: String(decoding: name, as: UTF8.self), type: type))
        }
        return entries
    }

    /// Calls `body` with each entry's name (its bytes, valid during the call) and type, leaving
    /// out `.` and `..`. The corresponding C functions are `fdopendir` and `readdir`.
    static func forEachEntry(
        of directory: Descriptor, path: @autoclosure () -> String, _ body: (_ name: UnsafeBufferPointer<UInt8>, _ type: UInt8) throws -> Void
    ) throws {
        // A new open file description, not dup(): a dup shares the offset that readdir moves,
        // and two threads listing one directory would each get part of it.
        let copy = try check("open", path()) { openat(directory.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
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
