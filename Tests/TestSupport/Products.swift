import Foundation

// Where the tests find the programs the build made: beside the running test executable.

/// The built product `name` (an executable target of the package): in the products directory
/// that holds the running test executable (`.build/debug/archive-syncPackageTests.xctest` beside
/// `.build/debug/archive-sync`), or nil when it is not there.
public func builtProduct(named name: String) -> String? {
    let fileManager = FileManager.default
    var directories: [URL] = []
    // The running executable, with symlinks resolved (`.build/debug` is one).
    if let executable = try? fileManager.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
        directories.append(URL(fileURLWithPath: executable).deletingLastPathComponent())
    }
    if let first = CommandLine.arguments.first, !first.isEmpty {
        let url = URL(fileURLWithPath: first, relativeTo: URL(fileURLWithPath: fileManager.currentDirectoryPath))
        directories.append(url.standardizedFileURL.resolvingSymlinksInPath().deletingLastPathComponent())
    }
    // Swift Testing may run inside `<name>.xctest`; the products are beside it.
    for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
        directories.append(bundle.bundleURL.deletingLastPathComponent())
    }
    for directory in directories {
        let candidate = directory.appendingPathComponent(name).path
        var isDirectory: ObjCBool = false
        if fileManager.fileExists(atPath: candidate, isDirectory: &isDirectory), !isDirectory.boolValue,
            fileManager.isExecutableFile(atPath: candidate)
        {
            return candidate
        }
    }
    return nil
}

/// The built `archive-sync` binary (``builtProduct(named:)``), or else the one named by the
/// environment variable `ARCHIVE_SYNC_BIN`; nil when neither is there.
public let archiveSyncBinary: String? = {
    if let built = builtProduct(named: "archive-sync") { return built }
    if let fromEnvironment = ProcessInfo.processInfo.environment["ARCHIVE_SYNC_BIN"], !fromEnvironment.isEmpty,
        FileManager.default.isExecutableFile(atPath: fromEnvironment)
    {
        return fromEnvironment
    }
    return nil
}()

/// ``archiveSyncBinary``, or the bare name `archive-sync` (looked up on `PATH`, here and on the
/// far side of ssh) when it was not found: the tests that pass it to another program.
public var archiveSyncProgram: String { archiveSyncBinary ?? "archive-sync" }
