import ArchiveStore
import ArgumentParser
import Foundation
import KeyedArchive

struct Import: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Import NSKeyedArchiver archives into a store, one object per archive, saved as JSON.",
        discussion: """
            Each SRC is an archive file, or a directory searched recursively for files ending in .archiver, .archive, .plist or .keyedarchive. Archives are read by archive-sync's own reader, never by NSKeyedUnarchiver, so no file can crash the import.

            Each archive becomes the object COLLECTION/KEY, saved as JSON: the collection is the root object's class name (or --collection), the key the file name without its extension. Files named the WZXArchiver way, WZX_<Class>_<name>.archiver, get the key <name>; their "son" files, WZX_<Class>_<name>_<SonClass>_<property>.archiver, are folded back into the parent as its field <property>.

            Every file is read before anything is written. A file that cannot be read is reported on stderr with the reason and left out; the others are imported, and the exit status is 1. Importing the same archives again writes nothing (same content, no new version).

            Examples:
              archive-sync import ~/Documents/archives --into ./store
              archive-sync import WZX_PersonModel_person1.archiver --into ./store --dry-run
            """
    )

    @Argument(help: ArgumentHelp("Archive files, or directories of them.", valueName: "src"))
    var sources: [String]

    @Option(help: ArgumentHelp("The store to import into (it must exist: see `archive-sync init`).", valueName: "store"))
    var into: String

    @Option(help: "Put every object in this collection instead of its root class's name.")
    var collection: String?

    @Flag(help: "Read and check everything and print what would be written, but write nothing.")
    var dryRun = false

    @OptionGroup var output: OutputOptions

    /// One line of the report.
    struct Entry: Encodable {
        var id: String
        /// created, updated or unchanged.
        var status: String
        var files: [String]
        var foldedFields: [String]
    }

    struct Report: Encodable {
        var dryRun: Bool
        var objects: [Entry]
        var skipped: [SkippedFile]
    }

    struct SkippedFile: Encodable {
        var file: String
        var reason: String
    }

    func validate() throws {
        if sources.isEmpty { throw ValidationError("give at least one archive file or directory to import") }
        if let collection {
            do { _ = try ObjectID(collection: collection, key: "key") } catch { throw ValidationError("\(error)") }
        }
    }

    func run() throws {
        let store = try ArchiveStore(directory: into, options: .init(create: false)).notingPendingRecovery()
        let plan = KeyedImportPlan(sources: sources, collection: collection)
        var entries: [Entry] = []
        var changed: [KeyedImportPlan.Object] = []
        var skipped = plan.skipped
        for object in plan.objects {
            let encoded: Data
            do {
                encoded = try ArchiveCodec.json.encode(object.value)
            } catch {
                let detail = (error as? EncodingError).map { error -> String in
                    if case .invalidValue(_, let context) = error { return context.debugDescription }
                    return "\(error)"
                }
                skipped.append(.init(file: object.files[0], reason: "it cannot be saved as JSON: \(detail ?? "\(error)")"))
                continue
            }
            let stored = try? store.data(for: object.id)
            let status = stored == nil ? "created" : stored == encoded ? "unchanged" : "updated"
            if status != "unchanged" { changed.append(object) }
            entries.append(Entry(id: object.id.description, status: status, files: object.files, foldedFields: object.foldedFields))
        }
        if !dryRun, !changed.isEmpty {
            try store.batch { tx in
                for object in changed { try tx.save(object.value, forKey: object.id.key, in: object.id.collection) }
            }
        }
        skipped.sort { $0.file < $1.file }
        for file in skipped { printError("skipped \(file.file): \(file.reason)") }
        if output.json {
            try output.printJSON(Report(dryRun: dryRun, objects: entries, skipped: skipped.map { SkippedFile(file: $0.file, reason: $0.reason) }))
        } else {
            printText(entries, skipped: skipped.count)
        }
        if !skipped.isEmpty { throw ExitCode(1) }
    }

    private func printText(_ entries: [Entry], skipped: Int) {
        let verbs = dryRun ? ["created": "would create", "updated": "would update", "unchanged": "unchanged"] : [:]
        let rows = entries.map { entry -> [String] in
            var source = entry.files[0]
            for (file, field) in zip(entry.files.dropFirst(), entry.foldedFields) { source += " + \(field) from \(file)" }
            return [verbs[entry.status] ?? entry.status, entry.id, source]
        }
        if !rows.isEmpty { print(table(rows)) }
        let counts = ["created", "updated", "unchanged"].map { status in entries.filter { $0.status == status }.count }
        let files = entries.reduce(0) { $0 + $1.files.count }
        var summary =
            "\(dryRun ? "would import" : "imported") \(files) archive\(files == 1 ? "" : "s") as \(entries.count) object\(entries.count == 1 ? "" : "s")"
            + " (\(counts[0]) new, \(counts[1]) updated, \(counts[2]) unchanged)"
        if skipped > 0 { summary += "; skipped \(skipped) file\(skipped == 1 ? "" : "s")" }
        if dryRun { summary += "; dry run, nothing written" }
        printLine(summary)
    }
}
