import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

// What a user sees when a command cannot do what was asked: one sentence on stderr that names
// the thing at fault and why, and the documented exit status (README: exit statuses).

@Suite("Error messages and exit statuses")
struct ErrorMessageTests {
    @Test func initOnAFileSaysItIsNotADirectory() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/afile"
        _ = FileManager.default.createFile(atPath: file, contents: Data())
        let result = try runArchiveSync(["init", file])
        #expect(result.status == 2, "\(result)")
        #expect(result.errorOutput == "archive-sync: \(file) is not a usable store: it is not a directory\n", "\(result)")
    }

    @Test func initOnAReadOnlyFileSystemIsASystemFailureNamingTheCause() throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let mount = directory + "/ro"
        try FileManager.default.createDirectory(atPath: mount, withIntermediateDirectories: false)
        try #require(Glibc.mount("tmpfs", mount, "tmpfs", UInt(MS_RDONLY), "size=1m") == 0, "mount: \(String(cString: strerror(errno)))")
        defer { umount(mount) }
        let result = try runArchiveSync(["init", mount + "/new"])
        #expect(result.status == 1, "\(result)")
        #expect(result.errorOutput.contains("Read-only file system"), "\(result)")
        #expect(!result.errorOutput.contains("NSCocoaErrorDomain"), "\(result)")
    }

    @Test func getOfAFIFOSaysItIsAFIFO() throws {
        let store = try TestStore()
        defer { store.delete() }
        try FileManager.default.createDirectory(atPath: store.path + "/Person", withIntermediateDirectories: false)
        try #require(mkfifo(store.path + "/Person/f.json", 0o644) == 0)
        try store.run("scan")
        let result = try store.run("get", "Person/f")
        #expect(result.status == 1, "\(result)")
        #expect(result.errorOutput.contains("Person/f.json is a FIFO, not a regular file"), "\(result)")
    }

    @Test func aSymlinkedCollectionIsNamedAsTheSymlink() throws {
        let store = try TestStore()
        defer { store.delete() }
        let outside = store.directory + "/outside"
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: false)
        _ = FileManager.default.createFile(atPath: outside + "/passwd.json", contents: Data("{}".utf8))
        try FileManager.default.createSymbolicLink(atPath: store.path + "/EtcColl", withDestinationPath: outside)
        let put = try store.run("put", "EtcColl/x", stdin: Data("{}".utf8))
        #expect(put.status == 1, "\(put)")
        #expect(put.errorOutput == "archive-sync: \(store.path)/EtcColl is a symlink; the store does not follow symlinks\n", "\(put)")
        let get = try store.run("get", "EtcColl/passwd")
        #expect(get.errorOutput == "archive-sync: \(store.path)/EtcColl is a symlink; the store does not follow symlinks\n", "\(get)")
        #expect(FileManager.default.contents(atPath: outside + "/x.json") == nil)
    }

    @Test func putFileFailuresSayWhy() throws {
        let store = try TestStore()
        defer { store.delete() }
        let missing = try store.run("put", "Person/p", "--file", store.directory + "/nope.json")
        #expect(missing.status == 2, "\(missing)")
        #expect(missing.errorOutput.hasSuffix("nope.json: no such file or directory\n"), "\(missing)")
        let directory = try store.run("put", "Person/p", "--file", store.directory)
        #expect(directory.errorOutput.hasSuffix(": it is a directory, not a regular file\n"), "\(directory)")
        try #require(mkfifo(store.directory + "/fifo", 0o644) == 0)
        let fifo = try store.run("put", "Person/p", "--file", store.directory + "/fifo")
        #expect(fifo.status == 2, "\(fifo)")
        #expect(fifo.errorOutput.hasSuffix(": it is a FIFO, not a regular file\n"), "\(fifo)")
    }

    @Test func aSecondSyncOfTheSameStoreIsBusyNotBadUsage() throws {
        let a = try TestStore()
        let b = try TestStore()
        defer {
            a.delete()
            b.delete()
        }
        // Hold A's sync lock as a running sync does.
        let fd = open(a.path + "/.archive-sync/sync.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        try #require(fd >= 0)
        defer { close(fd) }
        try #require(flock(fd, LOCK_EX | LOCK_NB) == 0)
        let result = try runArchiveSync(["sync", a.path, b.path])
        #expect(result.status == 3, "\(result)")
        #expect(result.errorOutput.contains("another sync of \(a.path) is running"), "\(result)")
    }

    @Test func aMistypedCommandGetsTheNearestOne() throws {
        let result = try runArchiveSync(["snyc", "a", "b"])
        #expect(result.status == 2, "\(result)")
        #expect(result.errorOutput == "archive-sync: 'snyc' is not an archive-sync command; did you mean 'sync'?\n", "\(result)")
    }

    @Test func helpForAnUnknownCommandFails() throws {
        for arguments in [["help", "nothing"], ["nothing", "--help"]] {
            let result = try runArchiveSync(arguments)
            #expect(result.status == 2, "\(result)")
            #expect(result.errorOutput.contains("'nothing' is not an archive-sync command"), "\(result)")
            #expect(result.output.isEmpty, "\(result)")
        }
    }

    @Test func getHasOneVersionOptionAndTheProgramItsOwn() throws {
        let help = try runArchiveSync(["get", "--help"])
        #expect(help.output.components(separatedBy: "--version").count - 1 == 3, "\(help)")  // example, usage, option
        #expect(!help.output.contains("Show the version"), "\(help)")
        let version = try runArchiveSync(["--version"])
        #expect(version.status == 0 && version.output == "0.1.0\n", "\(version)")
    }

    @Test func lsOfACollectionWithNoObjectFailsNamingIt() throws {
        let store = try TestStore()
        defer { store.delete() }
        try store.put("Person/ada", "{}")
        let result = try store.run("ls", "NoSuchColl")
        #expect(result.status == 2, "\(result)")
        #expect(result.errorOutput.contains("'NoSuchColl'") && result.errorOutput.contains("has no object in it"), "\(result)")
        #expect(result.output.isEmpty, "\(result)")
    }

    /// ArgumentParser wraps each paragraph itself: a paragraph hard-wrapped in the source came
    /// out with a one-word line wherever the two wraps disagreed.
    @Test func helpParagraphsAreWrappedOnce() throws {
        for command in ["sync", "import", "dump", "serve", "init", "scan", "verify", "put"] {
            let help = try runArchiveSync([command, "--help"])
            let lines = help.output.split(separator: "\n", omittingEmptySubsequences: false)
            for (line, next) in zip(lines, lines.dropFirst()) where !line.isEmpty && !next.isEmpty && !line.hasPrefix(" ") && !next.hasPrefix(" ") {
                // A wrap is ragged when the next line's first word would have fitted (ArgumentParser wraps before column 80).
                let word = next.prefix { $0 != " " }
                #expect(line.count + 1 + word.count >= 80, "\(command) --help wraps early: \(line) / \(next)")
            }
        }
    }

    @Test func helpShowsEachDefaultOnce() throws {
        let help = try runArchiveSync(["sync", "--help"])
        #expect(help.output.components(separatedBy: "(default: ssh)").count == 2, "\(help)")
    }
}
