import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

extension FileSystem {
    /// Reads a whole regular file below `directory`, or returns nil when it does not exist.
    ///
    /// The corresponding C functions are `openat2` (see ``openBeneath(_:in:flags:)``), `fstat` and `read`.
    static func readFile(_ relativePath: String, in directory: Descriptor, path: @autoclosure () -> String) throws -> Data? {
        try readStampedFile(relativePath, in: directory, path: path())?.data
    }

    /// ``readFile(_:in:path:)`` with the stamp the file had before it was read (from the same
    /// open file): a later change to the file can only make its stamp differ, never hide behind it.
    static func readStampedFile(
        _ relativePath: String, in directory: Descriptor, path: @autoclosure () -> String
    ) throws -> (data: Data, stamp: FileStamp)? {
        guard let (file, stamp) = try openRegularFile(relativePath, in: directory, path: path()) else { return nil }
        return (try readToEnd(file, size: Int(stamp.size), path: path()), stamp)
    }

    /// Opens a regular file below `directory` for reading, with its stamp, or returns nil when
    /// it does not exist; anything else there (a FIFO, a symlink on the way) is refused, naming it.
    ///
    /// The corresponding C functions are `openat2` (see ``openBeneath(_:in:flags:)``) and `fstat`.
    static func openRegularFile(
        _ relativePath: String, in directory: Descriptor, path: @autoclosure () -> String
    ) throws -> (file: Descriptor, stamp: FileStamp)? {
        // O_NONBLOCK: a FIFO put where a file should be must not block the store (it is refused below).
        guard let file = openBeneath(relativePath, in: directory, flags: O_RDONLY | O_NONBLOCK) else {
            let code = errno
            if code == ENOENT { return nil }
            throw explainOpenFailure(relativePath, in: directory, path: path(), errno: code)
        }
        var info = stat()
        try check("fstat", path()) { fstat(file.fd, &info) }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw ArchiveError.notRegularFile(path: path(), kind: kindName(info.st_mode))
        }
        return (file, FileStamp(info))
    }

    /// Reads an open file from its current offset to its end; `size` is what `fstat` gave.
    /// The corresponding C function is `read`.
    static func readToEnd(_ file: Descriptor, size: Int, path: @autoclosure () -> String) throws -> Data {
        let expected = max(size, 0)
        var capacity = expected + 1
        var data = Data(count: capacity)
        var count = 0
        // Stop at the size fstat gave (saving a read that would return 0), or read on to EOF
        // if the file turns out longer.
        while count < capacity, count != expected || expected == 0 {
            let n = data.withUnsafeMutableBytes { buffer in
                read(file.fd, buffer.baseAddress! + count, capacity - count)
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

    /// Reads up to `count` bytes at `offset` of an open file; fewer at its end, none on failure.
    /// The corresponding C function is `pread`.
    static func readPrefix(of file: Descriptor, count: Int) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        let got = pread(file.fd, &buffer, count, 0)
        return got > 0 ? Array(buffer[..<got]) : []
    }
}
