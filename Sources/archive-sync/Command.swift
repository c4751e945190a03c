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
            A store is a directory with one archive file per object (STORE/Collection/key.json) and a manifest under STORE/.archive-sync/ that versions every object. Objects are named COLLECTION/KEY, such as Person/person1.

            Exit status: 0 on success, 1 when a check finds a problem (or the system fails), 2 for bad usage or bad input, 3 when another process holds what the command needs (a running sync of the same store, the watch lease) and it can be run again later. Errors go to stderr in one sentence. `archive-sync --version` prints the version.
            """,
        subcommands: [
            Init.self, Put.self, Get.self, List.self, Remove.self, History.self, Restore.self, Scan.self, Verify.self, Status.self, Repair.self,
            Watch.self,
            Diff.self, SyncCommand.self, Conflicts.self, Resolve.self, Serve.self, Dump.self, Import.self, Compact.self,
        ]
    )

    /// The version `archive-sync --version` prints. Neither the configuration's `version:` nor a
    /// flag of this command: ArgumentParser offers both to every subcommand, where they clash
    /// with `get --version N`.
    static let programVersion = "0.1.0"

    /// Runs the command and maps every failure to the documented exit status.
    static func main() {
        // Two malloc arenas, not one for each thread a scan, a sync's pipeline or a watcher
        // runs on, each keeping its own free pages: a first sync of 100,000 objects peaked at
        // 55 MB without the cap and 45 MB with it (Benchmarks/README.md).
        archive_limit_heap_arenas(2)
        let status: Int32
        do {
            let arguments = Array(CommandLine.arguments.dropFirst())
            if arguments == ["--version"] {
                print(programVersion)
                Foundation.exit(ExitStatus.success)
            }
            try refuseArgumentsNotUTF8()
            try refuseUnknownSubcommand(arguments)
            var command = try parseAsRoot()
            try command.run()
            status = ExitStatus.success
        } catch let error as any ExitStatusError {
            printError(terminalSafe(error.description))
            status = error.exitStatus
        } catch let code as ExitCode {
            status = code.rawValue  // the command printed its own report (verify, import)
        } catch {
            // ArgumentParser's own outcomes: help prints to stdout with status 0, a usage error
            // is bad usage (its EX_USAGE becomes our 2); anything else failed (1), never "bad input".
            let code = exitCode(for: error)
            if code == .success {
                print(fullMessage(for: error))
                status = ExitStatus.success
            } else {
                printError(message(for: error))
                status = code == .validationFailure ? ExitStatus.badInput : ExitStatus.failure
            }
        }
        Foundation.exit(status)
    }

    /// Refuses an argument that is not valid UTF-8. `CommandLine.arguments` decodes each one
    /// lossily, so a key with a `\xff` byte would silently name another key (with U+FFFD), and
    /// a path another file: the raw bytes tell.
    static func refuseArgumentsNotUTF8() throws {
        for index in 1..<Int(CommandLine.argc) {
            guard let argument = CommandLine.unsafeArgv[index] else { continue }
            let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(argument).assumingMemoryBound(to: UInt8.self), count: strlen(argument))
            guard String(validating: bytes, as: UTF8.self) == nil else { continue }
            throw ArchiveError.invalidInput(
                "argument \(index), '\(ArchiveStore.readableName(bytes))', is not valid UTF-8; keys, collection names and paths must be")
        }
    }

    /// ArgumentParser reads `archive-sync snyc a b` as "3 unexpected arguments", and prints the
    /// top-level help for `help nothing` or `nothing --help` with status 0: name the unknown
    /// command instead, with the nearest real one.
    static func refuseUnknownSubcommand(_ arguments: [String]) throws {
        guard var first = arguments.first, !first.hasPrefix("-") else { return }
        let names = configuration.subcommands.map { $0._commandName } + ["help"]
        if first == "help" {
            guard let topic = arguments.dropFirst().first(where: { !$0.hasPrefix("-") }) else { return }
            first = topic
        }
        guard !names.contains(first) else { return }
        let nearest = names.map { ($0, editDistance($0, first)) }.min { $0.1 < $1.1 }
        let suggestion = nearest.flatMap { $0.1 <= 2 ? "; did you mean '\($0.0)'?" : nil } ?? "; see 'archive-sync --help'"
        throw ArchiveError.invalidInput("'\(first)' is not an archive-sync command\(suggestion)")
    }
}

/// The Levenshtein distance between two short words, for "did you mean".
func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a), b = Array(b)
    var previous = Array(0...b.count)
    for i in 1...max(a.count, 1) where !a.isEmpty {
        var current = [i] + Array(repeating: 0, count: b.count)
        for j in stride(from: 1, through: b.count, by: 1) {
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
        }
        previous = current
    }
    return previous[b.count]
}

/// Writes a message to stderr, prefixed with the command's name, each of its lines made
/// ``terminalSafe(_:)`` (ArgumentParser's usage errors take several lines).
func printError(_ message: String) {
    let lines = message.split(separator: "\n", omittingEmptySubsequences: false).map { terminalSafe(String($0)) }
    FileHandle.standardError.write(Data("archive-sync: \(lines.joined(separator: "\n"))\n".utf8))
}
