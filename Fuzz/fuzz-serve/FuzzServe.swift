import ArchiveStore
import ArchiveSync
import Foundation
import FuzzSupport

#if canImport(Glibc)
    import Glibc
#endif

/// One store for the whole run, made on first use: `serve` opens it on each handshake. Inputs
/// that write to it leave their objects there, as a long session would.
let storePath: String = {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("fuzz-serve-\(getpid())").path
    try? FileManager.default.removeItem(atPath: path)
    do {
        let store = try ArchiveStore(directory: path, options: .init(create: true))
        _ = try store.save(["name": "seed"], forKey: "p1", in: "Person")
    } catch {
        fatalError("cannot make the store to serve at \(path): \(error)")
    }
    atexit { try? FileManager.default.removeItem(atPath: storePath) }
    return path
}()

/// Where each input is put for `serve` to read: a file, as a pipe would block past 64 KiB.
let inputFile: Int32 = {
    let path = storePath + ".input"
    let fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
    precondition(fd >= 0, "cannot open \(path)")
    unlink(path)
    return fd
}()

let discard = open("/dev/null", O_WRONLY)

/// The bytes a client sends to `archive-sync serve --stdio`, served by the real server from a
/// real store: it answers, refuses with exit status 2, or sees the input end (1); never a trap.
func check(_ bytes: [UInt8]) {
    _ = storePath
    ftruncate(inputFile, 0)
    _ = bytes.withUnsafeBytes { pwrite(inputFile, $0.baseAddress, $0.count, 0) }
    lseek(inputFile, 0, SEEK_SET)
    let server = ReplicaServer(storePath: storePath, channel: FrameChannel(input: inputFile, output: discard)) { _ in }
    let status = server.run()
    precondition([0, 1, 2].contains(status), "serve ended with status \(status)")
}

@main enum FuzzServe {
    static func main() { runFuzzTarget(check) }
}
