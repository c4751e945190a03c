import Foundation

/// Makes a new, empty directory with a unique name under the system's temp directory and
/// returns its path, with symlinks resolved.
public func makeTemporaryDirectory(prefix: String = "archive-sync-tests") throws -> String {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: false)
    return url.resolvingSymlinksInPath().path
}

/// Makes a fresh temp directory (``makeTemporaryDirectory(prefix:)``), passes its path to
/// `body`, and removes it and everything in it afterwards, whether `body` returns or throws.
public func withTemporaryDirectory<T>(prefix: String = "archive-sync-tests", _ body: (String) throws -> T) throws -> T {
    let path = try makeTemporaryDirectory(prefix: prefix)
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try body(path)
}

/// The async form of ``withTemporaryDirectory(prefix:_:)``.
public func withTemporaryDirectory<T>(prefix: String = "archive-sync-tests", _ body: (String) async throws -> T) async throws -> T {
    let path = try makeTemporaryDirectory(prefix: prefix)
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try await body(path)
}
