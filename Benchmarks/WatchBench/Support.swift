import BenchSupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Writes `bytes` to a new file `name` in the directory `directory` as another program would:
/// open, write, close (no fsync, no rename), as `echo {...} > Person/x.json` does.
/// - Returns: the times right before and right after `close()`, which queues the inotify event.
@discardableResult
func writeExternalFile(_ bytes: [UInt8], named name: String, in directory: Int32) throws -> (
    beforeClose: ContinuousClock.Instant, afterClose: ContinuousClock.Instant
) {
    let fd = openat(directory, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    if fd < 0 { throw BenchError("open \(name): \(String(cString: strerror(errno)))") }
    let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    let code = errno
    let beforeClose = ContinuousClock.now
    close(fd)
    let afterClose = ContinuousClock.now
    if written != bytes.count { throw BenchError("write \(name): \(String(cString: strerror(code)))") }
    return (beforeClose, afterClose)
}

/// Opens a directory for `writeExternalFile`.
func openDirectory(_ path: String) throws -> Int32 {
    let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    if fd < 0 { throw BenchError("open \(path): \(String(cString: strerror(errno)))") }
    return fd
}
