import ArchiveStore
import ArchiveSync
import ArchiveWatch
import ArgumentParser
import CArchiveShims
import Foundation

@main
struct ArchiveSyncCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "archive-sync",
        abstract: "Keep directories of Codable archives versioned, verified and in step.",
        discussion: """
            A store is a directory with one archive file per object (STORE/Collection/key.json)
            and a manifest under STORE/.archive-sync/ that versions every object. Objects are
            named COLLECTION/KEY, such as Person/person1.

            Exit status: 0 on success, 1 when a check finds a problem (or the system fails),
            2 for bad usage or bad input. Errors go to stderr in one sentence.
            """,
        version: "0.1.0",
        subcommands: [
            Init.self, Put.self, Get.self, List.self, Remove.self, History.self, Restore.self, Scan.self, Verify.self, Status.self, Watch.self,
            Diff.self, SyncCommand.self, Conflicts.self, Serve.self, Dump.self, Import.self,
        ]
    )

    /// Runs the command and maps every failure to the documented exit status.
    static func main() {
        // Two malloc arenas, not one for each thread a scan, a sync's pipeline or a watcher
        // runs on, each keeping its own free pages: a first sync of 100,000 objects peaked at
        // 55 MB without the cap and 45 MB with it (Benchmarks/README.md).
        archive_limit_heap_arenas(2)
        let status: Int32
        do {
            var command = try parseAsRoot()
            try command.run()
            status = 0
        } catch let error as ArchiveError {
            printError(error.description)
            status = error.isBadInput ? 2 : 1
        } catch let error as WatchError {
            printError(error.description)
            status = 1
        } catch let error as SyncError {
            printError(error.description)
            status = 1
        } catch let error as WatchFailed {
            printError(error.description)
            status = 1
        } catch let code as ExitCode {
            status = code.rawValue
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                print(fullMessage(for: error))
                status = 0
            } else {
                printError(message(for: error))
                status = 2
            }
        }
        Foundation.exit(status)
    }
}

/// Writes one line to stderr, prefixed with the command's name.
func printError(_ message: String) {
    FileHandle.standardError.write(Data("archive-sync: \(message)\n".utf8))
}
